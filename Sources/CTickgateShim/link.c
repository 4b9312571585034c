#define _GNU_SOURCE
/* The Redis store's link to a server (tickgate_link.h): a non-blocking
 * socket of our own, every wait a poll() bounded by the call's deadline,
 * TLS by OpenSSL through a BIO that writes with MSG_NOSIGNAL, and hiredis
 * for Redis's protocol only (redisFormatCommandArgv, redisReader). */
#include "tickgate_link.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

struct tgshim_link {
    int fd;
    int64_t timeout_ms;
    redisReader *reader;
    /* Commands formatted and not yet written: out[sent_upto, length). */
    char *out;
    size_t length, sent_upto, capacity;
    SSL_CTX *context;
    SSL *ssl;
    /* What the socket BIO met in the last TLS call: the peer's end of the
     * stream, or an errno. */
    int saw_eof, io_errno;
    /* The first problem certificate verification found, and its date
     * (expiry or start) when that is the problem. */
    int verify_error, verify_depth;
    char verify_date[40];
    int err, err_no;
    char errstr[512];
};

/* ---- errors and time ---------------------------------------------------- */

static void link_fail(tgshim_link *link, int code, int number, const char *format, ...)
    __attribute__((format(printf, 4, 5)));

static void link_fail(tgshim_link *link, int code, int number, const char *format, ...) {
    va_list arguments;
    link->err = code;
    link->err_no = number;
    va_start(arguments, format);
    vsnprintf(link->errstr, sizeof link->errstr, format, arguments);
    va_end(arguments);
}

static void link_fail_errno(tgshim_link *link, int number) {
    link_fail(link, REDIS_ERR_IO, number, "%s", strerror(number));
}

/* The timeout passed: an I/O error with EAGAIN, as a socket timeout says. */
static void link_fail_timeout(tgshim_link *link) {
    link_fail(link, REDIS_ERR_IO, EAGAIN, "no answer within %lld ms", (long long)link->timeout_ms);
}

static void link_fail_eof(tgshim_link *link) {
    link_fail(link, REDIS_ERR_EOF, 0, "Server closed the connection");
}

