/*
 * bench_redis.c — Tickgate on a Redis store against the floor of the same
 * server: decisions per second beside redis-benchmark's SET (one plain
 * round trip per request), and each decision's cost on the server beside a
 * SET's (usec_per_call of INFO commandstats).
 *
 * The run starts its own redis-server (defaults, no persistence) on a unix
 * socket in a temporary folder; Tickgate's engines and redis-benchmark both
 * use that socket. Workloads, each for about a second:
 *
 *   send     tg_send_begin + tg_send_end(SUCCEEDED) of a new key (2 decisions)
 *   start    tg_countdown_start + tg_countdown_cancel (2 decisions)
 *   query    tg_countdown_remaining of a counting key (1 read)
 *
 * from 1, 4 and 16 threads of one engine (n=1, 4, 16; send also from 64,
 * each thread on keys of its own) and from 4 processes of one thread
 * (n=4p), against redis-benchmark -t set -c 1, 4, 16, 64 (4p: -c 4). A
 * decision is one call, one round trip: a send's tg_send_begin and
 * tg_send_end are two, as a SET is one request.
 *
 *   BENCH redis_<w> n=<n> tickgate=<decisions/s> set=<requests/s> unit=ops/s ratio_set=<r>
 *   BENCH redis_server_cost_<w> n=1 tickgate=<us> set=<us> unit=us ratio_set=<r>
 *   TARGET redis_round_trips_<w> value=<scripts per decision> limit=<=1 ...
 *   TARGET redis_<w> n=1 value=<ratio_set> limit=>=0.7 ...
 *   TARGET redis_server_cost_<w> value=<ratio_set> limit=<=3 ...
 *   TARGET redis_send n=16 value=<ratio_set> limit=>=0.6 ...     (issue 30)
 *
 * A refusal the engine can make alone (issue 30): the engine sent on 1000
 * keys, then calls tg_send_begin on them again and again (all cooling):
 * ns per refused call on Redis beside the same with an engine in memory,
 * and the commands the server ran per call (0: it was not asked):
 *
 *   BENCH redis_refused_local n=1 tickgate=<ns> memory=<ns> unit=ns ratio_memory=<r> server_commands=<c>
 *   TARGET redis_refused_local value=<ratio_memory> limit=<=2 ...
 *
 * A slow or busy machine can make a store call late (past store_timeout_ms),
 * a ticket expire, or a countdown end before its cancel: those are counted
 * and reported in a "#" line after the row (struct outcomes), not errors.
 *
 * Then the links production runs, on a second redis-server over TCP on
 * loopback with a replica, send decisions from 1 and 16 threads beside plain
 * TCP to the same server in the same run:
 *
 *   BENCH redis_link_tcp n=<n> tickgate=<decisions/s> unit=ops/s
 *   BENCH redis_link_tls n=<n> tickgate=<decisions/s> tcp=<decisions/s> unit=ops/s ratio_tcp=<r>
 *   BENCH redis_link_wait1 n=<n> tickgate=<decisions/s> tcp=<decisions/s> unit=ops/s ratio_tcp=<r>
 *
 * (rediss:// with a CA the run makes with openssl; replicas=1: WAIT 1 after
 * every decision).
 *
 * Usage: bench_redis [--quick]   (--quick: 0.3 s per row)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <tickgate.h>

/* The most threads of one engine a row uses. */
#define MAX_THREADS 64

static char g_dir[64];
static char g_socket[128];
static char g_url[160];
static pid_t g_server;
static double g_seconds = 1.0;
/* Decisions of the last engine_rate run. */
static long g_last_total;

enum workload { SEND, START, QUERY, WORKLOADS };
static const char *const names[WORKLOADS] = {"send", "start", "query"};

