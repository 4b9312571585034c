/*
 * bench_cluster.c — Tickgate on a Redis Cluster: send decisions with three
 * budget keys on one plain redis-server, on a cluster of one primary and on
 * a cluster of three primaries, in the same run; the scaling from one
 * primary to three; and what a decision costs each primary's CPU.
 *
 * The run starts its own servers over TCP on free loopback ports, in a
 * temporary folder, with no persistence:
 *
 *   plain  one redis-server                        redis://127.0.0.1:P/0
 *   c1     one cluster node holding all 16384 slots redis+cluster://127.0.0.1:P
 *   c3     three cluster primaries, no replicas    redis+cluster://a,b,c
 *
 * and stops them on every way out (exit, a fatal error, SIGINT, SIGTERM,
 * SIGHUP, SIGPIPE).
 *
 * The workload "send3": tg_send_begin_budgeted of a new key (so every send
 * is granted) with three budget keys, "ip" (10.0.<t>.<i mod 251>), "cc"
 * (cc<i mod 97>) and "dev" (d<t>.<i mod 89>), whose caps are never reached,
 * then tg_send_end(SUCCEEDED). A granted begin and its end count as ONE
 * send decision. It runs from 1 thread (n=1), from 16 threads of one engine
 * (n=16, the server-bound load: two rounds, of each setup the one least
 * disturbed by the rest of the machine) and from 4 processes of one thread
 * (n=4p), about 2 s each.
 *
 * Around each run the benchmark reads INFO cpu (used_cpu_sys +
 * used_cpu_user) and INFO commandstats of every primary, so it knows the
 * server CPU each decision cost each primary. The busiest primary bounds
 * what the server side can decide: capacity = 1e6 / (its CPU us per
 * decision) decisions/s. On a machine with a core per primary and enough
 * client cores, the measured decisions/s approach that bound; on two shared
 * cores the clients and the servers take turns on the same cores, so the
 * measured rates cannot show the scaling and the capacity is the figure.
 * The capacity ratio c3/c1 splits into spread (how evenly c3's primaries
 * share a decision's CPU; 3 at best) times overhead (c1's CPU per decision
 * over c3's total; 1 if three primaries spend no more than one). Every
 * PUBLISH on a cluster reaches every node over the cluster bus, so the run
 * also measures what a PUBLISH costs c1 and c3 and what share of c3's CPU
 * per decision that is.
 *
 *   BENCH cluster_send3 n=<n> plain=<dec/s> c1=<dec/s> c3=<dec/s> unit=ops/s ratio_c3_c1=<r>
 *   BENCH cluster_server_cpu_send3 n=<n> setup=<s> primary=<i> port=<p> us=<CPU us> script_us=<us>
 *         scripts=<per dec> hmget=<per dec> reads=<per dec> bus=<bus messages in per dec> unit=us/decision
 *   BENCH cluster_server_cpu_total_send3 n=<n> plain=<us> c1=<us> c3=<us> unit=us/decision ratio_c1_plain=<r>
 *   BENCH cluster_capacity_send3 n=<n> plain=<dec/s> c1=<dec/s> c3=<dec/s> unit=ops/s ratio_c3_c1=<r>
 *   BENCH cluster_measured_scaling_send3 n=<n> value=<c3/c1 measured> unit=ratio
 *   BENCH cluster_scaling_parts_send3 n=<n> spread=<r> overhead=<r> unit=ratio
 *   BENCH cluster_errors_send3 n=<n> plain=<count> c1=<count> c3=<count> store=<count> other=<count> unit=decisions
 *   BENCH cluster_publish_cost n=<publishes> c1=<us> c3_sender=<us> c3_receivers=<us> unit=us/publish
 *   BENCH cluster_bus_share_send3 n=16 publishes=<per dec> bus_us=<us> c3_without_bus=<us> c1=<us>
 *         overhead_without_bus=<r> unit=us/decision
 *   TARGET cluster_scaling_send3 value=<capacity c3 / capacity c1 at n=16> limit=>=2.5 unit=ratio PASS|MISS
 *
 * A decision that fails (a store error, a late answer on a busy machine) is
 * counted and reported, never fatal; it does not count as a decision.
 *
 * Usage: bench_cluster [--quick]   (--quick: 0.5 s per run)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <tickgate.h>

#define THREADS 16
#define PROCESSES 4
#define MAX_NODES 8
#define MAX_PRIMARIES 3
#define SCOPE "bench"

static char g_dir[64];
static pid_t g_main;
static double g_seconds = 2.0;

/* Every redis-server this run started, so that every way out stops it. */
static pid_t g_node_pids[MAX_NODES];
static volatile sig_atomic_t g_node_count;
static volatile sig_atomic_t g_cleaned;

