/*
 * What Swift's Glibc module lacks, in C: CLOCK_BOOTTIME, timerfd, eventfd,
 * epoll, a thread-local error buffer and a named thread with signals blocked.
 * Every function returns 0 or a positive errno value unless it says otherwise.
 */
#ifndef TICKGATE_SHIM_H
#define TICKGATE_SHIM_H

#include <stddef.h>
#include <stdint.h>

/* A hint to start loading the cache line at address (for writing): the
 * engine's batch paths issue it a few items ahead, so the loads of a mass
 * expiry overlap instead of waiting one by one. */
static inline void tgshim_prefetch(const void *address) {
    __builtin_prefetch(address, 1, 3);
}

/* Nanoseconds on CLOCK_BOOTTIME. */
int64_t tgshim_boottime_ns(void);
/* Nanoseconds since the Unix epoch on CLOCK_REALTIME. */
int64_t tgshim_walltime_ns(void);
/* This boot's id (/proc/sys/kernel/random/boot_id) into buffer (37 bytes
 * with the NUL); "unknown" if it cannot be read. */
void tgshim_boot_id(char *buffer, size_t size);

/* SQLite: binding text and blobs with SQLITE_TRANSIENT (a macro Swift
 * cannot import). */
typedef struct sqlite3_stmt sqlite3_stmt;
int tgshim_sqlite_bind_text(sqlite3_stmt *statement, int index,
                            const char *text, int bytes);

/* Create path as a new regular file with mode 0600, refusing symlinks;
 * returns 0, EEXIST if it exists, or another errno. */
int tgshim_create_private_file(const char *path);
/* 1 if path is a symbolic link, 0 if not or missing, -errno on error. */
int tgshim_is_symlink(const char *path);

/* One epoll descriptor watching a timerfd (CLOCK_BOOTTIME) and an eventfd. */
typedef struct tgshim_poller {
    int epoll_fd;
    int timer_fd;
    int event_fd;
} tgshim_poller;

int tgshim_poller_open(tgshim_poller *poller);
void tgshim_poller_close(tgshim_poller *poller);
/* Arm the timer at an absolute CLOCK_BOOTTIME time; deadline_ns <= 0 disarms. */
int tgshim_poller_arm(const tgshim_poller *poller, int64_t deadline_ns);
/* Make the epoll descriptor readable now. */
int tgshim_poller_wake(const tgshim_poller *poller);
/* Consume the timer expirations and wake-ups that made it readable. */
void tgshim_poller_drain(const tgshim_poller *poller);
/* Block until the epoll descriptor is readable (timeout_ms < 0: forever).
 * Returns 1 when readable, 0 on timeout, or a negative errno. */
int tgshim_poller_wait(const tgshim_poller *poller, int timeout_ms);

/* Pages for big tables: an anonymous private mapping of size bytes (a
 * multiple of the page size), grown in place or moved by the kernel
 * (mremap), so growing a table copies nothing and unmapping returns its
 * memory at once. NULL on failure. */
void *tgshim_pages_map(size_t size);
void *tgshim_pages_remap(void *pages, size_t old_size, size_t new_size);
void tgshim_pages_unmap(void *pages, size_t size);

/* The handle table's directory of chunk addresses (Sources/Tickgate/
 * Handles.swift uses it, with atomics only): static storage, zero when the
 * library is loaded and gone with it at dlclose, so an unloaded library
 * leaves no directory behind. */
enum { TGSHIM_HANDLE_CHUNKS = 65536 };
extern uintptr_t tgshim_handle_chunks[TGSHIM_HANDLE_CHUNKS];
static inline void *tgshim_handle_directory(void) { return tgshim_handle_chunks; }

/* The calling thread's last error: its message (copied, truncated to 511
 * bytes) and the kind of its store failure (a tg_store_failure value, 0 for
 * an error that is not a store failure), set together. */
void tgshim_error_set(const char *message, int32_t store_failure);
const char *tgshim_error_get(void);
int32_t tgshim_error_store_failure(void);

/* TG_VERSION_STRING of tickgate_version.h (a macro Swift cannot import). */
const char *tgshim_version_string(void);

/* Start a joinable thread named "tickgate" with every signal blocked. */
int tgshim_thread_start(void *(*body)(void *), void *argument,
                        unsigned long *out_thread);
int tgshim_thread_join(unsigned long thread);
int tgshim_thread_detach(unsigned long thread);
unsigned long tgshim_thread_self(void);

#endif