static int64_t now_ms(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

static int64_t deadline_after(int64_t ms) {
    return now_ms() + ms;
}

/* Waits until the socket is ready for `events` or the deadline passes:
 * 1 ready, 0 deadline passed, -1 failed (the error set). */
static int wait_ready(tgshim_link *link, short events, int64_t deadline) {
    struct pollfd watch;
    int ready;
    for (;;) {
        int64_t left = deadline - now_ms();
        watch.fd = link->fd;
        watch.events = events;
        watch.revents = 0;
        ready = poll(&watch, 1, left <= 0 ? 0 : left > INT32_MAX ? INT32_MAX : (int)left);
        if (ready > 0) {
            return 1; /* readable, writable, or hung up: the next call says */
        }
        if (ready == 0) {
            return 0;
        }
        if (errno != EINTR) {
            link_fail_errno(link, errno);
            return -1;
        }
    }
}

/* ---- TLS ---------------------------------------------------------------- */

/* The socket under OpenSSL: reads and writes of the link's descriptor that
 * never block and never raise SIGPIPE, noting an end of stream or errno
 * for the link to report. */
static int socket_bio_write(BIO *bio, const char *data, size_t size, size_t *written) {
    tgshim_link *link = BIO_get_data(bio);
    ssize_t n;
    BIO_clear_retry_flags(bio);
    do {
        n = send(link->fd, data, size, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            BIO_set_retry_write(bio);
        } else {
            link->io_errno = errno;
        }
        return 0;
    }
    *written = (size_t)n;
    return 1;
}

static int socket_bio_read(BIO *bio, char *data, size_t size, size_t *got) {
    tgshim_link *link = BIO_get_data(bio);
    ssize_t n;
    BIO_clear_retry_flags(bio);
    do {
        n = recv(link->fd, data, size, 0);
    } while (n < 0 && errno == EINTR);
    if (n <= 0) {
        if (n == 0) {
            link->saw_eof = 1;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            BIO_set_retry_read(bio);
        } else {
            link->io_errno = errno;
        }
        return 0;
    }
    *got = (size_t)n;
    return 1;
}

static long socket_bio_ctrl(BIO *bio, int command, long number, void *pointer) {
    (void)bio;
    (void)number;
    (void)pointer;
    return command == BIO_CTRL_FLUSH ? 1 : 0;
}

static BIO_METHOD *socket_bio_method;
static pthread_once_t socket_bio_once = PTHREAD_ONCE_INIT;

static void socket_bio_make(void) {
    int index = BIO_get_new_index();
    BIO_METHOD *method;
    if (index == -1) {
        return;
    }
    method = BIO_meth_new(index | BIO_TYPE_SOURCE_SINK, "tickgate socket");
    if (method == NULL) {
        return;
    }
    if (!BIO_meth_set_write_ex(method, socket_bio_write) || !BIO_meth_set_read_ex(method, socket_bio_read)
        || !BIO_meth_set_ctrl(method, socket_bio_ctrl)) {
        BIO_meth_free(method);
        return;
    }
    socket_bio_method = method;
}

/* A date of a certificate, "2026-01-31 12:00:00 UTC". */
static void format_date(const ASN1_TIME *time, char *text, size_t size) {
    struct tm parts;
    if (time == NULL || !ASN1_TIME_to_tm(time, &parts) || strftime(text, size, "%Y-%m-%d %H:%M:%S UTC", &parts) == 0) {
        snprintf(text, size, "(unknown date)");
    }
}

/* Keeps OpenSSL's verdict; notes the first problem for the message. */
static int verify_note(int ok, X509_STORE_CTX *store) {
    SSL *ssl = X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx());
    tgshim_link *link = ssl != NULL ? SSL_get_app_data(ssl) : NULL;
    if (!ok && link != NULL && link->verify_error == 0) {
        X509 *certificate = X509_STORE_CTX_get_current_cert(store);
        link->verify_error = X509_STORE_CTX_get_error(store);
        link->verify_depth = X509_STORE_CTX_get_error_depth(store);
        if (certificate != NULL && link->verify_error == X509_V_ERR_CERT_HAS_EXPIRED) {
            format_date(X509_get0_notAfter(certificate), link->verify_date, sizeof link->verify_date);
        } else if (certificate != NULL && link->verify_error == X509_V_ERR_CERT_NOT_YET_VALID) {
            format_date(X509_get0_notBefore(certificate), link->verify_date, sizeof link->verify_date);
        }
    }
    return ok;
}

/* A key file with a passphrase is refused, never asked for on a terminal. */
static int no_passphrase(char *buffer, int size, int writing, void *user) {
    (void)buffer;
    (void)size;
    (void)writing;
    (void)user;
    return 0;
}

/* The reason of OpenSSL's last error, for a message. */
static const char *tls_reason(unsigned long code) {
    const char *reason = code != 0 ? ERR_reason_error_string(code) : NULL;
    return reason != NULL ? reason : "unknown TLS error";
}

static int is_ip_address(const char *name) {
    unsigned char address[sizeof(struct in6_addr)];
    return inet_pton(AF_INET, name, address) == 1 || inet_pton(AF_INET6, name, address) == 1;
}

/* Where the CAs the server is checked against come from, for a message. */
static void trust_source(const tgshim_tls *tls, char *text, size_t size) {
    if (tls->ca_file != NULL && tls->ca_dir != NULL) {
        snprintf(text, size, "tls_ca_cert_file %s, tls_ca_cert_dir %s", tls->ca_file, tls->ca_dir);
    } else if (tls->ca_file != NULL) {
        snprintf(text, size, "tls_ca_cert_file %s", tls->ca_file);
    } else if (tls->ca_dir != NULL) {
        snprintf(text, size, "tls_ca_cert_dir %s", tls->ca_dir);
    } else {
        snprintf(text, size, "the system's CA certificates");
    }
}

