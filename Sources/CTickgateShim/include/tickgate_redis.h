/* The system hiredis (the official C client of Redis), for the Redis
 * store: connecting with a timeout and sending one command. Linked
 * statically into libtickgate.so (README: "Redis"). */
#ifndef TICKGATE_REDIS_H
#define TICKGATE_REDIS_H
#include <stddef.h>
#include <stdint.h>
#include <hiredis/hiredis.h>

/* Connects to host:port (unix_path NULL) or to the unix socket unix_path,
 * waiting at most timeout_ms, and sets the same timeout on every later
 * read and write. Returns NULL only if out of memory; otherwise the caller
 * checks ->err (and frees the context with redisFree either way). */
redisContext *tgshim_redis_connect(const char *host, int port, const char *unix_path,
                                   int64_t timeout_ms);

/* Sets the read and write timeout of the context. 0 or an errno value. */
int tgshim_redis_set_timeout(redisContext *context, int64_t timeout_ms);

/* Sends one command of argc arguments (binary safe) and reads its reply;
 * NULL on an I/O error or timeout (then context->err and errno say which).
 * *sent says whether the whole command was written (a failure before that
 * delivered nothing the server could run). */
redisReply *tgshim_redis_command(redisContext *context, int argc, const char *const *argv,
                                 const size_t *lengths, int *sent);

/* 1 if an idle connection has something to read or was closed by the
 * server (it sent nothing it was asked for: the link is stale). */
int tgshim_redis_stale(redisContext *context);

/* Queues one command without sending it (a pipeline); 0 or -1. */
int tgshim_redis_append(redisContext *context, int argc, const char *const *argv,
                        const size_t *lengths);

/* Sends what is queued and reads the next reply (a pipeline's, or a
 * subscriber's message); NULL on an I/O error. */
redisReply *tgshim_redis_read(redisContext *context);

/* Sends what is queued; 0, or -1 on an I/O error. */
int tgshim_redis_flush(redisContext *context);

/* A subscriber's next message, waiting at most timeout_ms for it to start:
 * NULL with *timed_out set if none came (the context stays usable), NULL
 * with it clear on an I/O error. */
redisReply *tgshim_redis_read_within(redisContext *context, int64_t timeout_ms, int *timed_out);

/* The i-th element of an array reply. */
static inline redisReply *tgshim_redis_element(const redisReply *reply, size_t i) {
    return reply->element[i];
}
#endif
