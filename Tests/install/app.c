/* A user's program, built against an installed Tickgate. */
#include <stdio.h>
#include <tickgate.h>

int main(void)
{
    tg_engine *engine = NULL;
    int64_t left = 0;
    if (tg_version() >> 16 != TG_VERSION_MAJOR) return 1;
    if (tg_engine_open(NULL, &engine) != TG_OK) return 1;
    if (tg_countdown_start(engine, "login", "+8613800000000", 60000, 0, 0, &left) != TG_OK)
        return 1;
    printf("installed tickgate %s: cooldown %lld ms\n", tg_version_string(), (long long)left);
    return tg_engine_close(engine) == TG_OK && left == 60000 ? 0 : 1;
}
