/*
 * unload.c — shutdown and unload: a host that dlopens Tickgate, closes its
 * engines with everything about to fire, dlcloses the library and goes on.
 *
 * Each cycle:
 *   1. dlopen the library (RTLD_NOW | RTLD_LOCAL) and look up what it needs;
 *   2. a helper thread makes calls (good and failing ones, so it has the
 *      thread-local error message) and stays alive past the dlclose;
 *   3. an engine-thread engine and a host-thread engine get key and scope
 *      observers, 40 countdowns of 1-20 ms (10 ms ticks), send tickets that
 *      expire in 5 ms, gate requests queued with a 5 ms timeout and
 *      runs-now requests, a session with a 5 ms TTL; some fire;
 *   4. both engines are closed (from the main thread, outside callbacks):
 *      every destructor must have run when close returns;
 *   5. dlclose; then sleep 150 ms, well past every deadline: no callback may
 *      run (one would also crash, the library's code being unmapped);
 *   6. the helper thread exits (thread-exit handlers of the library, if it
 *      had any left, would run now);
 *   7. threads and descriptors are back to what they were.
 *
 *   unload [LIBRARY] [--cycles=N] [--no-dlclose]
 *
 * --no-dlclose loads with RTLD_NODELETE (the library stays mapped): under
 * LeakSanitizer it tells the memory a dlclose strands (static storage of
 * the statically linked Swift runtime and of the library, reachable only
 * from the unmapped image: about 8 KB per load) from real leaks.
 *
 * LIBRARY: the argument, else $TICKGATE_LIBRARY, else "libtickgate.so.0"
 * through the system loader. Reports whether dlclose really unmapped the
 * library (RTLD_NOLOAD) and exits 0 when every check held.
 *
 * What this proves for hosts: close every engine from outside its callbacks
 * before dlclose; then unloading is safe. (A close from inside an
 * engine-thread callback returns while that thread is still finishing in
 * the library: do not unload right after such a close.)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <tickgate.h>

/* The functions this host uses, looked up with dlsym. */
static struct {
    uint32_t (*version)(void);
    tg_status (*options_init)(tg_engine_options *, size_t);
    tg_status (*open)(const tg_engine_options *, tg_engine **);
    tg_status (*close)(tg_engine *);
    tg_status (*dispatch)(tg_engine *, size_t *);
    tg_status (*start)(tg_engine *, const char *, const char *, int64_t,
                       int64_t, uint32_t, int64_t *);
    tg_status (*subscribe)(tg_engine *, const char *, const char *,
                           tg_event_fn, void *, tg_destroy_fn,
                           tg_subscription *);
    tg_status (*policy_init)(tg_policy *, size_t);
    tg_status (*policy_set)(tg_engine *, const char *, const tg_policy *);
    tg_status (*send_begin)(tg_engine *, const char *, const char *,
                            tg_ticket *, int64_t *);
    tg_status (*require)(tg_engine *, const char *, int, const char *,
                         tg_action_fn, tg_cancel_fn, void *, tg_destroy_fn,
                         tg_request *, tg_require_result *);
    tg_status (*set_request_timeout)(tg_engine *, const char *, int64_t);
    tg_status (*login_succeeded)(tg_engine *, const char *, int64_t);
    tg_status (*gate_subscribe)(tg_engine *, const char *, tg_gate_event_fn,
                                void *, tg_destroy_fn, tg_subscription *);
    const char *(*last_error)(void);
} tg;

static atomic_int g_closed;      /* both engines closed: no callback now */
static atomic_long g_callbacks, g_late, g_destroyed, g_registered;
static int g_failures;

