/* hiredis for the Redis store: what Swift cannot call directly (a struct
 * timeval argument, a variadic function). */
#include "tickgate_redis.h"

#include <errno.h>
#include <sys/time.h>

static struct timeval tgshim_timeval(int64_t ms) {
    struct timeval tv;
    tv.tv_sec = (time_t)(ms / 1000);
    tv.tv_usec = (suseconds_t)((ms % 1000) * 1000);
    return tv;
}

redisContext *tgshim_redis_connect(const char *host, int port, const char *unix_path,
                                   int64_t timeout_ms) {
    struct timeval tv = tgshim_timeval(timeout_ms);
    redisContext *context = unix_path != NULL ? redisConnectUnixWithTimeout(unix_path, tv)
                                              : redisConnectWithTimeout(host, port, tv);
    if (context != NULL && context->err == 0) {
        if (redisSetTimeout(context, tv) != REDIS_OK) {
            context->err = REDIS_ERR_IO;
        }
    }
    return context;
}

int tgshim_redis_set_timeout(redisContext *context, int64_t timeout_ms) {
    return redisSetTimeout(context, tgshim_timeval(timeout_ms)) == REDIS_OK ? 0 : EINVAL;
}

redisReply *tgshim_redis_command(redisContext *context, int argc, const char *const *argv,
                                 const size_t *lengths) {
    return redisCommandArgv(context, argc, (const char **)argv, lengths);
}

redisReply *tgshim_redis_read(redisContext *context) {
    void *reply = NULL;
    if (redisGetReply(context, &reply) != REDIS_OK) return NULL;
    return (redisReply *)reply;
}