/* The message of a server certificate that failed verification. */
static void fail_verify(tgshim_link *link, const tgshim_tls *tls, const char *name, long result) {
    char source[2 * 4096 + 64];
    int error = link->verify_error != 0 ? link->verify_error : (int)result;
    const char *whose = link->verify_depth > 0 ? "a CA certificate of the server's chain" : "the server's certificate";
    switch (error) {
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
    case X509_V_ERR_CERT_SIGNATURE_FAILURE:
    case X509_V_ERR_CERT_UNTRUSTED:
        trust_source(tls, source, sizeof source);
        link_fail(link, TGSHIM_LINK_ERR_TRUST, 0, "the server's certificate is not signed by a trusted CA (%s)",
                  source);
        break;
    case X509_V_ERR_CERT_HAS_EXPIRED:
        link_fail(link, TGSHIM_LINK_ERR_TRUST, 0, "%s expired on %s", whose, link->verify_date);
        break;
    case X509_V_ERR_CERT_NOT_YET_VALID:
        link_fail(link, TGSHIM_LINK_ERR_TRUST, 0, "%s is not valid before %s", whose, link->verify_date);
        break;
    case X509_V_ERR_HOSTNAME_MISMATCH:
    case X509_V_ERR_IP_ADDRESS_MISMATCH:
        link_fail(link, TGSHIM_LINK_ERR_TRUST, 0, "the server's certificate is for another name than %s%s", name,
                  tls->server_name != NULL ? " (tls_server_name)" : "");
        break;
    default:
        link_fail(link, TGSHIM_LINK_ERR_TRUST, 0, "%s was refused: %s", whose, X509_verify_cert_error_string(error));
        break;
    }
}

/* After a TLS call that did not succeed: 0 with *want set if it only has
 * to wait for the socket, else -1 with the error set. `tls` is given
 * during the handshake (for the messages of a failed verification). */
static int tls_step_failed(tgshim_link *link, int result, short *want, const tgshim_tls *tls, const char *name) {
    int kind = SSL_get_error(link->ssl, result);
    unsigned long code;
    switch (kind) {
    case SSL_ERROR_WANT_READ:
        *want = POLLIN;
        return 0;
    case SSL_ERROR_WANT_WRITE:
        *want = POLLOUT;
        return 0;
    case SSL_ERROR_ZERO_RETURN:
        link_fail_eof(link);
        return -1;
    default:
        break;
    }
    code = ERR_peek_last_error();
    if (tls != NULL && SSL_get_verify_result(link->ssl) != X509_V_OK) {
        fail_verify(link, tls, name, SSL_get_verify_result(link->ssl));
    } else if (ERR_GET_LIB(code) == ERR_LIB_SSL
               && (ERR_GET_REASON(code) == SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED
                   || ERR_GET_REASON(code) == SSL_R_SSLV3_ALERT_BAD_CERTIFICATE
                   || ERR_GET_REASON(code) == SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN
                   || ERR_GET_REASON(code) == SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED
                   || ERR_GET_REASON(code) == SSL_R_TLSV1_ALERT_UNKNOWN_CA
                   || ERR_GET_REASON(code) == SSL_R_TLSV1_ALERT_ACCESS_DENIED)) {
        /* The server's alert about the client's certificate. */
        if (SSL_get_certificate(link->ssl) == NULL) {
            link_fail(link, TGSHIM_LINK_ERR_TRUST, 0,
                      "the server asks for a client certificate (tls_cert_file and tls_key_file): %s",
                      tls_reason(code));
        } else {
            link_fail(link, TGSHIM_LINK_ERR_TRUST, 0, "the server does not accept the client's certificate: %s",
                      tls_reason(code));
        }
    } else if (link->saw_eof) {
        link_fail_eof(link);
    } else if (link->io_errno != 0) {
        link_fail_errno(link, link->io_errno);
    } else if (kind == SSL_ERROR_SSL) {
        link_fail(link, REDIS_ERR_IO, EPROTO, "TLS failed: %s", tls_reason(code));
    } else {
        link_fail_eof(link);
    }
    ERR_clear_error();
    return -1;
}

/* Before each TLS call: no stale error from an earlier one. */
static void tls_step_begin(tgshim_link *link) {
    ERR_clear_error();
    link->saw_eof = 0;
    link->io_errno = 0;
}

