/*
 * prelude.h — what the README's C fragments assume the host has (a phone
 * number, a ticket, the host's own SMS API and UI), for Tests/docs/run_blocks.py.
 * A fragment's functions go after this; its statements run inside
 * run(engine) on a host-thread engine with a manual clock, which main() then
 * moves on by a second at a time for 400 s, dispatching every event.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tickgate.h>

static const char *phone = "+8613800000000";
static tg_ticket ticket;
static tg_subscription subscription;
static tg_request request;
static int ok = 1;
static int64_t retry_after_ms = 0;
static char button[1], ui[1], orders_tab[1];

static void paint_button(const tg_event *e, void *b)
{
    (void)b;
    printf("button: %s (%s)\n", e->title, e->enabled ? "enabled" : "disabled");
}

static void sms_api_send(const char *to, tg_ticket t)
{
    printf("sms to %s, ticket %llu\n", to, (unsigned long long)t);
}

static void show_tab(void *tab)
{
    (void)tab;
    printf("the orders tab opens\n");
}

static void present_login(void *u)
{
    (void)u;
    printf("the login screen opens\n");
}
