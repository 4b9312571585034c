/* One link to a Redis server for the Redis store: Tickgate's own socket
 * (TCP, a unix socket, or TLS over TCP with the system's OpenSSL), with
 * hiredis used only for Redis's protocol (redisFormatCommandArgv writes a
 * command, a redisReader parses replies). Every read and write waits at
 * most the link's timeout; writes never raise SIGPIPE. A link is used by
 * one thread at a time; only tgshim_link_fd may be read from another (to
 * shut the socket down). docs/redis.md: "TLS". */
#ifndef TICKGATE_LINK_H
#define TICKGATE_LINK_H
#include <stddef.h>
#include <stdint.h>
#include <hiredis/hiredis.h>

typedef struct tgshim_link tgshim_link;

/* The error codes of a link: hiredis's REDIS_ERR_IO (errno says which),
 * REDIS_ERR_EOF (the server closed the link), REDIS_ERR_PROTOCOL (not
 * Redis's protocol), REDIS_ERR_OTHER (a host name that does not resolve),
 * REDIS_ERR_OOM, and this one: the TLS peer is not trusted (the server's
 * certificate failed verification, the server refused the client's
 * certificate or wanted one, or a CA or client file cannot be used). */
#define TGSHIM_LINK_ERR_TRUST 100

/* TLS settings (all may be NULL): CA file and folder (neither: the system's
 * default CA paths), the client's certificate chain and key (PEM), and the
 * name the server's certificate must carry (NULL: host). */
typedef struct {
    const char *ca_file;
    const char *ca_dir;
    const char *cert_file;
    const char *key_file;
    const char *server_name;
} tgshim_tls;

/* Connects to host:port (unix_path NULL) or to the unix socket unix_path,
 * with TLS if tls is not NULL (TCP only), waiting at most timeout_ms for
 * the connection and the handshake; the same timeout then bounds every
 * later read and write. Returns NULL only if out of memory; otherwise the
 * caller checks tgshim_link_error (and closes the link either way). */
tgshim_link *tgshim_link_open(const char *host, int port, const char *unix_path, const tgshim_tls *tls,
                              int64_t timeout_ms);

/* Closes the socket and frees the link; NULL is allowed. */
void tgshim_link_close(tgshim_link *link);

/* The timeout of every later read and write (ms, at least 1). */
void tgshim_link_set_timeout(tgshim_link *link, int64_t timeout_ms);

/* Sends one command of argc arguments (binary safe) and reads its reply;
 * NULL on a failure (tgshim_link_error says which). *sent says whether the
 * whole command was written (a failure before that delivered nothing the
 * server could run). The reply is freed with freeReplyObject. */
redisReply *tgshim_link_command(tgshim_link *link, int argc, const char *const *argv, const size_t *lengths,
                                int *sent);

/* Queues one command without sending it (a pipeline); 0 or -1. */
int tgshim_link_append(tgshim_link *link, int argc, const char *const *argv, const size_t *lengths);

/* Sends what is queued; 0, or -1 on a failure. */
int tgshim_link_flush(tgshim_link *link);

/* Sends what is queued and reads the next reply; NULL on a failure. */
redisReply *tgshim_link_read(tgshim_link *link);

/* A subscriber's next message, waiting at most timeout_ms for it to start:
 * NULL with *timed_out set if none came (the link stays usable), NULL with
 * it clear on a failure. */
redisReply *tgshim_link_read_within(tgshim_link *link, int64_t timeout_ms, int *timed_out);

/* 1 if an idle link has something to read or was closed by the server (it
 * sent nothing it was asked for: the link is stale). */
int tgshim_link_stale(tgshim_link *link);

/* The socket, for shutdown() from another thread (-1 if none). */
int tgshim_link_fd(const tgshim_link *link);

/* The last failure: 0 if none, else a code above; its errno (for
 * REDIS_ERR_IO: EAGAIN when the timeout passed), and its text. */
int tgshim_link_error(const tgshim_link *link);
int tgshim_link_errno(const tgshim_link *link);
const char *tgshim_link_error_text(const tgshim_link *link);

/* The i-th element of an array reply. */
static inline redisReply *tgshim_redis_element(const redisReply *reply, size_t i) {
    return reply->element[i];
}
#endif