/* 0 if the file of `option` can be read, else -1 with the error set (a
 * clearer message than OpenSSL's for a missing file). */
static int check_readable(tgshim_link *link, const char *option, const char *path) {
    if (path == NULL || access(path, R_OK) == 0) {
        return 0;
    }
    link_fail(link, TGSHIM_LINK_ERR_TRUST, 0, "cannot read %s %s: %s", option, path, strerror(errno));
    return -1;
}

/* Makes the link's TLS context: verification always on, the CAs, the
 * client's certificate. 0, or -1 with the error set. */
static int tls_context(tgshim_link *link, const tgshim_tls *tls) {
    SSL_CTX *context = SSL_CTX_new(TLS_client_method());
    if (context == NULL) {
        link_fail(link, REDIS_ERR_OOM, ENOMEM, "cannot make a TLS context: %s", tls_reason(ERR_get_error()));
        return -1;
    }
    link->context = context;
    if (check_readable(link, "tls_ca_cert_file", tls->ca_file) != 0
        || check_readable(link, "tls_ca_cert_dir", tls->ca_dir) != 0
        || check_readable(link, "tls_cert_file", tls->cert_file) != 0
        || check_readable(link, "tls_key_file", tls->key_file) != 0) {
        return -1;
    }
    SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION);
    SSL_CTX_set_verify(context, SSL_VERIFY_PEER, verify_note);
    SSL_CTX_set_mode(context, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_default_passwd_cb(context, no_passphrase);
    if (tls->ca_file != NULL || tls->ca_dir != NULL) {
        if (!SSL_CTX_load_verify_locations(context, tls->ca_file, tls->ca_dir)) {
            char source[2 * 4096 + 64];
            trust_source(tls, source, sizeof source);
            link_fail(link, TGSHIM_LINK_ERR_TRUST, 0, "cannot read the CA certificates of %s: %s", source,
                      tls_reason(ERR_peek_last_error()));
            return -1;
        }
    } else if (!SSL_CTX_set_default_verify_paths(context)) {
        link_fail(link, TGSHIM_LINK_ERR_TRUST, 0, "cannot read the system's CA certificates: %s",
                  tls_reason(ERR_peek_last_error()));
        return -1;
    }
    if (tls->cert_file != NULL) {
        if (!SSL_CTX_use_certificate_chain_file(context, tls->cert_file)) {
            link_fail(link, TGSHIM_LINK_ERR_TRUST, 0, "cannot read the client certificate tls_cert_file %s: %s",
                      tls->cert_file, tls_reason(ERR_peek_last_error()));
            return -1;
        }
        if (tls->key_file == NULL || !SSL_CTX_use_PrivateKey_file(context, tls->key_file, SSL_FILETYPE_PEM)) {
            unsigned long code = ERR_peek_last_error();
            if (tls->key_file != NULL && ERR_GET_LIB(code) == ERR_LIB_X509
                && ERR_GET_REASON(code) == X509_R_KEY_VALUES_MISMATCH) {
                link_fail(link, TGSHIM_LINK_ERR_TRUST, 0, "tls_key_file %s is not the key of tls_cert_file %s",
                          tls->key_file, tls->cert_file);
                return -1;
            }
            link_fail(link, TGSHIM_LINK_ERR_TRUST, 0, "cannot read the client key tls_key_file %s: %s",
                      tls->key_file != NULL ? tls->key_file : "(none)", tls_reason(ERR_peek_last_error()));
            return -1;
        }
        if (!SSL_CTX_check_private_key(context)) {
            link_fail(link, TGSHIM_LINK_ERR_TRUST, 0, "tls_key_file %s is not the key of tls_cert_file %s",
                      tls->key_file, tls->cert_file);
            return -1;
        }
    }
    return 0;
}

/* Makes the TLS session over the connected socket and checks the server's
 * certificate against `name` (SNI too, unless an IP address). */
