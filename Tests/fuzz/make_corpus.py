#!/usr/bin/env python3
"""make_corpus.py - writes the seed corpora of Tests/fuzz (committed files).

    Tests/fuzz/make_corpus.py [TEMPLATE]

fuzz_api seeds are op scripts in the byte encoding that fuzz_api.c decodes
(one op byte, then its arguments); each helper below mirrors one decoder.
fuzz_store seeds are "mode, options" headers plus patches; TEMPLATE (a file
written by `TG_FUZZ_DUMP_TEMPLATE=FILE fuzz_store -runs=1`) becomes the
whole-file seed. Re-run it when the decoders change.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# ---- fuzz_api encoding ------------------------------------------------------
# engine selector: 0 NULL, 1 stale, 2 garbage(8 bytes), 3 tagged id(4 bytes),
# 4 stack pointer, 5 id 0, 8/9/10/11 slots 0-3
SLOT = [8, 9, 10, 11]
STALE, NULLE, GARBAGE, TAGGED, STACK, ID0 = 1, 0, 2, 3, 4, 5
# key table indexes (fuzz_api.c key())
K = {"login": 0, "register": 1, "alice": 2, "bob": 3, "phone": 4, "mail": 5,
     "": 6, None: 7, "ff": 8, "overlong": 9, "surrogate": 10, "cafe": 11,
     "cjk": 12, "emoji": 13, "cut": 14, "toohigh": 15, "x": 16}
def rawkey(bs): return bytes([221, len(bs)]) + bs
def key(k):
    # a table entry, else the text as raw input bytes
    return bytes([K[k]]) if k in K else rawkey(k.encode())
def longkey(n): return bytes([200 + {255: 0, 256: 1, 257: 2}[n]])
# duration table indexes (fuzz_api.c duration())
D = {0: 0, -1: 1, 1: 2, 2: 3, 9: 4, 10: 5, 11: 6, 999: 7, 1000: 8,
     1001: 9, 60000: 10, 86400000: 11, 86400001: 12, "max": 13, "max+1": 14,
     "max-1": 15, "i64max": 16, "i64min": 17, 30000: 22, 5: 23}
def dur(d): return bytes([D[d]])

def op_open(slot, host=True, manual=True, extra=b""):
    how = (1 if host else 0) | (4 if manual else 0)
    return bytes([0, slot, how]) + extra
def op_open_defaults(slot): return bytes([0, slot, 3])
def op_close(e): return bytes([1, e])
def op_subscribe(e, scope, subject=None, scope_only=False, gate=False,
                 mode=0, no_destroy=False, null_out=False):
    how = (1 if scope_only else 0) | (2 if gate else 0) | \
          (8 if no_destroy else 0) | (mode << 4)
    b = bytes([2, e, how]) + key(scope)
    if not scope_only and not gate:
        b += key(subject)
    return b + bytes([0 if null_out else 1])
def op_unsubscribe(e, which=0): return bytes([4, e, which])
def op_start(e, scope, subject, d, tick=0, flags=0, k=key):
    return bytes([5, e]) + k(scope) + k(subject) + dur(d) + dur(tick) + \
        bytes([flags, 1])
def op_cancel(e, scope, subject): return bytes([7, e, 0]) + key(scope) + key(subject)
def op_cancel_scope(e, scope): return bytes([7, e, 1 | 8]) + key(scope)
def op_cancel_all(e): return bytes([7, e, 2 | 8])
def op_remaining(e, scope, subject): return bytes([8, e, 0 | 4 | 8]) + key(scope) + key(subject)
def op_list(e): return bytes([8, e, 1 | 8 | 16])
def op_button(e, scope, subject): return bytes([8, e, 2, 0]) + key(scope) + key(subject)
def op_now(e): return bytes([8, e, 3])
def op_advance(e, d): return bytes([9, e, 0]) + dur(d)
def op_set_wall(e, d): return bytes([9, e, 1]) + dur(d)
def op_dispatch(e): return bytes([9, e, 2 | 8])
def op_fd(e): return bytes([9, e, 3])
def op_flush(e): return bytes([9, e, 4])
def op_policy_default(e, scope): return bytes([11, e, 0, 0]) + key(scope)
def op_policy_get(e, scope): return bytes([11, e, 2, 0]) + key(scope)
def op_titles(e, scope, picks):
    # picks: 5 items: an int (<100 NULL, 100..199 the template table) or
    # bytes (a raw template)
    b = bytes([12, e])
    for p in picks:
        b += bytes([p]) if isinstance(p, int) else bytes([200]) + rawkey(p)
    return b + bytes([0]) + key(scope) + bytes([1])
def op_send_begin(e, scope, subject): return bytes([13, e, 0]) + key(scope) + key(subject)
def op_send_end(e, outcome=1, which=0): return bytes([13, e, 1, outcome - 1, which]) + dur(0)
def op_verified(e, scope, subject): return bytes([13, e, 2]) + key(scope) + key(subject)
def op_require(e, realm, needs_login=True, coalesce=None, mode=0):
    f = (1 if needs_login else 0) | (2 if coalesce is not None else 0)
    b = bytes([14, e, 0, mode << 3, f]) + key(realm)
    if needs_login:
        b += bytes([1])
    if coalesce is not None:
        b += key(coalesce)
    return b
def op_withdraw(e, which=0): return bytes([14, e, 1, which])
def op_login(e, realm, ttl): return bytes([14, e, 2]) + key(realm) + dur(ttl)
def op_login_cancelled(e, realm): return bytes([14, e, 3]) + key(realm)
def op_logout(e, realm): return bytes([14, e, 4]) + key(realm)
def op_session(e, realm): return bytes([14, e, 5]) + key(realm)
def op_req_timeout(e, realm, d): return bytes([14, e, 6]) + key(realm) + dur(d)
def op_misc(which): return bytes([15, which, 0, 0, 0, 0])

S0, S1 = SLOT[0], SLOT[1]
api = {
    "countdown_basic": op_open(0) + op_subscribe(S0, "login", "alice") +
        op_start(S0, "login", "alice", 60000) + op_dispatch(S0) +
        op_advance(S0, 1000) + op_dispatch(S0) + op_remaining(S0, "login", "alice") +
        op_list(S0) + op_button(S0, "login", "alice") +
        op_cancel(S0, "login", "alice") + op_dispatch(S0) + op_close(S0),
    "scope_observer_ticks": op_open(0) + op_subscribe(S0, "login", scope_only=True) +
        op_start(S0, "login", "alice", 1000, tick=10) +
        op_start(S0, "login", "bob", 30000, flags=1) +
        op_advance(S0, 999) + op_dispatch(S0) + op_advance(S0, 1) + op_dispatch(S0) +
        op_cancel_scope(S0, "login") + op_cancel_all(S0) + op_dispatch(S0),
    "engine_thread_self_unsubscribe": op_open(1, host=False, manual=False) +
        op_subscribe(S1, "login", "alice", mode=1) +
        op_start(S1, "login", "alice", 1) + op_now(S1) + op_fd(S1) + op_close(S1),
    "engine_thread_manual": op_open(1, host=False, manual=True) +
        op_subscribe(S1, "login", "alice", mode=2) +
        op_start(S1, "login", "alice", 2) + op_advance(S1, 1000) +
        op_advance(S1, "max") + op_dispatch(S1) + op_close(S1),
    "close_inside_callback": op_open(0) + op_subscribe(S0, "login", "alice", mode=5) +
        op_subscribe(S0, "login", "bob") + op_require(S0, "account") +
        op_dispatch(S0) + op_start(S0, "login", "alice", 5) + op_close(S0) + op_close(STALE),
    "bad_keys": op_open(0) +
        op_start(S0, None, "alice", 1000) + op_start(S0, "", "alice", 1000) +
        op_start(S0, "ff", "overlong", 1000) + op_start(S0, "surrogate", "cut", 1000) +
        op_start(S0, "toohigh", "emoji", 1000) + op_start(S0, "cjk", "cafe", 1000) +
        op_start(S0, "login", "alice", 1000, k=lambda _: longkey(256)) +
        op_start(S0, "login", "alice", 1000, k=lambda _: longkey(257)) +
        op_start(S0, "login", "alice", 1000, k=lambda _: rawkey(b"a\x00b")) +
        op_subscribe(S0, "", "x") + op_subscribe(S0, None, None),
    "bad_durations": op_open(0) +
        b"".join(op_start(S0, "login", "alice", d, tick=t, flags=1)
                 for d in (0, -1, "max", "max+1", "i64max", "i64min")
                 for t in (0, 9, 10, 86400000, 86400001, "i64min")) +
        op_advance(S0, -1) + op_advance(S0, "max+1") + op_advance(S0, "max") +
        op_set_wall(S0, -1) + op_set_wall(S0, "i64max"),
    "stale_and_garbage_handles": op_open(0) + op_close(S0) +
        op_start(STALE, "login", "alice", 1000) + op_start(NULLE, "login", "alice", 1000) +
        op_start(ID0, "login", "alice", 1000) + op_start(STACK, "login", "alice", 1000) +
        bytes([5, GARBAGE]) + b"\xde\xad\xbe\xef\x00\x00\x00\x08" + key("login") +
        key("alice") + dur(1000) + dur(0) + bytes([0, 1]) +
        bytes([1, TAGGED, 0, 0, 0, 99]) + op_close(STALE) + op_close(NULLE),
    "sends": op_open(0) + op_policy_default(S0, "login") + op_policy_get(S0, "login") +
        op_subscribe(S0, "login", "phone") +
        op_send_begin(S0, "login", "phone") + op_send_begin(S0, "login", "phone") +
        op_send_end(S0, 1) + op_dispatch(S0) + op_send_begin(S0, "login", "phone") +
        op_advance(S0, 60000) + op_send_begin(S0, "login", "phone") +
        op_send_end(S0, 2) + op_verified(S0, "login", "phone") +
        op_send_end(S0, 1, which=200) + op_dispatch(S0),
    "titles": op_open(0) + op_titles(S0, "login", [100, 108, 112, 113, 102]) +
        op_titles(S0, "login", [104, 105, 106, 110, 111]) +
        op_titles(S0, "login", [b"{s}", b"{m:ss} left", 0, b"{{", b"\xe5\x86\x8d {m}"]) +
        op_start(S0, "login", "alice", 60000) + op_button(S0, "login", "alice") +
        op_subscribe(S0, "login", "alice") + op_dispatch(S0),
    "gate": op_open(0) + op_subscribe(S0, "account", gate=True) +
        op_require(S0, "account") + op_require(S0, "account", coalesce="x") +
        op_require(S0, "account", coalesce="x") + op_require(S0, "account", needs_login=False) +
        op_dispatch(S0) + op_login(S0, "account", 1000) + op_dispatch(S0) +
        op_session(S0, "account") + op_advance(S0, 1000) + op_dispatch(S0) +
        op_require(S0, "account", mode=1) + op_login_cancelled(S0, "account") +
        op_require(S0, "account") + op_withdraw(S0) + op_logout(S0, "account") +
        op_req_timeout(S0, "account", 5) + op_require(S0, "account") +
        op_advance(S0, 1000) + op_dispatch(S0) + op_close(S0),
    "misc": op_misc(0) + op_misc(1) + op_misc(2) + op_misc(3) + op_open_defaults(2) +
        op_close(SLOT[2]),
}

# ---- fuzz_store encoding ----------------------------------------------------
# fuzz_store.c g_columns, in order
COLUMNS = [
    "countdowns.scope", "countdowns.subject", "countdowns.phase", "countdowns.duration_ns",
    "countdowns.tick_ns", "countdowns.boot_id", "countdowns.boot_deadline_ns",
    "countdowns.wall_deadline_ns", "send_records.scope", "send_records.subject",
    "send_records.consecutive", "send_records.has_sent", "send_records.last_send",
    "send_records.sends", "policies.scope", "policies.cooldowns_ms", "policies.window_max_sends",
    "policies.window_ms", "policies.quiet_reset_ms", "policies.ticket_timeout_ms", "titles.scope",
    "titles.idle", "titles.sending", "titles.cooling", "titles.ready_again", "titles.locked",
    "sessions.realm", "sessions.logged_in", "sessions.expiry", "sessions.ttl_ns"]
COL = {name: index for index, name in enumerate(COLUMNS)}

def patches(*ps):
    out = b""
    for off, bs in ps:
        out += bytes([off >> 8, off & 255, len(bs)]) + bs
    return out

store = {
    "template_same_boot": bytes([0, 0]),
    "template_reboot": bytes([0, 2]),
    "template_reboot_wall_back": bytes([0, 2 | 4]),
    "template_reboot_wall_forward": bytes([0, 2 | 8]),
    "template_thread_group_commit": bytes([0, 0x10 | 0x20]),
    "newer_schema": bytes([0, 0]) + patches((60, b"\x00\x00\x00\x03")),
    "negative_schema": bytes([0, 0]) + patches((60, b"\xff\xff\xff\xff")),
    "bad_page_size": bytes([0, 1]) + patches((16, b"\x00\x07")),
    "bad_header_fresh": bytes([0, 1]) + patches((0, b"SQLite format 4")),
    "page_counts": bytes([0, 0]) + patches((28, b"\x00\x00\x00\x63"), (36, b"\x00\x00\x00\x09")),
    "truncated_half": bytes([2, 0, 0x02, 0x00]),
    "truncated_first_page_fresh": bytes([2, 1, 0x01, 0x00]),
    "empty_file": bytes([1, 0]),
    "garbage_file_fresh": bytes([1, 1]) + b"not a database" * 8,
    "wal_garbage": bytes([3, 0]) + b"\x37\x7f\x06\x82\x00\x2d\xe2\x18" + b"\x00" * 24,
    # rows (mode 4): [column][value kind][row] per edit, column indexes of
    # fuzz_store.c g_columns, kinds of its bind_value
    "row_consecutive_int64_max": bytes([4, 0]) + bytes([COL["send_records.consecutive"], 3, 255]),
    "row_window_max_sends_5e9": bytes([4, 0]) + bytes([COL["policies.window_max_sends"], 13, 255]),
    "row_negative_duration": bytes([4, 0]) + bytes([COL["countdowns.duration_ns"], 1, 0]),
    "row_not_utf8_subject": bytes([4, 2]) + bytes([COL["countdowns.subject"], 7, 1, 3]) + b"\xc3\x28z",
    "row_blob_title": bytes([4, 0]) + bytes([COL["titles.cooling"], 10, 255, 2]) + b"\x00\x01",
    "row_huge_sends": bytes([4, 0]) + bytes([COL["send_records.sends"], 6, 255, 64]),
    "row_real_phase_null_expiry": bytes([4, 0x10]) + bytes([COL["countdowns.phase"], 9, 0]) +
        b"\x00" * 8 + bytes([COL["sessions.expiry"], 11, 255]),
    "row_stamp_garbage": bytes([4, 2]) + bytes([COL["send_records.last_send"], 15, 255]),
}

def write(folder, name, data):
    with open(os.path.join(HERE, "corpus", folder, name), "wb") as f:
        f.write(data)

def main():
    for name, data in api.items():
        write("fuzz_api", name, data)
    for name, data in store.items():
        write("fuzz_store", name, data)
    if len(sys.argv) > 1:
        with open(sys.argv[1], "rb") as f:
            write("fuzz_store", "whole_file_template", f.read())
    print("wrote %d fuzz_api and %d fuzz_store seeds" %
          (len(api), len(store) + (len(sys.argv) > 1)))

if __name__ == "__main__":
    main()