static void die(const char *what)
{
    fprintf(stderr, "bench_redis: %s: %s\n", what, tg_last_error_message());
    exit(1);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The output of a shell command (at most size - 1 bytes). */
static void run(const char *command, char *out, size_t size)
{
    FILE *p = popen(command, "r");
    size_t n = 0;
    if (!p) {
        perror(command);
        exit(1);
    }
    if (out && size) {
        n = fread(out, 1, size - 1, p);
        out[n] = '\0';
    } else {
        char sink[4096];
        while (fread(sink, 1, sizeof sink, p) > 0) {
        }
    }
    pclose(p);
}

static void cli(const char *args, char *out, size_t size)
{
    char command[512];
    snprintf(command, sizeof command, "redis-cli -s %s %s", g_socket, args);
    run(command, out, size);
}

/* The calls of a command in INFO commandstats ("evalsha", "set") and the
 * microseconds the server spent in them. */
static double usec_total(const char *command, long *calls)
{
    char info[16384], key[64];
    const char *at;
    double usec = 0;
    long n = 0;
    cli("INFO commandstats", info, sizeof info);
    snprintf(key, sizeof key, "cmdstat_%s:", command);
    at = strstr(info, key);
    if (at && sscanf(at + strlen(key), "calls=%ld,usec=%lf", &n, &usec) != 2) {
        usec = 0;
        n = 0;
    }
    if (calls)
        *calls = n;
    return usec;
}

/* The least a decision script can cost the server: one that reads the time
 * and a hash, writes the hash and sets its expiry (redis-benchmark runs it). */
static double script_floor_usec(void)
{
    char sha[64], command[512];
    long calls = 0;
    double usec;
    cli("SCRIPT LOAD \"local t = redis.call('TIME') local h = redis.call('HGETALL', KEYS[1]) "
        "redis.call('HSET', KEYS[1], 'd', t[1]) redis.call('PEXPIRE', KEYS[1], 60000) return 1\"",
        sha, sizeof sha);
    sha[strcspn(sha, "\r\n")] = '\0';
    cli("CONFIG RESETSTAT", NULL, 0);
    snprintf(command, sizeof command, "redis-benchmark -s %s -n 20000 -c 1 -q evalsha %s 1 floor{x} >/dev/null 2>&1",
             g_socket, sha);
    run(command, NULL, 0);
    usec = usec_total("evalsha", &calls);
    return calls ? usec / (double)calls : 0;
}

static void start_server(void)
{
    char out[64];
    int i;
    snprintf(g_dir, sizeof g_dir, "/tmp/tg-bench-redis-XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        exit(1);
    }
    snprintf(g_socket, sizeof g_socket, "%s/redis.sock", g_dir);
    snprintf(g_url, sizeof g_url, "redis+unix://%s", g_socket);
    g_server = fork();
    if (g_server == 0) {
        execlp("redis-server", "redis-server", "--port", "0", "--unixsocket", g_socket, "--save", "",
               "--appendonly", "no", "--dir", g_dir, "--logfile", "redis.log", (char *)NULL);
        _exit(127);
    }
    for (i = 0; i < 200; i++) {
        cli("ping 2>/dev/null", out, sizeof out);
        if (strncmp(out, "PONG", 4) == 0)
            return;
        usleep(50000);
    }
    fprintf(stderr, "bench_redis: redis-server did not start (is it installed?)\n");
    exit(1);
}

static void stop_server(void)
{
    char command[128];
    if (g_server > 0) {
        kill(g_server, SIGTERM);
        waitpid(g_server, NULL, 0);
    }
    snprintf(command, sizeof command, "rm -rf %s", g_dir);
    run(command, NULL, 0);
}

static double engine_rate(enum workload w, int threads);
static void report_outcomes(const char *row, const char *n);

/* ---- The links: TCP, TLS and WAIT 1, on a server of their own ---- */

static pid_t g_link_servers[2];

static int free_port(void)
{
    struct sockaddr_in a;
    socklen_t n = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0), port = 0;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &n) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

static int answers(int port)
{
    char command[128], out[64];
    snprintf(command, sizeof command, "redis-cli -p %d ping 2>/dev/null", port);
    run(command, out, sizeof out);
    return strncmp(out, "PONG", 4) == 0;
}

/* A redis-server on 127.0.0.1:port (and TLS on tls_port if not 0), a
 * replica of replica_of if not 0. */