/* A server set: its store URL and the ports of its primaries. */
struct setup {
    const char *name;
    char url[256];
    int ports[MAX_PRIMARIES];
    int primaries;
};

/* One run's results: decisions, failures, and each primary's cost. */
struct result {
    double rate;
    long decisions;
    long store_errors;
    long other_errors;
    char first_error[256];
    double cpu_us[MAX_PRIMARIES];
    double script_us[MAX_PRIMARIES];
    double scripts[MAX_PRIMARIES];
    double hmget[MAX_PRIMARIES];
    double bus[MAX_PRIMARIES];
    double publish[MAX_PRIMARIES];
    double reads[MAX_PRIMARIES];
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- Stopping the servers on every way out ---- */

/* Only what a signal handler may call: kill, waitpid, fork, execve. */
static void stop_nodes(void)
{
    int n = g_node_count;
    for (int i = 0; i < n; i++)
        if (g_node_pids[i] > 0)
            kill(g_node_pids[i], SIGTERM);
    for (int i = 0; i < n; i++) {
        if (g_node_pids[i] > 0) {
            waitpid(g_node_pids[i], NULL, 0);
            g_node_pids[i] = 0;
        }
    }
    if (g_dir[0]) {
        char *const argv[] = {"rm", "-rf", g_dir, NULL};
        char *const envp[] = {NULL};
        pid_t rm = fork();
        if (rm == 0) {
            execve("/bin/rm", argv, envp);
            _exit(127);
        }
        if (rm > 0)
            waitpid(rm, NULL, 0);
    }
}

/* atexit: only in the main process (a worker process never stops them). */
static void cleanup(void)
{
    if (getpid() != g_main || g_cleaned)
        return;
    g_cleaned = 1;
    stop_nodes();
}

static void on_signal(int sig)
{
    if (getpid() == g_main && !g_cleaned) {
        g_cleaned = 1;
        stop_nodes();
    }
    _exit(128 + sig);
}

static void die(const char *what)
{
    fprintf(stderr, "bench_cluster: %s: %s\n", what, tg_last_error_message());
    exit(1);
}

/* ---- Shell commands and redis-cli ---- */

/* The output of a shell command (at most size - 1 bytes); its exit status. */
static int run(const char *command, char *out, size_t size)
{
    FILE *p = popen(command, "r");
    size_t n = 0;
    int status;
    if (!p) {
        perror(command);
        exit(1);
    }
    if (out && size) {
        n = fread(out, 1, size - 1, p);
        out[n] = '\0';
    }
    {
        char sink[4096];
        while (fread(sink, 1, sizeof sink, p) > 0) {
        }
    }
    status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void cli(int port, const char *args, char *out, size_t size)
{
    char command[512];
    snprintf(command, sizeof command, "redis-cli -h 127.0.0.1 -p %d %s 2>/dev/null", port, args);
    run(command, out, size);
}

/* ---- Ports and servers ---- */

static int can_bind(int port)
{
    struct sockaddr_in a;
    int fd = socket(AF_INET, SOCK_STREAM, 0), ok;
    if (fd < 0)
        return 0;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

/* A free loopback port whose cluster bus port (port + 10000) is free too,
 * and not one handed out already by this run. */
static int free_port(void)
{
    static int given[MAX_NODES];
    static int count;
    for (int tries = 0; tries < 1000; tries++) {
        int port = 20000 + (int)(random() % 30000), taken = 0;
        for (int i = 0; i < count; i++)
            if (given[i] == port || given[i] + 10000 == port || given[i] == port + 10000)
                taken = 1;
        if (!taken && can_bind(port) && can_bind(port + 10000)) {
            if (count < MAX_NODES)
                given[count++] = port;
            return port;
        }
    }
    fprintf(stderr, "bench_cluster: found no free loopback port\n");
    exit(1);
}

static int answers(int port)
{
    char out[64];
    cli(port, "ping", out, sizeof out);
    return strncmp(out, "PONG", 4) == 0;
}

/* A redis-server on 127.0.0.1:port in a folder of its own, a cluster node
 * if cluster; it answers PING when this returns. */
static void start_node(int port, int cluster)
{
    char dir[128], p[16];
    pid_t pid;
    if (g_node_count >= MAX_NODES) {
        fprintf(stderr, "bench_cluster: too many servers\n");
        exit(1);
    }
    snprintf(dir, sizeof dir, "%s/%d", g_dir, port);
    mkdir(dir, 0700);
    snprintf(p, sizeof p, "%d", port);
    pid = fork();
    if (pid == 0) {
        if (cluster)
            execlp("redis-server", "redis-server", "--port", p, "--bind", "127.0.0.1", "--save", "",
                   "--appendonly", "no", "--dir", dir, "--logfile", "redis.log", "--cluster-enabled", "yes",
                   "--cluster-config-file", "nodes.conf", (char *)NULL);
        else
            execlp("redis-server", "redis-server", "--port", p, "--bind", "127.0.0.1", "--save", "",
                   "--appendonly", "no", "--dir", dir, "--logfile", "redis.log", (char *)NULL);
        _exit(127);
    }
    if (pid < 0) {
        perror("fork");
        exit(1);
    }
    g_node_pids[g_node_count] = pid;
    g_node_count = g_node_count + 1;
    for (int i = 0; i < 200; i++) {
        if (answers(port))
            return;
        if (waitpid(pid, NULL, WNOHANG) == pid) {
            g_node_pids[g_node_count - 1] = 0;
            break;
        }
        usleep(50000);
    }
    fprintf(stderr, "bench_cluster: redis-server on port %d did not start (see %s/redis.log)\n", port, dir);
    exit(1);
}

/* Waits until every node of the cluster says cluster_state:ok and knows
 * all the others. */
static void wait_cluster(const struct setup *s)
{
    char out[2048], want[64];
    snprintf(want, sizeof want, "cluster_known_nodes:%d", s->primaries);
    for (int i = 0; i < 400; i++) {
        int ok = 1;
        for (int k = 0; k < s->primaries && ok; k++) {
            cli(s->ports[k], "cluster info", out, sizeof out);
            ok = strstr(out, "cluster_state:ok") != NULL && strstr(out, want) != NULL;
        }
        if (ok)
            return;
        usleep(50000);
    }
    fprintf(stderr, "bench_cluster: the %s cluster did not reach cluster_state:ok in 20 s\n", s->name);
    exit(1);
}

static void make_plain(struct setup *s)
{
    s->name = "plain";
    s->primaries = 1;
    s->ports[0] = free_port();
    start_node(s->ports[0], 0);
    snprintf(s->url, sizeof s->url, "redis://127.0.0.1:%d/0", s->ports[0]);
}

/* A cluster of `primaries` nodes without replicas. redis-cli --cluster
 * create wants at least three primaries, so one node takes every slot with
 * CLUSTER ADDSLOTSRANGE instead. */
static void make_cluster(struct setup *s, const char *name, int primaries)
{
    char command[512], out[4096];
    int at;
    s->name = name;
    s->primaries = primaries;
    for (int k = 0; k < primaries; k++) {
        s->ports[k] = free_port();
        start_node(s->ports[k], 1);
    }
    if (primaries == 1) {
        cli(s->ports[0], "cluster addslotsrange 0 16383", out, sizeof out);
        if (strncmp(out, "OK", 2) != 0) {
            fprintf(stderr, "bench_cluster: CLUSTER ADDSLOTSRANGE failed: %s\n", out);
            exit(1);
        }
    } else {
        at = snprintf(command, sizeof command, "redis-cli --cluster create");
        for (int k = 0; k < primaries; k++)
            at += snprintf(command + at, sizeof command - (size_t)at, " 127.0.0.1:%d", s->ports[k]);
        snprintf(command + at, sizeof command - (size_t)at, " --cluster-replicas 0 --cluster-yes 2>&1");
        if (run(command, out, sizeof out) != 0 || !strstr(out, "All 16384 slots covered")) {
            fprintf(stderr, "bench_cluster: %s failed:\n%s\n", command, out);
            exit(1);
        }
    }
    wait_cluster(s);
    at = snprintf(s->url, sizeof s->url, "redis+cluster://");
    for (int k = 0; k < primaries; k++)
        at += snprintf(s->url + at, sizeof s->url - (size_t)at, "%s127.0.0.1:%d", k ? "," : "", s->ports[k]);
}

/* ---- A primary's counters: CPU and calls ---- */

struct counters {
    double cpu_us;
    double script_us;
    long scripts;
    long hmget;
    long publish;
    long reads;
    long bus;
};

/* The calls of a command in INFO commandstats, and the microseconds the
 * server spent running them (*usec, may be NULL). */
static long calls_of(const char *info, const char *command, double *usec)
{
    char key[64];
    const char *at;
    long n = 0;
    double us = 0;
    snprintf(key, sizeof key, "cmdstat_%s:calls=", command);
    at = strstr(info, key);
    if (at && sscanf(at + strlen(key), "%ld,usec=%lf", &n, &us) != 2) {
        n = 0;
        us = 0;
    }
    if (usec)
        *usec += us;
    return n;
}

static struct counters read_counters(int port)
{
    char info[32768];
    const char *at;
    double sys = 0, user = 0;
    struct counters c = {0, 0, 0, 0, 0, 0, 0};
    cli(port, "info cpu stats commandstats", info, sizeof info);
    if ((at = strstr(info, "used_cpu_sys:")) != NULL)
        sys = atof(at + strlen("used_cpu_sys:"));
    if ((at = strstr(info, "used_cpu_user:")) != NULL)
        user = atof(at + strlen("used_cpu_user:"));
    c.cpu_us = (sys + user) * 1e6;
    c.scripts = calls_of(info, "evalsha", &c.script_us) + calls_of(info, "eval", &c.script_us);
    c.hmget = calls_of(info, "hmget", NULL);
    c.publish = calls_of(info, "publish", NULL);
    /* Reads of client connections: fewer than requests when several come
     * in one read (a pipeline, or requests that arrived together). */
    if ((at = strstr(info, "total_reads_processed:")) != NULL)
        c.reads = atol(at + strlen("total_reads_processed:"));
    /* Cluster bus messages this node took in (a plain server has none). */
    cli(port, "cluster info", info, sizeof info);
    if ((at = strstr(info, "cluster_stats_messages_received:")) != NULL)
        c.bus = atol(at + strlen("cluster_stats_messages_received:"));
    return c;
}

static void read_all(const struct setup *s, struct counters *c)
{
    for (int k = 0; k < s->primaries; k++)
        c[k] = read_counters(s->ports[k]);
}

/* Each primary's cost per decision between two readings. */
static void costs(const struct setup *s, const struct counters *before, const struct counters *after,
                  struct result *r)
{
    double n = r->decisions > 0 ? (double)r->decisions : 1;
    for (int k = 0; k < s->primaries; k++) {
        r->cpu_us[k] = (after[k].cpu_us - before[k].cpu_us) / n;
        r->script_us[k] = (after[k].script_us - before[k].script_us) / n;
        r->scripts[k] = (double)(after[k].scripts - before[k].scripts) / n;
        r->hmget[k] = (double)(after[k].hmget - before[k].hmget) / n;
        r->bus[k] = (double)(after[k].bus - before[k].bus) / n;
        r->publish[k] = (double)(after[k].publish - before[k].publish) / n;
        r->reads[k] = (double)(after[k].reads - before[k].reads) / n;
    }
}

/* ---- The workload ---- */

/* Makes every run's keys new. */
static int g_run;

static tg_engine *open_engine(const char *url)
{
    tg_engine_options o;
    tg_engine *engine = NULL;
    tg_budget b = TG_BUDGET_INIT;
    static const char *const budgets[] = {"ip", "cc", "dev"};
    tg_engine_options_init(&o, sizeof o);
    o.delivery = TG_DELIVERY_HOST_THREAD;
    o.store_url = url;
    o.store_prefix = "bench:";
    if (tg_engine_open(&o, &engine) != TG_OK)
        die("tg_engine_open");
    /* Caps no run reaches: every send is granted. */
    b.window_count = 1;
    b.max_sends[0] = TG_BUDGET_MAX_SENDS;
    b.window_ms[0] = 3600000;
    for (int i = 0; i < 3; i++)
        if (tg_budget_set(engine, budgets[i], &b) != TG_OK)
            die("tg_budget_set");
    return engine;
}

struct worker {
    tg_engine *engine;
    int id;
    double until;
    long decisions;
    long store_errors;
    long other_errors;
    double ended;
    char first_error[256];
};

static void failed(struct worker *k, tg_status status, const char *call)
{
    int store = tg_last_store_failure() != TG_STORE_FAILURE_NONE || status == TG_E_STORE_IO ||
                status == TG_E_STORE_UNKNOWN || status == TG_E_STORE_CORRUPT;
    if (store)
        k->store_errors++;
    else
        k->other_errors++;
    if (!k->first_error[0])
        snprintf(k->first_error, sizeof k->first_error, "%s: %s: %s", call, tg_status_string(status),
                 tg_last_error_message());
    /* A server that is gone fails at once: do not spin on it. */
    if (store)
        usleep(1000);
}

/* One send decision: a granted budgeted begin and its end. */
static void send3(struct worker *k, long i, const char *tag)
{
    char subject[96], ip[32], cc[16], dev[32];
    tg_ticket ticket = 0;
    tg_status s;
    snprintf(subject, sizeof subject, "%s%d.%d.%ld.%d", tag, g_run, k->id, i, (int)getpid());
    snprintf(ip, sizeof ip, "10.0.%d.%ld", k->id, i % 251);
    snprintf(cc, sizeof cc, "cc%ld", i % 97);
    snprintf(dev, sizeof dev, "d%d.%ld", k->id, i % 89);
    {
        const tg_budget_key keys[3] = {{"ip", ip}, {"cc", cc}, {"dev", dev}};
        s = tg_send_begin_budgeted(k->engine, SCOPE, subject, keys, 3, &ticket, NULL, NULL);
    }
    if (s != TG_OK) {
        failed(k, s, "tg_send_begin_budgeted");
        return;
    }
    s = tg_send_end(k->engine, ticket, TG_SEND_SUCCEEDED, 0, NULL);
    if (s != TG_OK) {
        failed(k, s, "tg_send_end");
        return;
    }
    k->decisions++;
}

static void *work(void *arg)
{
    struct worker *k = arg;
    long i = 0;
    while (now_s() < k->until)
        send3(k, i++, "s");
    k->ended = now_s();
    return NULL;
}

/* A few decisions before the reading, so that connections, scripts and
 * clock keys are in place when it starts. */
static void warm_up(tg_engine *engine, int id)
{
    struct worker k;
    memset(&k, 0, sizeof k);
    k.engine = engine;
    k.id = id;
    for (long i = 0; i < 24; i++)
        send3(&k, i, "w");
}

static void add_worker(struct result *r, const struct worker *k)
{
    r->decisions += k->decisions;
    r->store_errors += k->store_errors;
    r->other_errors += k->other_errors;
    if (!r->first_error[0] && k->first_error[0])
        snprintf(r->first_error, sizeof r->first_error, "%s", k->first_error);
}

/* send3 from `threads` threads of one engine. */
static void thread_run(const struct setup *s, int threads, struct result *r)
{
    struct counters before[MAX_PRIMARIES], after[MAX_PRIMARIES];
    struct worker workers[THREADS];
    pthread_t ids[THREADS];
    tg_engine *engine;
    double started;
    memset(r, 0, sizeof *r);
    g_run++;
    engine = open_engine(s->url);
    warm_up(engine, THREADS);
    read_all(s, before);
    started = now_s();
    for (int t = 0; t < threads; t++) {
        memset(&workers[t], 0, sizeof workers[t]);
        workers[t].engine = engine;
        workers[t].id = t;
        workers[t].until = started + g_seconds;
        if (pthread_create(&ids[t], NULL, work, &workers[t]) != 0) {
            fprintf(stderr, "bench_cluster: pthread_create failed\n");
            exit(1);
        }
    }
    for (int t = 0; t < threads; t++) {
        pthread_join(ids[t], NULL);
        add_worker(r, &workers[t]);
    }
    r->rate = (double)r->decisions / (now_s() - started);
    read_all(s, after);
    tg_engine_close(engine);
    costs(s, before, after, r);
}

/* What a worker process hands back. */
struct report {
    long decisions;
    long store_errors;
    long other_errors;
    double ended;
    char first_error[256];
};

/* send3 from PROCESSES processes of one thread and one engine each. Each
 * opens its engine and warms up, then all start together. */
static void process_run(const struct setup *s, struct result *r)
{
    struct counters before[MAX_PRIMARIES], after[MAX_PRIMARIES];
    int ready[2], go[2], back[2];
    pid_t children[PROCESSES];
    double started, until, ended = 0;
    int alive = 0;
    memset(r, 0, sizeof *r);
    g_run++;
    if (pipe(ready) != 0 || pipe(go) != 0 || pipe(back) != 0) {
        perror("pipe");
        exit(1);
    }
    fflush(stdout);
    for (int p = 0; p < PROCESSES; p++) {
        children[p] = fork();
        if (children[p] == 0) {
            struct worker k;
            struct report rep;
            char byte = 'r';
            close(ready[0]);
            close(go[1]);
            close(back[0]);
            memset(&k, 0, sizeof k);
            k.engine = open_engine(s->url);
            k.id = p;
            warm_up(k.engine, PROCESSES + p);
            if (write(ready[1], &byte, 1) != 1 || read(go[0], &k.until, sizeof k.until) != sizeof k.until)
                _exit(1);
            work(&k);
            tg_engine_close(k.engine);
            memset(&rep, 0, sizeof rep);
            rep.decisions = k.decisions;
            rep.store_errors = k.store_errors;
            rep.other_errors = k.other_errors;
            rep.ended = k.ended;
            memcpy(rep.first_error, k.first_error, sizeof rep.first_error);
            if (write(back[1], &rep, sizeof rep) != sizeof rep)
                _exit(1);
            _exit(0);
        }
        if (children[p] > 0)
            alive++;
    }
    close(ready[1]);
    close(go[0]);
    close(back[1]);
    /* A child that died before it was ready never writes: wait at most a
     * minute, then start the rest. */
    for (int p = 0; p < alive; p++) {
        struct pollfd fd = {ready[0], POLLIN, 0};
        char byte;
        if (poll(&fd, 1, 60000) != 1 || read(ready[0], &byte, 1) != 1)
            break;
    }
    read_all(s, before);
    started = now_s();
    until = started + g_seconds;
    for (int p = 0; p < alive; p++)
        if (write(go[1], &until, sizeof until) != sizeof until)
            break;
    for (int p = 0; p < alive; p++) {
        struct report rep;
        struct worker k;
        if (read(back[0], &rep, sizeof rep) != sizeof rep)
            break;
        memset(&k, 0, sizeof k);
        k.decisions = rep.decisions;
        k.store_errors = rep.store_errors;
        k.other_errors = rep.other_errors;
        memcpy(k.first_error, rep.first_error, sizeof k.first_error);
        k.first_error[sizeof k.first_error - 1] = '\0';
        add_worker(r, &k);
        if (rep.ended > ended)
            ended = rep.ended;
    }
    for (int p = 0; p < PROCESSES; p++)
        if (children[p] > 0)
            waitpid(children[p], NULL, 0);
    close(ready[0]);
    close(go[1]);
    close(back[0]);
    read_all(s, after);
    r->rate = ended > started ? (double)r->decisions / (ended - started) : 0;
    costs(s, before, after, r);
}

/* ---- What the cluster bus costs ---- */

/* CPU us per PUBLISH on each node of a setup: n PUBLISHes sent one at a
 * time (as decisions send them) to its first node, with no subscriber. On
 * a cluster every node gets each one over the cluster bus. */
static void publish_cost(const struct setup *s, long n, double *per_node)
{
    struct counters before[MAX_PRIMARIES], after[MAX_PRIMARIES];
    char command[256];
    read_all(s, before);
    snprintf(command, sizeof command, "redis-cli -h 127.0.0.1 -p %d -r %ld publish bench:probe x >/dev/null 2>&1",
             s->ports[0], n);
    run(command, NULL, 0);
    read_all(s, after);
    for (int k = 0; k < s->primaries; k++)
        per_node[k] = (after[k].cpu_us - before[k].cpu_us) / (double)n;
}

/* ---- The rows ---- */

static double busiest(const struct setup *s, const struct result *r)
{
    double most = 0;
    for (int k = 0; k < s->primaries; k++)
        if (r->cpu_us[k] > most)
            most = r->cpu_us[k];
    return most;
}

static double total_cpu(const struct setup *s, const struct result *r)
{
    double sum = 0;
    for (int k = 0; k < s->primaries; k++)
        sum += r->cpu_us[k];
    return sum;
}

static double capacity(const struct setup *s, const struct result *r)
{
    double most = busiest(s, r);
    return most > 0 ? 1e6 / most : 0;
}

/* The rows of one load (n=1, 16 or 4p) over the three setups; returns the
 * scaling of server capacity from c1 to c3. */
static double rows(const char *n, const struct setup *set, const struct result *r)
{
    double cap[3], scaling;
    printf("BENCH cluster_send3 n=%s plain=%.0f c1=%.0f c3=%.0f unit=ops/s ratio_c3_c1=%.2f\n", n, r[0].rate,
           r[1].rate, r[2].rate, r[1].rate > 0 ? r[2].rate / r[1].rate : 0);
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < set[i].primaries; k++)
            printf("BENCH cluster_server_cpu_send3 n=%s setup=%s primary=%d port=%d us=%.2f script_us=%.2f scripts=%.2f "
                   "hmget=%.2f reads=%.2f bus=%.2f unit=us/decision\n",
                   n, set[i].name, k + 1, set[i].ports[k], r[i].cpu_us[k], r[i].script_us[k], r[i].scripts[k],
                   r[i].hmget[k], r[i].reads[k], r[i].bus[k]);
    printf("BENCH cluster_server_cpu_total_send3 n=%s plain=%.2f c1=%.2f c3=%.2f unit=us/decision ratio_c1_plain=%.2f\n",
           n, total_cpu(&set[0], &r[0]), total_cpu(&set[1], &r[1]), total_cpu(&set[2], &r[2]),
           total_cpu(&set[0], &r[0]) > 0 ? total_cpu(&set[1], &r[1]) / total_cpu(&set[0], &r[0]) : 0);
    for (int i = 0; i < 3; i++)
        cap[i] = capacity(&set[i], &r[i]);
    scaling = cap[1] > 0 ? cap[2] / cap[1] : 0;
    printf("BENCH cluster_capacity_send3 n=%s plain=%.0f c1=%.0f c3=%.0f unit=ops/s ratio_c3_c1=%.2f\n", n, cap[0],
           cap[1], cap[2], scaling);
    printf("BENCH cluster_measured_scaling_send3 n=%s value=%.2f unit=ratio\n", n,
           r[1].rate > 0 ? r[2].rate / r[1].rate : 0);
    {
        double c1 = total_cpu(&set[1], &r[1]), c3 = total_cpu(&set[2], &r[2]), most = busiest(&set[2], &r[2]);
        printf("BENCH cluster_scaling_parts_send3 n=%s spread=%.2f overhead=%.2f unit=ratio\n", n,
               most > 0 ? c3 / most : 0, c3 > 0 ? c1 / c3 : 0);
    }
    printf("BENCH cluster_errors_send3 n=%s plain=%ld c1=%ld c3=%ld store=%ld other=%ld unit=decisions\n", n,
           r[0].store_errors + r[0].other_errors, r[1].store_errors + r[1].other_errors,
           r[2].store_errors + r[2].other_errors, r[0].store_errors + r[1].store_errors + r[2].store_errors,
           r[0].other_errors + r[1].other_errors + r[2].other_errors);
    for (int i = 0; i < 3; i++)
        if (r[i].first_error[0])
            printf("# cluster_errors_send3 n=%s %s: first failure: %s\n", n, set[i].name, r[i].first_error);
    fflush(stdout);
    return scaling;
}

int main(int argc, char **argv)
{
    struct setup set[3];
    struct result single[3], threads[3], procs[3];
    double t0 = now_s(), scaling, scaling_p, c1p[MAX_PRIMARIES], c3p[MAX_PRIMARIES];
    long probes;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    struct sigaction sa;
    int rounds = 2;
    if (argc > 1 && strcmp(argv[1], "--quick") == 0) {
        g_seconds = 0.5;
        rounds = 1;
    }
    probes = rounds > 1 ? 3000 : 1000;
    g_main = getpid();
    srandom((unsigned)getpid() ^ (unsigned)time(NULL));

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sigaction(SIGPIPE, &sa, NULL);
    snprintf(g_dir, sizeof g_dir, "/tmp/tg-bench-cluster-XXXXXX");
    if (!mkdtemp(g_dir)) {
        g_dir[0] = '\0';
        perror("mkdtemp");
        exit(1);
    }
    atexit(cleanup);

    make_plain(&set[0]);
    make_cluster(&set[1], "c1", 1);
    make_cluster(&set[2], "c3", 3);
    printf("# cluster_*: send decisions with 3 budget keys (tg_send_begin_budgeted + tg_send_end, one decision)\n"
           "# on one redis-server (plain), a Redis Cluster of 1 primary (c1) and of 3 primaries (c3), over TCP on\n"
           "# loopback, from 1 thread (n=1), %d threads of one engine (n=16; of %d round%s, the least disturbed)\n"
           "# and %d processes of one thread (n=4p), %.1f s each; servers ready in %.1f s\n",
           THREADS, rounds, rounds > 1 ? "s" : "", PROCESSES, g_seconds, now_s() - t0);
    fflush(stdout);

    /* What a PUBLISH costs c1's node and c3's nodes, on servers that hold
     * no keys yet (no expiry adds to it): three times each, in turn, and
     * the least of each node (the rest of the machine only adds). */
    for (int t = 0; t < 3; t++) {
        double p1[MAX_PRIMARIES], p3[MAX_PRIMARIES];
        publish_cost(&set[1], probes, p1);
        publish_cost(&set[2], probes, p3);
        for (int k = 0; k < MAX_PRIMARIES; k++) {
            if (k < set[1].primaries)
                c1p[k] = t == 0 || p1[k] < c1p[k] ? p1[k] : c1p[k];
            c3p[k] = t == 0 || p3[k] < c3p[k] ? p3[k] : c3p[k];
        }
    }

    /* The processes first: they fork before this process has opened an
     * engine (and started its threads). */
    for (int i = 0; i < 3; i++)
        process_run(&set[i], &procs[i]);
    /* One thread: a server seldom waits for a core, and handles one
     * request per wake-up on every setup alike. */
    for (int i = 0; i < 3; i++)
        thread_run(&set[i], 1, &single[i]);
    /* The threads in rounds over the three setups (two in a full run); of
     * each setup the round whose busiest primary spent the least CPU per
     * decision, the one the rest of the machine disturbed least. Failures
     * are added up over every round. */
    for (int round = 0; round < rounds; round++) {
        for (int i = 0; i < 3; i++) {
            struct result r;
            long store = round ? threads[i].store_errors : 0, other = round ? threads[i].other_errors : 0;
            char first[256];
            snprintf(first, sizeof first, "%s", round ? threads[i].first_error : "");
            thread_run(&set[i], THREADS, &r);
            if (round == 0 || (busiest(&set[i], &r) > 0 && busiest(&set[i], &r) < busiest(&set[i], &threads[i])))
                threads[i] = r;
            threads[i].store_errors = store + r.store_errors;
            threads[i].other_errors = other + r.other_errors;
            snprintf(threads[i].first_error, sizeof threads[i].first_error, "%s", first[0] ? first : r.first_error);
        }
    }

    rows("1", set, single);
    scaling = rows("16", set, threads);
    scaling_p = rows("4p", set, procs);
    /* How much of c3's extra CPU per decision is the cluster bus: the
     * extra a PUBLISH costs c3's nodes over c1's node (measured above),
     * times the PUBLISHes of a decision. */
    {
        double extra = c3p[0] - c1p[0] + c3p[1] + c3p[2], publishes = 0, bus_us, c1, c3, rest;
        if (extra < 0)
            extra = 0;
        for (int k = 0; k < set[2].primaries; k++)
            publishes += threads[2].publish[k];
        bus_us = publishes * extra;
        c1 = total_cpu(&set[1], &threads[1]);
        c3 = total_cpu(&set[2], &threads[2]);
        rest = c3 - bus_us;
        printf("BENCH cluster_publish_cost n=%ld c1=%.2f c3_sender=%.2f c3_receivers=%.2f unit=us/publish\n", probes,
               c1p[0], c3p[0], c3p[1] + c3p[2]);
        printf("BENCH cluster_bus_share_send3 n=16 publishes=%.2f bus_us=%.2f c3_without_bus=%.2f c1=%.2f "
               "overhead_without_bus=%.2f unit=us/decision\n",
               publishes, bus_us, rest, c1, rest > 0 ? c1 / rest : 0);
        printf("# cluster_publish_cost: CPU us per PUBLISH (redis-cli -r, one at a time; the least of 3 tries) on\n"
               "# c1's node, on the c3 node it was sent to and on the two others together (they get it over the\n"
               "# cluster bus).\n"
               "# cluster_bus_share_send3: of c3's CPU per decision (n=16), what its PUBLISHes cost over the\n"
               "# bus (bus_us), and the overhead left without it: the rest is fewer requests per wake-up and\n"
               "# the contention of the shared cores.\n");
    }
    printf("# cluster_server_cpu_send3: server CPU (INFO cpu: used_cpu_sys + used_cpu_user) per decision on each\n"
           "# primary; scripts and hmget: requests per decision it served; reads: reads of client connections\n"
           "# per decision (fewer than scripts + hmget when requests arrive together, as c1's pipelined\n"
           "# reserves do; each read costs a system call and a pass of the event loop); bus: cluster bus\n"
           "# messages it took in per decision (a PUBLISH on a cluster goes to every node).\n"
           "# On a cluster a send with budgets is an HMGET of the settings (on one primary), a reserve script\n"
           "# per budget key (sent at once), the decision script and a settle script per budget key (sent at\n"
           "# once); its end is another HMGET and script: 10 requests where a plain server takes 2 scripts, so\n"
           "# each decision costs more.\n"
           "# cluster_capacity_send3: 1e6 / the busiest primary's CPU us per decision, what the servers could\n"
           "# decide if each had a core of its own and the clients had more.\n"
           "# cluster_scaling_parts_send3: the capacity ratio c3/c1 is spread x overhead: spread = c3's CPU per\n"
           "# decision over all primaries / its busiest primary's (3: evenly spread); overhead = c1's CPU per\n"
           "# decision / c3's total (1: three primaries spend no more than one; less: the cluster bus carrying\n"
           "# every PUBLISH to every node, fewer requests per wake-up, and the cores' contention).\n"
           "# script_us: time inside scripts (INFO commandstats, wall clock: it grows when a server is\n"
           "# preempted, so script_us above c1's per script tells of contention, not work).\n");
    if (cores < 8)
        printf("# On %ld shared cores the %d client threads and the three servers compete for the same cores, so\n"
               "# the measured decisions/s cannot show the scaling (cluster_measured_scaling_send3); the capacity\n"
               "# from server CPU is the figure.\n",
               cores, THREADS);
    else
        printf("# On %ld cores the measured decisions/s (cluster_measured_scaling_send3) can show the scaling\n"
               "# when the primaries, not the clients, are the bottleneck; the capacity from server CPU is the\n"
               "# figure either way.\n",
               cores);
    printf("TARGET cluster_scaling_send3 value=%.2f limit=>=2.5 unit=ratio %s\n", scaling,
           scaling >= 2.5 ? "PASS" : "MISS");
    printf("# cluster_scaling_send3 from 4 processes (n=4p): %.2f\n", scaling_p);
    printf("# bench_cluster took %.1f s\n", now_s() - t0);
    fflush(stdout);
    cleanup();
    return 0;
}
