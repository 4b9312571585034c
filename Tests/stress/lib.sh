# lib.sh — shared by Tests/stress/run-* and Tests/fuzz/run (sourced, bash).
#
#   tg_root               the repository (two levels above Tests/stress)
#   tg_swift_libdir       the Swift toolchain's lib/swift/linux (libdispatch,
#                         libBlocksRuntime: a sanitized SwiftPM build of the
#                         library needs them)
#   tg_sanitized_lib "KIND..." SCRATCH
#                         `swift build --sanitize=KIND... --scratch-path
#                         SCRATCH --product tickgate` in the repository
#                         (KIND: thread, address, fuzzer, ...); prints the
#                         folder that holds libtickgate.so
#   tg_log MSG            a progress line on stderr

tg_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

tg_log() { printf '%s: %s\n' "${0##*/}" "$*" >&2; }

tg_swift_libdir() {
    local swift
    swift=$(command -v swift) || { tg_log "swift is not on PATH"; return 1; }
    (cd "$(dirname "$(readlink -f "$swift")")/../lib/swift/linux" && pwd)
}

# Whether a build in SCRATCH carries the instrumentation of every kind in
# KINDS, judged on the engine's own Swift code (TickgateCore's
# Engine.swift.o), not only on the C shim. (grep without -q, so that nm gets
# no SIGPIPE under pipefail.)
tg_instrumented() { # SCRATCH KINDS
    local obj k
    command -v nm >/dev/null 2>&1 || return 0
    obj=$(find "$1" -path '*TickgateCore.build/Engine.swift.o' 2>/dev/null | head -n 1)
    [ -n "$obj" ] || return 1
    for k in $2; do
        case $k in
        thread) nm "$obj" | grep ' U __tsan_func_entry' >/dev/null || return 1 ;;
        address) nm "$obj" | grep ' U __asan_' >/dev/null || return 1 ;;
        fuzzer) nm "$obj" | grep -i 'sancov\|__sanitizer_cov' >/dev/null || return 1 ;;
        esac
    done
}

tg_sanitized_lib() { # "KIND..." SCRATCH
    local kinds=$1 scratch=$2 log k attempt joined=""
    local args=()
    for k in $kinds; do joined=${joined:+$joined,}$k; done
    if [ "$joined" = "${kinds// /}" ]; then
        # one sanitizer: SwiftPM's own option
        args=(--sanitize="$joined")
    else
        # Several: SwiftPM passes one -sanitize= per kind, and the Swift
        # driver hands only the last one to the compiler jobs (which one
        # depends on a hash order), so ask the driver for all of them in
        # one comma-joined flag, and the C compiler likewise.
        args=(-Xswiftc "-sanitize=$joined"
              -Xcc "-fsanitize=${joined//fuzzer/fuzzer-no-link}")
    fi
    for attempt in 1 2; do
        log=$(mktemp)
        tg_log "building libtickgate.so with ${args[*]} in $scratch"
        # Package.swift names its linker version script relative to the
        # package folder, hence the cd.
        if ! (cd "$tg_root" && swift build -c debug "${args[@]}" \
                --scratch-path "$scratch" --product tickgate) >"$log" 2>&1; then
            cat "$log" >&2
            rm -f "$log"
            tg_log "swift build ${args[*]} failed"
            return 1
        fi
        rm -f "$log"
        if [ ! -f "$scratch/debug/libtickgate.so" ]; then
            tg_log "no $scratch/debug/libtickgate.so after the build"
            return 1
        fi
        if tg_instrumented "$scratch" "$kinds"; then
            echo "$scratch/debug"
            return 0
        fi
        tg_log "the build in $scratch lacks the $kinds instrumentation; rebuilding from scratch"
        rm -rf "$scratch"
    done
    tg_log "could not get an instrumented build"
    return 1
}