static int tls_handshake(tgshim_link *link, const char *host, const tgshim_tls *tls, int64_t deadline) {
    const char *name = tls->server_name != NULL ? tls->server_name : host;
    X509_VERIFY_PARAM *check;
    BIO *bio;
    int result;
    pthread_once(&socket_bio_once, socket_bio_make);
    if (socket_bio_method == NULL) {
        link_fail(link, REDIS_ERR_OOM, ENOMEM, "cannot make OpenSSL's socket BIO");
        return -1;
    }
    if (tls_context(link, tls) != 0) {
        return -1;
    }
    link->ssl = SSL_new(link->context);
    bio = link->ssl != NULL ? BIO_new(socket_bio_method) : NULL;
    if (bio == NULL) {
        link_fail(link, REDIS_ERR_OOM, ENOMEM, "cannot make a TLS session: %s", tls_reason(ERR_get_error()));
        return -1;
    }
    BIO_set_data(bio, link);
    BIO_set_init(bio, 1);
    SSL_set_bio(link->ssl, bio, bio);
    SSL_set_app_data(link->ssl, link);
    check = SSL_get0_param(link->ssl);
    X509_VERIFY_PARAM_set_hostflags(check, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    if (is_ip_address(name)) {
        result = X509_VERIFY_PARAM_set1_ip_asc(check, name);
    } else {
        result = X509_VERIFY_PARAM_set1_host(check, name, 0) && SSL_set_tlsext_host_name(link->ssl, name);
    }
    if (!result) {
        link_fail(link, TGSHIM_LINK_ERR_TRUST, 0, "cannot check the server's certificate against the name %s", name);
        return -1;
    }
    for (;;) {
        short want = 0;
        int ready;
        tls_step_begin(link);
        result = SSL_connect(link->ssl);
        if (result == 1) {
            return 0;
        }
        if (tls_step_failed(link, result, &want, tls, name) != 0) {
            return -1;
        }
        ready = wait_ready(link, want, deadline);
        if (ready == 0) {
            link_fail(link, REDIS_ERR_IO, ETIMEDOUT, "the TLS handshake did not end within %lld ms",
                      (long long)link->timeout_ms);
        }
        if (ready <= 0) {
            return -1;
        }
    }
}

/* ---- sockets ------------------------------------------------------------ */

/* Ends a non-blocking connect: 1 connected, 0 not (errno in *number). */
static int connect_finish(int fd, int64_t deadline, int *number) {
    struct pollfd watch;
    int ready, error = 0;
    socklen_t size = sizeof error;
    if (errno != EINPROGRESS) {
        *number = errno;
        return 0;
    }
    for (;;) {
        int64_t left = deadline - now_ms();
        watch.fd = fd;
        watch.events = POLLOUT;
        watch.revents = 0;
        ready = poll(&watch, 1, left <= 0 ? 0 : left > INT32_MAX ? INT32_MAX : (int)left);
        if (ready > 0) {
            break;
        }
        if (ready == 0) {
            *number = ETIMEDOUT;
            return 0;
        }
        if (errno != EINTR) {
            *number = errno;
            return 0;
        }
    }
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) != 0) {
        *number = errno;
        return 0;
    }
    if (error != 0) {
        *number = error;
        return 0;
    }
    return 1;
}

/* No delay for small writes, and the kernel's probes notice a dead peer
 * (about 30 s after 15 s of silence). Failures change nothing. */
static void tcp_tune(int fd) {
    int on = 1, idle = 15, interval = 5, count = 3;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
}

static int connect_tcp(tgshim_link *link, const char *host, int port, int64_t deadline) {
    struct addrinfo hints, *list = NULL, *each;
    char service[16];
    int status, number = ECONNREFUSED;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    snprintf(service, sizeof service, "%d", port);
    status = getaddrinfo(host, service, &hints, &list);
    if (status != 0) {
        link_fail(link, REDIS_ERR_OTHER, status == EAI_SYSTEM ? errno : 0, "%s", gai_strerror(status));
        return -1;
    }
    for (each = list; each != NULL && link->fd < 0; each = each->ai_next) {
        int fd = socket(each->ai_family, each->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, each->ai_protocol);
        if (fd < 0) {
            number = errno;
            continue;
        }
        if (connect(fd, each->ai_addr, each->ai_addrlen) == 0 || connect_finish(fd, deadline, &number)) {
            link->fd = fd;
        } else {
            close(fd);
            if (number == ETIMEDOUT) {
                break;
            }
        }
    }
    freeaddrinfo(list);
    if (link->fd < 0) {
        link_fail_errno(link, number);
        return -1;
    }
    tcp_tune(link->fd);
    return 0;
}

