#define _GNU_SOURCE
/* hiredis for the Redis store: what Swift cannot call directly (a struct
 * timeval argument, a variadic function). */
#include "tickgate_redis.h"

#include <errno.h>
#include <hiredis/sds.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/time.h>
#include <time.h>

int tgshim_redis_stale(redisContext *context) {
    struct pollfd watch;
    int ready;
    watch.fd = context->fd;
    watch.events = POLLIN | POLLRDHUP;
    watch.revents = 0;
    do {
        ready = poll(&watch, 1, 0);
    } while (ready < 0 && errno == EINTR);
    return ready != 0;
}

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
    int saved = errno;
    if (context != NULL && context->err == 0) {
        if (redisSetTimeout(context, tv) != REDIS_OK) {
            context->err = REDIS_ERR_IO;
        }
        /* A dead link is noticed by the kernel too (hiredis sets the
         * probes' interval). */
        if (unix_path == NULL && redisEnableKeepAlive(context) != REDIS_OK) {
            context->err = 0;
            context->errstr[0] = '\0';
        }
    }
    errno = saved;
    return context;
}

int tgshim_redis_set_timeout(redisContext *context, int64_t timeout_ms) {
    return redisSetTimeout(context, tgshim_timeval(timeout_ms)) == REDIS_OK ? 0 : EINVAL;
}

/* Writing to a server that went away raises SIGPIPE, which would kill the
 * host: the signal is blocked in this thread while hiredis writes, and one
 * it raised (not one already pending) is taken before it is unblocked. */
typedef struct {
    sigset_t pipe_only, old;
    int was_pending;
} tgshim_pipe_guard;

static void tgshim_guard_begin(tgshim_pipe_guard *guard) {
    sigset_t pending;
    sigemptyset(&guard->pipe_only);
    sigaddset(&guard->pipe_only, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &guard->pipe_only, &guard->old);
    sigpending(&pending);
    guard->was_pending = sigismember(&pending, SIGPIPE);
}

static void tgshim_guard_end(tgshim_pipe_guard *guard, int failed) {
    if (failed && !guard->was_pending) {
        struct timespec zero = {0, 0};
        while (sigtimedwait(&guard->pipe_only, NULL, &zero) > 0) {
        }
    }
    pthread_sigmask(SIG_SETMASK, &guard->old, NULL);
}

redisReply *tgshim_redis_command(redisContext *context, int argc, const char *const *argv,
                                 const size_t *lengths, int *sent) {
    *sent = 0;
    if (redisAppendCommandArgv(context, argc, (const char **)argv, lengths) != REDIS_OK) {
        return NULL;
    }
    if (tgshim_redis_flush(context) != 0) {
        return NULL;
    }
    *sent = 1;
    return tgshim_redis_read(context);
}

int tgshim_redis_append(redisContext *context, int argc, const char *const *argv,
                        const size_t *lengths) {
    return redisAppendCommandArgv(context, argc, (const char **)argv, lengths) == REDIS_OK ? 0 : -1;
}

redisReply *tgshim_redis_read(redisContext *context) {
    tgshim_pipe_guard guard;
    void *reply = NULL;
    int failed;
    int saved;
    /* With nothing left to write, hiredis only reads: no SIGPIPE to guard
     * against. */
    if (context->obuf == NULL || sdslen(context->obuf) == 0) {
        return redisGetReply(context, &reply) == REDIS_OK ? (redisReply *)reply : NULL;
    }
    tgshim_guard_begin(&guard);
    failed = redisGetReply(context, &reply) != REDIS_OK;
    saved = errno;
    tgshim_guard_end(&guard, failed);
    errno = saved;
    return failed ? NULL : (redisReply *)reply;
}

int tgshim_redis_flush(redisContext *context) {
    tgshim_pipe_guard guard;
    int done = 0, failed = 0, saved;
    tgshim_guard_begin(&guard);
    while (!done && !failed) {
        failed = redisBufferWrite(context, &done) != REDIS_OK;
    }
    saved = errno;
    tgshim_guard_end(&guard, failed);
    errno = saved;
    return failed ? -1 : 0;
}

redisReply *tgshim_redis_read_within(redisContext *context, int64_t timeout_ms, int *timed_out) {
    void *reply = NULL;
    struct pollfd watch;
    int ready;
    *timed_out = 0;
    if (redisGetReplyFromReader(context, &reply) != REDIS_OK) {
        return NULL;
    }
    if (reply != NULL) {
        return (redisReply *)reply;
    }
    watch.fd = context->fd;
    watch.events = POLLIN;
    watch.revents = 0;
    do {
        ready = poll(&watch, 1, timeout_ms > INT32_MAX ? INT32_MAX : (int)timeout_ms);
    } while (ready < 0 && errno == EINTR);
    if (ready == 0) {
        *timed_out = 1;
        return NULL;
    }
    return tgshim_redis_read(context);
}