static void failf(const char *fmt, const char *detail)
{
    fprintf(stderr, "FAIL: ");
    fprintf(stderr, fmt, detail);
    fprintf(stderr, "\n");
    g_failures++;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static void on_event(const tg_event *ev, void *ud)
{
    (void)ev;
    (void)ud;
    atomic_fetch_add(&g_callbacks, 1);
    if (atomic_load(&g_closed))
        atomic_fetch_add(&g_late, 1);
}

static void on_gate(const tg_gate_event *ev, void *ud)
{
    (void)ev;
    on_event(NULL, ud);
}

static void on_action(tg_request r, void *ud)
{
    (void)r;
    on_event(NULL, ud);
}

static void on_cancel(tg_request r, tg_cancel_reason why, void *ud)
{
    (void)r;
    (void)why;
    on_event(NULL, ud);
}

static void on_destroy(void *ud)
{
    (void)ud;
    atomic_fetch_add(&g_destroyed, 1);
    if (atomic_load(&g_closed))
        atomic_fetch_add(&g_late, 1);
}

static int count_dir(const char *path)
{
    DIR *d = opendir(path);
    struct dirent *de;
    int n = 0;
    if (!d)
        return -1;
    while ((de = readdir(d)) != NULL)
        if (de->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

static int load(void *h)
{
#define SYM(field, name)                                                    \
    do {                                                                    \
        *(void **)(&tg.field) = dlsym(h, name);                             \
        if (!tg.field) {                                                    \
            failf("dlsym %s", name);                                        \
            return 0;                                                       \
        }                                                                   \
    } while (0)
    SYM(version, "tg_version");
    SYM(options_init, "tg_engine_options_init");
    SYM(open, "tg_engine_open");
    SYM(close, "tg_engine_close");
    SYM(dispatch, "tg_engine_dispatch");
    SYM(start, "tg_countdown_start");
    SYM(subscribe, "tg_subscribe");
    SYM(policy_init, "tg_policy_init");
    SYM(policy_set, "tg_policy_set");
    SYM(send_begin, "tg_send_begin");
    SYM(require, "tg_gate_require");
    SYM(set_request_timeout, "tg_gate_set_request_timeout");
    SYM(login_succeeded, "tg_gate_login_succeeded");
    SYM(gate_subscribe, "tg_gate_subscribe");
    SYM(last_error, "tg_last_error_message");
#undef SYM
    return 1;
}

/* ---- the helper thread: lives across the dlclose ---- */

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static int g_helper_ready, g_helper_go;

static void *helper(void *arg)
{
    tg_engine *e = NULL;
    tg_engine_options o;
    (void)arg;
    tg.options_init(&o, sizeof o);
    o.delivery = TG_DELIVERY_HOST_THREAD;
    if (tg.open(&o, &e) == TG_OK) {
        (void)tg.start(e, "", "x", 1, 0, 0, NULL);   /* fails: a message */
        (void)tg.start(e, "login", "x", 1, 0, 0, NULL);
        if (tg.last_error()[0] == '\0')
            failf("%s", "helper: no error message after a failing call");
        tg.close(e);
    }
    pthread_mutex_lock(&g_mu);
    g_helper_ready = 1;
    pthread_cond_broadcast(&g_cv);
    while (!g_helper_go)
        pthread_cond_wait(&g_cv, &g_mu);
    pthread_mutex_unlock(&g_mu);
    return NULL; /* thread exit after the library was unloaded */
}

/* ---- one engine full of things about to fire ---- */

static tg_engine *fill(tg_delivery delivery)
{
    tg_engine_options o;
    tg_engine *e = NULL;
    tg_policy p;
    int i;
    tg.options_init(&o, sizeof o);
    o.delivery = delivery;
    if (tg.open(&o, &e) != TG_OK) {
        failf("open: %s", tg.last_error());
        return NULL;
    }
    tg.policy_init(&p, sizeof p);
    p.cooldown_ms[0] = 3;
    p.ticket_timeout_ms = 5;
    tg.policy_set(e, "login", &p);
    tg.set_request_timeout(e, "account", 5);
    for (i = 0; i < 8; i++) {
        tg_subscription id;
        char subject[8];
        snprintf(subject, sizeof subject, "k%d", i);
        if (tg.subscribe(e, "login", i % 2 ? subject : NULL, on_event, NULL,
                         on_destroy, &id) == TG_OK)
            atomic_fetch_add(&g_registered, 1);
    }
    {
        tg_subscription id;
        if (tg.gate_subscribe(e, "account", on_gate, NULL, on_destroy, &id) ==
            TG_OK)
            atomic_fetch_add(&g_registered, 1);
    }
    for (i = 0; i < 40; i++) {
        char subject[8];
        snprintf(subject, sizeof subject, "k%d", i);
        tg.start(e, "login", subject, 1 + i % 20, 10, 0, NULL);
    }
    for (i = 0; i < 4; i++) {
        tg_ticket t;
        char subject[8];
        snprintf(subject, sizeof subject, "s%d", i);
        tg.send_begin(e, "login", subject, &t, NULL);
    }
    for (i = 0; i < 10; i++) {
        tg_request r;
        tg_require_result res;
        if (tg.require(e, i < 3 ? "free" : "account", i >= 3, NULL, on_action,
                       on_cancel, NULL, on_destroy, &r, &res) == TG_OK)
            atomic_fetch_add(&g_registered, 1);
    }
    tg.login_succeeded(e, "session", 5);
    return e;
}

int main(int argc, char **argv)
{
    const char *path = getenv("TICKGATE_LIBRARY");
    int cycles = 10, i, unloaded = 0, keep = 0;
    int fds0, tasks0;

    for (i = 1; i < argc; i++) {
        if (strncmp(argv[i], "--cycles=", 9) == 0)
            cycles = atoi(argv[i] + 9);
        else if (strcmp(argv[i], "--no-dlclose") == 0)
            keep = 1; /* diagnostic: everything but the unload */
        else
            path = argv[i];
    }
    if (!path)
        path = "libtickgate.so.0";
    fds0 = count_dir("/proc/self/fd");
    tasks0 = count_dir("/proc/self/task");

    for (i = 0; i < cycles && g_failures == 0; i++) {
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | (keep ? RTLD_NODELETE : 0));
        tg_engine *a, *b;
        pthread_t ht;
        long at_close;
        if (!h) {
            fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
            return 2;
        }
        if (!load(h))
            break;
        if ((tg.version() >> 16) != TG_VERSION_MAJOR)
            failf("%s", "the library's major version differs from the header's");
        atomic_store(&g_closed, 0);
        atomic_store(&g_destroyed, 0);
        atomic_store(&g_registered, 0);
        g_helper_ready = g_helper_go = 0;
        pthread_create(&ht, NULL, helper, NULL);
        pthread_mutex_lock(&g_mu);
        while (!g_helper_ready)
            pthread_cond_wait(&g_cv, &g_mu);
        pthread_mutex_unlock(&g_mu);

        a = fill(TG_DELIVERY_ENGINE_THREAD);
        b = fill(TG_DELIVERY_HOST_THREAD);
        sleep_ms(i % 3); /* 0-2 ms: some fire, most are about to */
        if (b)
            tg.dispatch(b, NULL);
        if (a && tg.close(a) != TG_OK)
            failf("%s", "close (engine thread)");
        if (b && tg.close(b) != TG_OK)
            failf("%s", "close (host thread)");
        atomic_store(&g_closed, 1);
        at_close = atomic_load(&g_callbacks);
        if (atomic_load(&g_destroyed) != atomic_load(&g_registered))
            failf("%s", "close returned before every destructor ran");

        memset(&tg, 0, sizeof tg); /* nothing of the library is used now */
        if (dlclose(h) != 0)
            failf("dlclose: %s", dlerror());
        h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
        if (h) {
            dlclose(h);
        } else {
            unloaded++;
        }
        sleep_ms(150); /* past every deadline (20 ms) and timeout (5 ms) */
        if (atomic_load(&g_callbacks) != at_close || atomic_load(&g_late))
            failf("%s", "a callback or destructor ran after close/dlclose");

        pthread_mutex_lock(&g_mu);
        g_helper_go = 1;
        pthread_cond_broadcast(&g_cv);
        pthread_mutex_unlock(&g_mu);
        pthread_join(ht, NULL);
    }
    sleep_ms(20);
    if (count_dir("/proc/self/task") != tasks0)
        failf("%s", "threads left behind");
    if (count_dir("/proc/self/fd") != fds0)
        failf("%s", "descriptors left behind");
    printf("unload: %d cycles of %s, %ld callbacks before close, library "
           "unmapped by dlclose in %d of %d cycles\n",
           i, path, atomic_load(&g_callbacks), unloaded, i);
    if (unloaded == 0)
        printf("unload: note: dlclose left the library mapped (the loader "
               "keeps it), so the sleep proves no engine thread survives "
               "close, not that unmapped code is never run\n");
    printf("unload: %s\n", g_failures ? "FAILED" : "OK");
    return g_failures ? 1 : 0;
}