static int connect_unix(tgshim_link *link, const char *path, int64_t deadline) {
    struct sockaddr_un address;
    int fd, number = 0;
    memset(&address, 0, sizeof address);
    address.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof address.sun_path) {
        link_fail_errno(link, ENAMETOOLONG);
        return -1;
    }
    memcpy(address.sun_path, path, strlen(path));
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        link_fail_errno(link, errno);
        return -1;
    }
    while (connect(fd, (struct sockaddr *)&address, sizeof address) != 0) {
        if (errno == EAGAIN && now_ms() < deadline) {
            /* The server's backlog is full: try again shortly. */
            struct timespec pause = {0, 2 * 1000 * 1000};
            nanosleep(&pause, NULL);
            continue;
        }
        if (errno == EINTR) {
            errno = EINPROGRESS; /* the connection goes on without us */
        }
        if (errno == EAGAIN) {
            number = ETIMEDOUT;
        } else if (connect_finish(fd, deadline, &number)) {
            break;
        }
        close(fd);
        link_fail_errno(link, number);
        return -1;
    }
    link->fd = fd;
    return 0;
}

/* ---- the link ----------------------------------------------------------- */

tgshim_link *tgshim_link_open(const char *host, int port, const char *unix_path, const tgshim_tls *tls,
                              int64_t timeout_ms) {
    tgshim_link *link = calloc(1, sizeof *link);
    int64_t deadline;
    if (link == NULL) {
        return NULL;
    }
    link->fd = -1;
    link->timeout_ms = timeout_ms < 1 ? 1 : timeout_ms;
    link->reader = redisReaderCreate();
    if (link->reader == NULL) {
        free(link);
        return NULL;
    }
    deadline = deadline_after(link->timeout_ms);
    if (unix_path != NULL) {
        (void)connect_unix(link, unix_path, deadline);
    } else if (connect_tcp(link, host, port, deadline) == 0 && tls != NULL) {
        (void)tls_handshake(link, host, tls, deadline);
    }
    return link;
}

void tgshim_link_close(tgshim_link *link) {
    if (link == NULL) {
        return;
    }
    if (link->ssl != NULL) {
        if (link->err == 0) {
            /* One try at telling the server, never waiting. */
            tls_step_begin(link);
            (void)SSL_shutdown(link->ssl);
            ERR_clear_error();
        }
        SSL_free(link->ssl);
    }
    SSL_CTX_free(link->context);
    if (link->fd >= 0) {
        close(link->fd);
    }
    redisReaderFree(link->reader);
    free(link->out);
    free(link);
}

void tgshim_link_set_timeout(tgshim_link *link, int64_t timeout_ms) {
    link->timeout_ms = timeout_ms < 1 ? 1 : timeout_ms;
}

int tgshim_link_fd(const tgshim_link *link) {
    return link->fd;
}

int tgshim_link_error(const tgshim_link *link) {
    return link->err;
}

int tgshim_link_errno(const tgshim_link *link) {
    return link->err_no;
}

const char *tgshim_link_error_text(const tgshim_link *link) {
    return link->errstr;
}

/* A server that refused the client's certificate after the handshake
 * (TLS 1.3 checks it then) sent its alert and closed the socket with our
 * request unread, which resets the link: the alert may still wait in the
 * socket, and says more than the reset. */
static void tls_explain_reset(tgshim_link *link) {
    char scratch[512];
    size_t got = 0;
    short want = 0;
    int err = link->err, err_no = link->err_no, result;
    char text[sizeof link->errstr];
    memcpy(text, link->errstr, sizeof text);
    tls_step_begin(link);
    result = SSL_read_ex(link->ssl, scratch, sizeof scratch, &got);
    if (!result && tls_step_failed(link, result, &want, NULL, NULL) != 0 && link->err == TGSHIM_LINK_ERR_TRUST) {
        return;
    }
    link->err = err;
    link->err_no = err_no;
    memcpy(link->errstr, text, sizeof text);
}