static pid_t start_tcp_server(int port, int tls_port, int replica_of, const char *name)
{
    char dir[128], p[16], t[16], r[16], cert[160], key[160], ca[160];
    pid_t pid;
    snprintf(dir, sizeof dir, "%s/%s", g_dir, name);
    mkdir(dir, 0700);
    snprintf(p, sizeof p, "%d", port);
    snprintf(t, sizeof t, "%d", tls_port);
    snprintf(r, sizeof r, "%d", replica_of);
    snprintf(cert, sizeof cert, "%s/server.pem", g_dir);
    snprintf(key, sizeof key, "%s/server.key", g_dir);
    snprintf(ca, sizeof ca, "%s/ca.pem", g_dir);
    pid = fork();
    if (pid == 0) {
        if (tls_port)
            execlp("redis-server", "redis-server", "--port", p, "--bind", "127.0.0.1", "--save", "", "--appendonly",
                   "no", "--dir", dir, "--logfile", "redis.log", "--tls-port", t, "--tls-cert-file", cert,
                   "--tls-key-file", key, "--tls-ca-cert-file", ca, "--tls-auth-clients", "no", (char *)NULL);
        else
            execlp("redis-server", "redis-server", "--port", p, "--bind", "127.0.0.1", "--save", "", "--appendonly",
                   "no", "--dir", dir, "--logfile", "redis.log", "--replicaof", "127.0.0.1", r, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 200 && !answers(port); i++)
        usleep(50000);
    return pid;
}

static void link_rows(void)
{
    static const int threads[] = {1, 16};
    char command[1024], out[256];
    int port = free_port(), tls_port = free_port(), replica_port = free_port();
    double tcp[2], tls[2], wait1[2];
    /* A CA and a server certificate for 127.0.0.1, made here. */
    snprintf(command, sizeof command,
             "cd %s && openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=bench-ca "
             ">/dev/null 2>&1 && openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr "
             "-subj /CN=127.0.0.1 >/dev/null 2>&1 && printf 'subjectAltName=IP:127.0.0.1\n' > san.ext && "
             "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 "
             "-extfile san.ext >/dev/null 2>&1 && echo ok",
             g_dir);
    run(command, out, sizeof out);
    if (strncmp(out, "ok", 2) != 0) {
        printf("# redis_link_*: openssl could not make a certificate; no link rows\n");
        return;
    }
    g_link_servers[0] = start_tcp_server(port, tls_port, 0, "primary");
    g_link_servers[1] = start_tcp_server(replica_port, 0, port, "replica");
    for (int i = 0; i < 100; i++) {
        snprintf(command, sizeof command, "redis-cli -p %d info replication | grep -c 'master_link_status:up'",
                 replica_port);
        run(command, out, sizeof out);
        if (out[0] == '1')
            break;
        usleep(50000);
    }
    printf("# redis_link_*: send decisions on a redis-server over TCP on loopback with one replica: plain TCP,\n"
           "# TLS (rediss://, OpenSSL), and replicas=1 (WAIT 1 pipelined after every decision)\n");
    for (int i = 0; i < 2; i++) {
        tg_engine *probe;
        tg_engine_options o;
        snprintf(g_url, sizeof g_url, "redis://127.0.0.1:%d/0", port);
        tcp[i] = engine_rate(SEND, threads[i]);
        snprintf(g_url, sizeof g_url, "rediss://127.0.0.1:%d/0?tls_ca_cert_file=%s/ca.pem", tls_port, g_dir);
        tg_engine_options_init(&o, sizeof o);
        o.store_url = g_url;
        o.store_prefix = "bench:";
        if (tg_engine_open(&o, &probe) == TG_OK) {
            tg_engine_close(probe);
            tls[i] = engine_rate(SEND, threads[i]);
        } else {
            printf("# redis_link_tls: %s\n", tg_last_error_message());
            tls[i] = 0;
        }
        snprintf(g_url, sizeof g_url, "redis://127.0.0.1:%d/0?replicas=1", port);
        wait1[i] = engine_rate(SEND, threads[i]);
        printf("BENCH redis_link_tcp n=%d tickgate=%.0f unit=ops/s\n", threads[i], tcp[i]);
        if (tls[i] > 0)
            printf("BENCH redis_link_tls n=%d tickgate=%.0f tcp=%.0f unit=ops/s ratio_tcp=%.2f\n", threads[i], tls[i],
                   tcp[i], tls[i] / tcp[i]);
        printf("BENCH redis_link_wait1 n=%d tickgate=%.0f tcp=%.0f unit=ops/s ratio_tcp=%.2f\n", threads[i], wait1[i],
               tcp[i], wait1[i] / tcp[i]);
        {
            char n[16];
            snprintf(n, sizeof n, "%d", threads[i]);
            report_outcomes("redis_link_* (tcp, tls, wait1)", n);
        }
        fflush(stdout);
    }
    for (int i = 1; i >= 0; i--) {
        if (g_link_servers[i] > 0) {
            kill(g_link_servers[i], SIGTERM);
            waitpid(g_link_servers[i], NULL, 0);
        }
    }
}

static tg_engine *open_engine(void)
{
    tg_engine_options o;
    tg_engine *engine = NULL;
    tg_engine_options_init(&o, sizeof o);
    o.delivery = TG_DELIVERY_HOST_THREAD;
    o.store_url = g_url;
    o.store_prefix = "bench:";
    if (tg_engine_open(&o, &engine) != TG_OK)
        die("tg_engine_open");
    return engine;
}

/* Makes every row's keys new. */
static int g_row;

/* Outcomes a slow or busy machine makes possible, counted per row (a "#"
 * line after it), never fatal, and not counted as decisions:
 *   late      a store call past store_timeout_ms, or a server busy with
 *             another script or short of its replica's acknowledgement
 *             (TG_E_STORE_IO or TG_E_STORE_UNKNOWN of kind TIMEOUT, BUSY
 *             or NOT_REPLICATED);
 *   expired   a ticket that timed out between begin and end (TG_E_EXPIRED:
 *             the thread waited ticket_timeout_ms, 30 s);
 *   after     what a late change leaves behind: a start that may have been
 *             made answers COOLING_DOWN to the next start of its key, the
 *             cancel of a start that may not have been made NOT_FOUND, and
 *             a countdown whose time ran out before its cancel or query
 *             (NOT_FOUND once its duration has passed).
 * Anything else stops the benchmark: it is a fault, not the machine. */
struct outcomes {
    long late, expired, after;
};
static pthread_mutex_t g_outcomes_lock = PTHREAD_MUTEX_INITIALIZER;
static struct outcomes g_outcomes;

static int is_late(tg_status s)
{
    tg_store_failure kind;
    if (s != TG_E_STORE_IO && s != TG_E_STORE_UNKNOWN)
        return 0;
    kind = tg_last_store_failure();
    return kind == TG_STORE_FAILURE_TIMEOUT || kind == TG_STORE_FAILURE_BUSY ||
           kind == TG_STORE_FAILURE_NOT_REPLICATED;
}

/* The "#" line of the row just printed, if a slow machine showed. */
static void report_outcomes(const char *row, const char *n)
{
    struct outcomes o;
    pthread_mutex_lock(&g_outcomes_lock);
    o = g_outcomes;
    memset(&g_outcomes, 0, sizeof g_outcomes);
    pthread_mutex_unlock(&g_outcomes_lock);
    if (o.late || o.expired || o.after)
        printf("# %s n=%s: %ld store calls late (past store_timeout_ms, or the server busy), %ld tickets expired "
               "before their end, %ld calls answering what a late call or an ended countdown left (a busy "
               "machine; not counted as decisions)\n",
               row, n, o.late, o.expired, o.after);
}

struct worker {
    tg_engine *engine;
    enum workload w;
    int id;
    double until;
    long decisions;
    struct outcomes seen;
};

static void unexpected(tg_status s, const char *what)
{
    fprintf(stderr, "bench_redis: %s: %s (%s)\n", what, tg_status_string(s), tg_last_error_message());
    exit(1);
}

static void *work(void *arg)
{
    struct worker *k = arg;
    char subject[64];
    long i = 0;
    /* START: the last start or cancel of this thread's key was late, so
     * the key may hold a countdown, or not. */
    int unsure = 0;
    double query_started = 0;
    if (k->w == QUERY) {
        int64_t rem;
        tg_status s;
        snprintf(subject, sizeof subject, "q%d", k->id);
        while ((s = tg_countdown_start(k->engine, "bench", subject, 600000, 0, TG_START_RESTART, &rem)) != TG_OK) {
            if (!is_late(s))
                unexpected(s, "start");
            k->seen.late++;
        }
        query_started = now_s();
    }
    while (now_s() < k->until) {
        for (int batch = 0; batch < 64; batch++, i++) {
            int64_t rem = 0, display = 0, wait = 0, cooldown = 0;
            tg_ticket ticket = 0;
            tg_status s;
            double started;
            switch (k->w) {
            case SEND:
                snprintf(subject, sizeof subject, "s%d.%d.%ld.%d", g_row, k->id, i, getpid());
                s = tg_send_begin(k->engine, "bench", subject, &ticket, &wait);
                if (s != TG_OK) {
                    if (!is_late(s))
                        unexpected(s, "send begin");
                    k->seen.late++;
                    break;
                }
                k->decisions++;
                s = tg_send_end(k->engine, ticket, TG_SEND_SUCCEEDED, 0, &cooldown);
                if (s == TG_OK)
                    k->decisions++;
                else if (s == TG_E_EXPIRED)
                    k->seen.expired++;
                else if (is_late(s))
                    k->seen.late++;
                else
                    unexpected(s, "send end");
                break;
            case START:
                snprintf(subject, sizeof subject, "c%d.%d", k->id, getpid());
                started = now_s();
                s = tg_countdown_start(k->engine, "bench", subject, 60000, 0, 0, &rem);
                if (s == TG_OK)
                    k->decisions++;
                else if (is_late(s))
                    k->seen.late++, unsure = 1;
                else if (s == TG_E_COOLING_DOWN && unsure)
                    k->seen.after++; /* a late start or cancel was made after all */
                else
                    unexpected(s, "start");
                s = tg_countdown_cancel(k->engine, "bench", subject);
                if (s == TG_OK) {
                    k->decisions++;
                    unsure = 0;
                } else if (is_late(s)) {
                    k->seen.late++, unsure = 1;
                } else if (s == TG_E_NOT_FOUND && (unsure || now_s() - started >= 60.0)) {
                    k->seen.after++; /* the start was not made, or its minute ran out */
                    unsure = 0;
                } else {
                    unexpected(s, "cancel");
                }
                break;
            case QUERY:
                s = tg_countdown_remaining(k->engine, "bench", subject, &rem, &display);
                if (s == TG_OK)
                    k->decisions++;
                else if (is_late(s))
                    k->seen.late++;
                else if (s == TG_E_NOT_FOUND && now_s() - query_started >= 600.0)
                    k->seen.after++;
                else
                    unexpected(s, "remaining");
                break;
            default:
                break;
            }
        }
    }
    pthread_mutex_lock(&g_outcomes_lock);
    g_outcomes.late += k->seen.late;
    g_outcomes.expired += k->seen.expired;
    g_outcomes.after += k->seen.after;
    pthread_mutex_unlock(&g_outcomes_lock);
    return NULL;
}

/* Decisions per second from `threads` threads of one engine. */
static double engine_rate(enum workload w, int threads)
{
    g_row++;
    tg_engine *engine = open_engine();
    struct worker workers[MAX_THREADS];
    pthread_t ids[MAX_THREADS];
    double started = now_s(), elapsed;
    long total = 0;
    for (int t = 0; t < threads; t++) {
        workers[t] = (struct worker){engine, w, t, started + g_seconds, 0, {0, 0, 0}};
        pthread_create(&ids[t], NULL, work, &workers[t]);
    }
    for (int t = 0; t < threads; t++) {
        pthread_join(ids[t], NULL);
        total += workers[t].decisions;
    }
    elapsed = now_s() - started;
    tg_engine_close(engine);
    g_last_total = total;
    return (double)total / elapsed;
}

/* Decisions per second from 4 processes of one thread each. */
static double process_rate(enum workload w)
{
    g_row++;
    int pipes[2];
    pid_t children[4];
    long total = 0;
    double started = now_s(), elapsed;
    if (pipe(pipes) != 0)
        exit(1);
    for (int p = 0; p < 4; p++) {
        children[p] = fork();
        if (children[p] == 0) {
            struct worker k = {open_engine(), w, p, started + g_seconds, 0, {0, 0, 0}};
            long report[4];
            work(&k);
            tg_engine_close(k.engine);
            report[0] = k.decisions;
            report[1] = k.seen.late;
            report[2] = k.seen.expired;
            report[3] = k.seen.after;
            if (write(pipes[1], report, sizeof report) != sizeof report)
                _exit(1);
            _exit(0);
        }
    }
    close(pipes[1]);
    for (int p = 0; p < 4; p++) {
        long report[4];
        if (read(pipes[0], report, sizeof report) == sizeof report) {
            total += report[0];
            g_outcomes.late += report[1];
            g_outcomes.expired += report[2];
            g_outcomes.after += report[3];
        }
    }
    for (int p = 0; p < 4; p++)
        waitpid(children[p], NULL, 0);
    close(pipes[0]);
    elapsed = now_s() - started;
    return (double)total / elapsed;
}

/* redis-benchmark's SET requests per second at `clients` connections. */
static double set_rate(int clients)
{
    char command[512], out[4096];
    const char *at;
    double rps = 0;
    long requests = (long)(g_seconds * 40000.0 * (clients > 1 ? 2 : 1));
    snprintf(command, sizeof command,
             "redis-benchmark -s %s -t set -n %ld -c %d -r 100000 --csv 2>/dev/null", g_socket, requests, clients);
    run(command, out, sizeof out);
    at = strstr(out, "\"SET\",\"");
    if (!at || sscanf(at + 7, "%lf", &rps) != 1) {
        fprintf(stderr, "bench_redis: no SET rate from redis-benchmark: %s\n", out);
        exit(1);
    }
    return rps;
}

/* ---- A refusal the engine can make alone ----
 *
 * The same engine sent on REFUSED_KEYS keys (begin + end: their 60 s
 * cooldowns run), then calls tg_send_begin on them again and again for
 * half a row's time: ns per refused call, on the Redis store and in memory
 * (an engine with no store), and on Redis the commands the server ran per
 * call (INFO stats total_commands_processed around the loop, less the one
 * INFO): 0 when the engine refuses from what it knows, 1 or more when it
 * asks the server. A slow machine can make a setup send late (that key is
 * left out) or let a cooldown run out (a call granted 60 s after the
 * send: counted, its ticket ended FAILED, the key left out). */
#define REFUSED_KEYS 1000

static long total_commands(void)
{
    char info[8192];
    const char *at;
    long n = -1;
    cli("INFO stats", info, sizeof info);
    at = strstr(info, "total_commands_processed:");
    if (!at || sscanf(at + strlen("total_commands_processed:"), "%ld", &n) != 1) {
        fprintf(stderr, "bench_redis: no total_commands_processed in INFO stats\n");
        exit(1);
    }
    return n;
}

static double refused_ns(int on_redis, double *commands_per_call)
{
    static char subjects[REFUSED_KEYS][48];
    static int usable[REFUSED_KEYS];
    tg_engine *e;
    long calls = 0, refused = 0, before = 0;
    double sent_at, t0, elapsed;
    g_row++;
    if (on_redis) {
        e = open_engine();
    } else {
        tg_engine_options o;
        tg_engine_options_init(&o, sizeof o);
        o.delivery = TG_DELIVERY_HOST_THREAD;
        if (tg_engine_open(&o, &e) != TG_OK)
            die("tg_engine_open");
    }
    sent_at = now_s();
    for (int i = 0; i < REFUSED_KEYS; i++) {
        tg_ticket ticket = 0;
        tg_status s;
        snprintf(subjects[i], sizeof subjects[i], "r%d.%d.%d", g_row, i, getpid());
        usable[i] = 0;
        s = tg_send_begin(e, "bench", subjects[i], &ticket, NULL);
        if (s == TG_OK)
            s = tg_send_end(e, ticket, TG_SEND_SUCCEEDED, 0, NULL);
        if (s == TG_OK)
            usable[i] = 1;
        else if (is_late(s))
            g_outcomes.late++;
        else if (s == TG_E_EXPIRED)
            g_outcomes.expired++;
        else
            unexpected(s, "send (refused_local setup)");
    }
    if (on_redis)
        before = total_commands();
    t0 = now_s();
    while (now_s() < t0 + g_seconds / 2) {
        for (int i = 0; i < REFUSED_KEYS; i++) {
            tg_ticket ticket = 0;
            int64_t wait = 0;
            tg_status s;
            if (!usable[i])
                continue;
            s = tg_send_begin(e, "bench", subjects[i], &ticket, &wait);
            calls++;
            if (s == TG_E_COOLING_DOWN) {
                refused++;
            } else if (s == TG_OK && now_s() - sent_at >= 60.0) {
                g_outcomes.after++; /* its cooldown ran out */
                usable[i] = 0;
                tg_send_end(e, ticket, TG_SEND_FAILED, 0, NULL);
            } else if (is_late(s)) {
                g_outcomes.late++;
            } else {
                unexpected(s, "send begin (refused_local)");
            }
        }
    }
    elapsed = now_s() - t0;
    if (on_redis)
        *commands_per_call = calls ? (double)(total_commands() - before - 1) / (double)calls : 0;
    tg_engine_close(e);
    if (refused == 0) {
        fprintf(stderr, "bench_redis: refused_local: no call was refused\n");
        exit(1);
    }
    return elapsed * 1e9 / (double)calls;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void refused_rows(void)
{
    double redis[3], memory[3], commands[3], r, m, c;
    for (int k = 0; k < 3; k++) { /* interleaved: the same machine for both */
        redis[k] = refused_ns(1, &commands[k]);
        memory[k] = refused_ns(0, NULL);
    }
    qsort(redis, 3, sizeof redis[0], cmp_double);
    qsort(memory, 3, sizeof memory[0], cmp_double);
    qsort(commands, 3, sizeof commands[0], cmp_double);
    r = redis[1];
    m = memory[1];
    c = commands[1];
    printf("BENCH redis_refused_local n=1 tickgate=%.0f memory=%.0f unit=ns ratio_memory=%.2f "
           "server_commands=%.2f\n", r, m, r / m, c);
    report_outcomes("redis_refused_local", "1");
    printf("# redis_refused_local: tg_send_begin again and again on %d keys this engine sent on (cooling),\n"
           "# ns per refused call on Redis beside the same engine with no store; server_commands: commands\n"
           "# the server ran per call (0: refused without asking the server)\n",
           REFUSED_KEYS);
    printf("TARGET redis_refused_local value=%.2f limit=<=2 unit=ratio_memory %s\n", r / m,
           r / m <= 2 ? "PASS" : "MISS");
    fflush(stdout);
}

int main(int argc, char **argv)
{
    /* Send runs at every count, start and query up to 16 threads. */
    static const int threads[] = {1, 4, 16, 64};
    enum { COUNTS = 4, SEND_N16 = 2 };
    double floor_rate[COUNTS], set_usec, send16 = 0;
    if (argc > 1 && strcmp(argv[1], "--quick") == 0)
        g_seconds = 0.3;
    start_server();

    /* The floor first: SET at each concurrency, and a SET's server cost. */
    cli("CONFIG RESETSTAT", NULL, 0);
    for (int i = 0; i < COUNTS; i++)
        floor_rate[i] = set_rate(threads[i]);
    {
        long calls = 0;
        double usec = usec_total("set", &calls);
        set_usec = calls ? usec / (double)calls : 0;
    }
    printf("# redis_*: Tickgate on a Redis store (one redis-server, unix socket) against redis-benchmark -t set;\n"
           "# a decision is one call (send: tg_send_begin and tg_send_end are two), a SET one request\n");

    for (int w = 0; w < WORKLOADS; w++) {
        double cost = 0, rate1 = 0;
        long scripts = 0, made = 0;
        for (int i = 0; i < (w == SEND ? COUNTS : COUNTS - 1); i++) {
            double rate;
            char n[16];
            if (i == 0)
                cli("CONFIG RESETSTAT", NULL, 0);
            rate = engine_rate((enum workload)w, threads[i]);
            if (i == 0) {
                rate1 = rate;
                made = g_last_total;
                if (w == QUERY) {
                    /* A query is TIME, HGETALL and the clock's correction
                     * (GET) in one pipeline. */
                    long reads = 0;
                    cost = (usec_total("time", NULL) + usec_total("hgetall", &reads) + usec_total("get", NULL)) /
                           (double)made;
                    scripts = reads;
                } else {
                    cost = usec_total("evalsha", &scripts) / (double)made;
                }
            }
            if (w == SEND && i == SEND_N16)
                send16 = rate;
            printf("BENCH redis_%s n=%d tickgate=%.0f set=%.0f unit=ops/s ratio_set=%.2f\n", names[w], threads[i],
                   rate, floor_rate[i], rate / floor_rate[i]);
            snprintf(n, sizeof n, "%d", threads[i]);
            report_outcomes(names[w], n);
            fflush(stdout);
        }
        {
            double rate = process_rate((enum workload)w);
            printf("BENCH redis_%s n=4p tickgate=%.0f set=%.0f unit=ops/s ratio_set=%.2f\n", names[w], rate,
                   floor_rate[1], rate / floor_rate[1]);
            report_outcomes(names[w], "4p");
        }
        /* Round trips per decision at n=1: scripts (or a query's
         * pipelines; the query workload's first start adds one). */
        {
            double per = made > 0 ? (double)scripts / (double)made : 0;
            printf("BENCH redis_server_cost_%s n=1 tickgate=%.2f set=%.2f unit=us ratio_set=%.2f\n", names[w], cost,
                   set_usec, cost / set_usec);
            printf("TARGET redis_round_trips_%s value=%.2f limit=<=1.05 unit=round_trips/decision %s\n", names[w], per,
                   per <= 1.05 ? "PASS" : "MISS");
            printf("TARGET redis_%s n=1 value=%.2f limit=>=0.7 unit=ratio_set %s\n", names[w],
                   rate1 / floor_rate[0], rate1 / floor_rate[0] >= 0.7 ? "PASS" : "MISS");
            printf("TARGET redis_server_cost_%s value=%.2f limit=<=3 unit=ratio_set %s\n", names[w], cost / set_usec,
                   cost / set_usec <= 3 ? "PASS" : "MISS");
            fflush(stdout);
        }
    }
    /* Issue 30: a send's decisions from 16 threads of one engine against
     * SET at 16 clients. */
    printf("TARGET redis_send n=16 value=%.2f limit=>=0.6 unit=ratio_set %s\n", send16 / floor_rate[SEND_N16],
           send16 / floor_rate[SEND_N16] >= 0.6 ? "PASS" : "MISS");
    refused_rows();
    {
        double floor_usec = script_floor_usec();
        printf("BENCH redis_server_cost_script_floor n=1 tickgate=%.2f set=%.2f unit=us ratio_set=%.2f\n", floor_usec,
               set_usec, floor_usec / set_usec);
        printf("# redis_server_cost_script_floor: TIME + HGETALL + HSET + PEXPIRE in a script, the least a decision's\n"
               "# script can do: what Redis itself charges for a script's calls\n");
    }
    link_rows();
    stop_server();
    return 0;
}
