#define _GNU_SOURCE
#include "tickgate_shim.h"
#include "tickgate_version.h"

#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <sys/stat.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

int64_t tgshim_boottime_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (int64_t)ts.tv_sec * INT64_C(1000000000) + (int64_t)ts.tv_nsec;
}

int64_t tgshim_walltime_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * INT64_C(1000000000) + (int64_t)ts.tv_nsec;
}

void tgshim_boot_id(char *buffer, size_t size) {
    FILE *file = fopen("/proc/sys/kernel/random/boot_id", "re");
    size_t n = 0;
    if (size == 0) return;
    if (file != NULL) {
        n = fread(buffer, 1, size - 1, file);
        fclose(file);
    }
    while (n > 0 && (buffer[n - 1] == '\n' || buffer[n - 1] == ' ')) n--;
    if (n == 0) {
        snprintf(buffer, size, "unknown");
        return;
    }
    buffer[n] = '\0';
}

int tgshim_sqlite_bind_text(sqlite3_stmt *statement, int index,
                            const char *text, int bytes) {
    return sqlite3_bind_text(statement, index, text, bytes, SQLITE_TRANSIENT);
}

int tgshim_create_private_file(const char *path) {
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return errno;
    close(fd);
    return 0;
}

int tgshim_is_symlink(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return errno == ENOENT ? 0 : -errno;
    return S_ISLNK(st.st_mode) ? 1 : 0;
}

static int watch(int epoll_fd, int fd) {
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    return epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &ev) == 0 ? 0 : errno;
}

int tgshim_poller_open(tgshim_poller *poller) {
    int err;
    poller->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    poller->timer_fd = timerfd_create(CLOCK_BOOTTIME, TFD_NONBLOCK | TFD_CLOEXEC);
    poller->event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (poller->epoll_fd < 0 || poller->timer_fd < 0 || poller->event_fd < 0) {
        err = errno;
        tgshim_poller_close(poller);
        return err;
    }
    if ((err = watch(poller->epoll_fd, poller->timer_fd)) != 0 ||
        (err = watch(poller->epoll_fd, poller->event_fd)) != 0) {
        tgshim_poller_close(poller);
        return err;
    }
    return 0;
}

void tgshim_poller_close(tgshim_poller *poller) {
    if (poller->epoll_fd >= 0) close(poller->epoll_fd);
    if (poller->timer_fd >= 0) close(poller->timer_fd);
    if (poller->event_fd >= 0) close(poller->event_fd);
    poller->epoll_fd = poller->timer_fd = poller->event_fd = -1;
}

int tgshim_poller_arm(const tgshim_poller *poller, int64_t deadline_ns) {
    struct itimerspec spec;
    memset(&spec, 0, sizeof spec);
    if (deadline_ns > 0) {
        spec.it_value.tv_sec = (time_t)(deadline_ns / INT64_C(1000000000));
        spec.it_value.tv_nsec = (long)(deadline_ns % INT64_C(1000000000));
    }
    return timerfd_settime(poller->timer_fd, TFD_TIMER_ABSTIME, &spec, NULL) == 0
               ? 0 : errno;
}

int tgshim_poller_wake(const tgshim_poller *poller) {
    uint64_t one = 1;
    ssize_t n;
    do {
        n = write(poller->event_fd, &one, sizeof one);
    } while (n < 0 && errno == EINTR);
    /* EAGAIN means the counter is already non-zero: it is readable anyway. */
    return n < 0 && errno != EAGAIN ? errno : 0;
}

void tgshim_poller_drain(const tgshim_poller *poller) {
    uint64_t value;
    ssize_t n;
    do {
        n = read(poller->timer_fd, &value, sizeof value);
    } while (n < 0 && errno == EINTR);
    do {
        n = read(poller->event_fd, &value, sizeof value);
    } while (n < 0 && errno == EINTR);
}

int tgshim_poller_wait(const tgshim_poller *poller, int timeout_ms) {
    struct epoll_event ev;
    int n = epoll_wait(poller->epoll_fd, &ev, 1, timeout_ms);
    if (n < 0) return errno == EINTR ? 0 : -errno;
    return n > 0 ? 1 : 0;
}

/* The calling thread's last error: its message and, beside it, the kind of
 * its store failure, both set by every failing call. */
static _Thread_local struct {
    char message[512];
    int32_t store_failure;
} last_error;

void tgshim_error_set(const char *message, int32_t store_failure) {
    size_t n = strlen(message);
    if (n >= sizeof last_error.message) n = sizeof last_error.message - 1;
    memcpy(last_error.message, message, n);
    last_error.message[n] = '\0';
    last_error.store_failure = store_failure;
}

const char *tgshim_error_get(void) { return last_error.message; }

int32_t tgshim_error_store_failure(void) { return last_error.store_failure; }

const char *tgshim_version_string(void) { return TG_VERSION_STRING; }

int tgshim_thread_start(void *(*body)(void *), void *argument,
                        unsigned long *out_thread) {
    sigset_t all, old;
    pthread_t thread;
    int err;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    err = pthread_create(&thread, NULL, body, argument);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err == 0) {
        pthread_setname_np(thread, "tickgate");
        *out_thread = (unsigned long)thread;
    }
    return err;
}

int tgshim_thread_join(unsigned long thread) {
    return pthread_join((pthread_t)thread, NULL);
}

int tgshim_thread_detach(unsigned long thread) {
    return pthread_detach((pthread_t)thread);
}

unsigned long tgshim_thread_self(void) { return (unsigned long)pthread_self(); }

/* Tables of 2 MiB and more ask for transparent huge pages: a lookup at a
 * random key then costs one TLB entry per 2 MiB instead of per 4 KiB, which
 * is most of what a cold lookup in a million-entry table pays (above all in
 * a virtual machine, where a TLB miss walks two page tables). Advice only:
 * where huge pages are off, nothing changes. */
static void advise_huge(void *pages, size_t size) {
#ifdef MADV_HUGEPAGE
    if (size >= (size_t)2 << 20) madvise(pages, size, MADV_HUGEPAGE);
#else
    (void)pages, (void)size;
#endif
}

void *tgshim_pages_map(size_t size) {
    void *pages = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (pages == MAP_FAILED) return NULL;
    advise_huge(pages, size);
    return pages;
}

void *tgshim_pages_remap(void *pages, size_t old_size, size_t new_size) {
    void *moved = mremap(pages, old_size, new_size, MREMAP_MAYMOVE);
    if (moved == MAP_FAILED) return NULL;
    advise_huge(moved, new_size);
    return moved;
}

void tgshim_pages_unmap(void *pages, size_t size) {
    if (pages) munmap(pages, size);
}

_Alignas(64) uintptr_t tgshim_handle_chunks[TGSHIM_HANDLE_CHUNKS];
