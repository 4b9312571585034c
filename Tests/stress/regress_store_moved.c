/*
 * regress_store_moved.c — found by store_faults.c: a store file deleted or
 * replaced while an engine has it open. Fixed in 508d516 (writes fail with
 * TG_E_STORE_IO once the file moved, and the stale WAL is not left); this
 * is now its regression test. What it showed before:
 *
 * 1. Deleted: open an engine on DIR/store.db, start a countdown (TG_OK),
 *    unlink store.db (and its -wal/-shm), start another: TG_OK. Close:
 *    TG_OK. Nothing is at the path: both changes reported done are gone.
 *    SQLite keeps writing into the unlinked inode; the library never asks
 *    whether the file is still the one at the path.
 * 2. Replaced: open an engine on DIR/store.db, start "a/b"; another engine
 *    writes a store with "other/x" and it is rename(2)d over store.db (a
 *    restore from backup, an atomic replace by another tool). Close the
 *    first engine: TG_OK, but it leaves its WAL (store.db-wal) next to the
 *    new file. The next open of store.db replays that stale WAL over the
 *    replacement: "other/x" is gone and "a/b" is back. (Same with a write
 *    after the replacement: that write lands, the replacement is lost.)
 *
 * Expected: after the file at the path changed, writes fail with
 *   TG_E_STORE_IO ("the store file was deleted or replaced"), and the
 *   engine leaves the new file at the path alone. (SQLite can tell:
 *   sqlite3_file_control(db, "main", SQLITE_FCNTL_HAS_MOVED, &moved)
 *   before a write transaction.)
 * Got before the fix: TG_OK for every call, and the losses above.
 *
 * Exit status 0 when the library behaves as expected.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>
#include <tickgate.h>

static tg_engine *open_at(const char *path)
{
    tg_engine_options o;
    tg_engine *e = NULL;
    tg_engine_options_init(&o, sizeof o);
    o.delivery = TG_DELIVERY_HOST_THREAD;
    o.clock = TG_CLOCK_MANUAL;
    o.store_path = path;
    o.manual_boot_id = "repro";
    if (tg_engine_open(&o, &e) != TG_OK) {
        fprintf(stderr, "open %s: %s\n", path, tg_last_error_message());
        exit(2);
    }
    return e;
}

/* 1 if the file at path has the countdown (scope, subject). */
static int has(const char *path, const char *scope, const char *subject)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    int n = 0;
    if (access(path, F_OK) != 0)
        return 0;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, "SELECT count(*) FROM countdowns WHERE scope=?1 "
                               "AND subject=?2", -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, scope, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(st, 2, subject, -1, SQLITE_TRANSIENT);
        if (sqlite3_step(st) == SQLITE_ROW)
            n = sqlite3_column_int(st, 0);
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    return n > 0;
}

int main(void)
{
    char dir[] = "/tmp/tg-repro-moved-XXXXXX", path[128], other[128], side[160];
    tg_engine *e, *o;
    tg_status s1, s2;
    int bad = 0;

    if (!mkdtemp(dir))
        return 2;
    snprintf(path, sizeof path, "%s/store.db", dir);
    snprintf(other, sizeof other, "%s/other.db", dir);

    /* 1. deleted */
    e = open_at(path);
    s1 = tg_countdown_start(e, "a", "b", 100000, 0, 0, NULL);
    unlink(path);
    snprintf(side, sizeof side, "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", path);
    unlink(side);
    s2 = tg_countdown_start(e, "a", "c", 100000, 0, 0, NULL);
    tg_engine_close(e);
    printf("deleted:  start after unlink returned %s; a store at the path: %s\n",
           s2 == TG_OK ? "TG_OK" : tg_status_string(s2),
           access(path, F_OK) == 0 ? "yes" : "no");
    if (s2 == TG_OK && !has(path, "a", "c")) {
        printf("FAIL deleted: a change reported TG_OK is nowhere\n");
        bad++;
    }
    (void)s1;

    /* 2. replaced */
    e = open_at(path);
    tg_countdown_start(e, "a", "b", 100000, 0, 0, NULL);
    o = open_at(other);
    tg_countdown_start(o, "other", "x", 100000, 0, 0, NULL);
    tg_engine_close(o);
    rename(other, path); /* the replacement */
    tg_engine_close(e);
    snprintf(side, sizeof side, "%s-wal", path);
    printf("replaced: after close, a stale %s is %s; the path now has "
           "other/x: %s, a/b: %s\n",
           "store.db-wal", access(side, F_OK) == 0 ? "left" : "gone",
           has(path, "other", "x") ? "yes" : "no", has(path, "a", "b") ? "yes" : "no");
    if (!has(path, "other", "x")) {
        printf("FAIL replaced: the replacement store lost its content\n");
        bad++;
    }
    snprintf(side, sizeof side, "rm -rf %s", dir);
    if (system(side) != 0)
        bad += 0;
    return bad ? 1 : 0;
}