/* Writes what the socket takes now: bytes written, 0 if it must wait for
 * *want, -1 on a failure. */
static ssize_t link_send(tgshim_link *link, const char *data, size_t size, short *want) {
    if (link->ssl == NULL) {
        ssize_t n;
        do {
            n = send(link->fd, data, size, MSG_NOSIGNAL);
        } while (n < 0 && errno == EINTR);
        if (n >= 0) {
            return n;
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            *want = POLLOUT;
            return 0;
        }
        link_fail_errno(link, errno);
        return -1;
    } else {
        size_t written = 0;
        int result;
        tls_step_begin(link);
        result = SSL_write_ex(link->ssl, data, size, &written);
        if (result) {
            return (ssize_t)written;
        }
        if (tls_step_failed(link, result, want, NULL, NULL) == 0) {
            return 0;
        }
        if (link->err == REDIS_ERR_IO && (link->err_no == ECONNRESET || link->err_no == EPIPE)) {
            tls_explain_reset(link);
        }
        return -1;
    }
}

/* Reads what the socket has now: bytes read, 0 if it must wait for *want,
 * -1 on a failure (the server's end of the stream too). */
static ssize_t link_recv(tgshim_link *link, char *data, size_t size, short *want) {
    if (link->ssl == NULL) {
        ssize_t n;
        do {
            n = recv(link->fd, data, size, 0);
        } while (n < 0 && errno == EINTR);
        if (n > 0) {
            return n;
        }
        if (n == 0) {
            link_fail_eof(link);
            return -1;
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            *want = POLLIN;
            return 0;
        }
        link_fail_errno(link, errno);
        return -1;
    } else {
        size_t got = 0;
        int result;
        tls_step_begin(link);
        result = SSL_read_ex(link->ssl, data, size, &got);
        if (result) {
            return (ssize_t)got;
        }
        return tls_step_failed(link, result, want, NULL, NULL);
    }
}

static int link_flush_until(tgshim_link *link, int64_t deadline) {
    while (link->sent_upto < link->length) {
        short want = POLLOUT;
        ssize_t n = link_send(link, link->out + link->sent_upto, link->length - link->sent_upto, &want);
        if (n < 0) {
            return -1;
        }
        if (n > 0) {
            link->sent_upto += (size_t)n;
            continue;
        }
        switch (wait_ready(link, want, deadline)) {
        case 0:
            link_fail_timeout(link);
            return -1;
        case -1:
            return -1;
        default:
            break;
        }
    }
    link->length = 0;
    link->sent_upto = 0;
    return 0;
}

/* Feeds the reader what comes before the deadline: 1 when bytes came, 0
 * when the deadline passed first, -1 on a failure. */
static int link_fill(tgshim_link *link, int64_t deadline) {
    char buffer[16384];
    for (;;) {
        short want = POLLIN;
        ssize_t n = link_recv(link, buffer, sizeof buffer, &want);
        if (n > 0) {
            if (redisReaderFeed(link->reader, buffer, (size_t)n) != REDIS_OK) {
                link_fail(link, REDIS_ERR_OOM, ENOMEM, "out of memory");
                return -1;
            }
            return 1;
        }
        if (n < 0) {
            return -1;
        }
        switch (wait_ready(link, want, deadline)) {
        case 0:
            return 0;
        case -1:
            return -1;
        default:
            break;
        }
    }
}

/* The reader's next whole reply, if it holds one: 1 with *reply set (NULL
 * if none yet), or -1 on data that is not Redis's protocol. */
static int link_parse(tgshim_link *link, void **reply) {
    *reply = NULL;
    if (redisReaderGetReply(link->reader, reply) != REDIS_OK) {
        link_fail(link, link->reader->err == REDIS_ERR_OOM ? REDIS_ERR_OOM : REDIS_ERR_PROTOCOL, 0, "%s",
                  link->reader->errstr);
        return -1;
    }
    return 1;
}

static redisReply *link_read_until(tgshim_link *link, int64_t deadline) {
    for (;;) {
        void *reply;
        if (link_parse(link, &reply) < 0) {
            return NULL;
        }
        if (reply != NULL) {
            return reply;
        }
        switch (link_fill(link, deadline)) {
        case 0:
            link_fail_timeout(link);
            return NULL;
        case -1:
            return NULL;
        default:
            break;
        }
    }
}

int tgshim_link_append(tgshim_link *link, int argc, const char *const *argv, const size_t *lengths) {
    char *command = NULL;
    int size = redisFormatCommandArgv(&command, argc, (const char **)argv, lengths);
    if (size < 0 || command == NULL) {
        link_fail(link, REDIS_ERR_OOM, ENOMEM, "out of memory");
        return -1;
    }
    if (link->sent_upto > 0) {
        memmove(link->out, link->out + link->sent_upto, link->length - link->sent_upto);
        link->length -= link->sent_upto;
        link->sent_upto = 0;
    }
    if (link->capacity - link->length < (size_t)size) {
        size_t capacity = link->capacity < 4096 ? 4096 : link->capacity;
        char *grown;
        while (capacity - link->length < (size_t)size) {
            capacity *= 2;
        }
        grown = realloc(link->out, capacity);
        if (grown == NULL) {
            redisFreeCommand(command);
            link_fail(link, REDIS_ERR_OOM, ENOMEM, "out of memory");
            return -1;
        }
        link->out = grown;
        link->capacity = capacity;
    }
    memcpy(link->out + link->length, command, (size_t)size);
    link->length += (size_t)size;
    redisFreeCommand(command);
    return 0;
}

int tgshim_link_flush(tgshim_link *link) {
    return link_flush_until(link, deadline_after(link->timeout_ms));
}

redisReply *tgshim_link_command(tgshim_link *link, int argc, const char *const *argv, const size_t *lengths,
                                int *sent) {
    int64_t deadline;
    *sent = 0;
    if (tgshim_link_append(link, argc, argv, lengths) != 0) {
        return NULL;
    }
    deadline = deadline_after(link->timeout_ms);
    if (link_flush_until(link, deadline) != 0) {
        return NULL;
    }
    *sent = 1;
    return link_read_until(link, deadline);
}

redisReply *tgshim_link_read(tgshim_link *link) {
    int64_t deadline = deadline_after(link->timeout_ms);
    if (link_flush_until(link, deadline) != 0) {
        return NULL;
    }
    return link_read_until(link, deadline);
}

redisReply *tgshim_link_read_within(tgshim_link *link, int64_t timeout_ms, int *timed_out) {
    void *reply;
    *timed_out = 0;
    if (link_parse(link, &reply) < 0) {
        return NULL;
    }
    if (reply != NULL) {
        return reply;
    }
    if (link_flush_until(link, deadline_after(link->timeout_ms)) != 0) {
        return NULL;
    }
    switch (link_fill(link, deadline_after(timeout_ms < 0 ? 0 : timeout_ms))) {
    case 0:
        *timed_out = 1;
        return NULL;
    case -1:
        return NULL;
    default:
        return link_read_until(link, deadline_after(link->timeout_ms));
    }
}

int tgshim_link_stale(tgshim_link *link) {
    struct pollfd watch;
    int ready;
    for (;;) {
        watch.fd = link->fd;
        watch.events = POLLIN | POLLRDHUP;
        watch.revents = 0;
        ready = poll(&watch, 1, 0);
        if (ready < 0 && errno == EINTR) {
            continue;
        }
        if (ready == 0) {
            return 0;
        }
        if (ready < 0 || link->ssl == NULL || (watch.revents & ~POLLIN) != 0) {
            return 1;
        }
        /* TLS: records the session handles itself (a TLS 1.3 server's
         * session tickets) make the socket readable without a reply. */
        {
            char byte;
            size_t got = 0;
            int result;
            tls_step_begin(link);
            result = SSL_peek_ex(link->ssl, &byte, 1, &got);
            if (result || SSL_get_error(link->ssl, result) != SSL_ERROR_WANT_READ) {
                ERR_clear_error();
                return 1;
            }
        }
    }
}
