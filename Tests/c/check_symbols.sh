#!/bin/sh
# check_symbols.sh LIBRARY.so tickgate.h
#
# The library must export exactly the functions the header declares: every
# dynamic symbol it defines is a function (nm type T) named in the header,
# and every function of the header is exported. Only the linker's own
# _edata, _end and __bss_start, and the names of symbol versions (e.g. the
# "TICKGATE_0" node of a version script), are ignored. Prints both lists on
# a mismatch.
set -eu

if [ $# -ne 2 ]; then
    echo "usage: $0 LIBRARY.so tickgate.h" >&2
    exit 2
fi
lib=$1
header=$2
for f in "$lib" "$header"; do
    if [ ! -r "$f" ]; then
        echo "check_symbols: cannot read $f" >&2
        exit 2
    fi
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Functions declared in the header: strip comments, then take every
# identifier tg_... directly followed by "(".
perl -0777 -pe 's{/\*.*?\*/}{ }gs; s{//[^\n]*}{}g' "$header" |
    grep -oE '(^|[^A-Za-z0-9_])tg_[a-z0-9_]+[[:space:]]*\(' |
    sed -E 's/^[^t]*//; s/[[:space:]]*\($//' | sort -u >"$tmp/header"

# Dynamic symbols the library defines: "TYPE NAME" with version suffixes
# (@VER, @@VER) removed.
nm -D --defined-only "$lib" |
    awk 'NF >= 2 { print $(NF-1), $NF }' |
    sed -E 's/@@?[^ ]*$//' | sort -u >"$tmp/all"
# names of symbol versions, to ignore their absolute (A) entries
nm -D --defined-only "$lib" | grep -oE '@@?[A-Za-z0-9_.]+$' |
    sed -E 's/^@@?//' | sort -u >"$tmp/versions"

: >"$tmp/exported"
: >"$tmp/bad"
while read -r type name; do
    case "$name" in
    _edata | _end | __bss_start) continue ;;
    esac
    if [ "$type" = "A" ] && grep -qxF "$name" "$tmp/versions"; then
        continue
    fi
    case "$type:$name" in
    T:tg_*) echo "$name" >>"$tmp/exported" ;;
    *) echo "$type $name" >>"$tmp/bad" ;;
    esac
done <"$tmp/all"
sort -u -o "$tmp/exported" "$tmp/exported"

status=0
if [ ! -s "$tmp/header" ]; then
    echo "check_symbols: found no tg_ function in $header" >&2
    status=1
fi
if [ -s "$tmp/bad" ]; then
    echo "check_symbols: exported symbols that are not tg_ functions (type T):"
    sed 's/^/    /' "$tmp/bad"
    status=1
fi
if ! cmp -s "$tmp/header" "$tmp/exported"; then
    echo "check_symbols: the exported functions differ from the header"
    echo "  only in the header (not exported):"
    comm -23 "$tmp/header" "$tmp/exported" | sed 's/^/    /'
    echo "  only exported (not in the header):"
    comm -13 "$tmp/header" "$tmp/exported" | sed 's/^/    /'
    status=1
fi
if [ $status -ne 0 ]; then
    echo "  header functions ($(wc -l <"$tmp/header")):"
    sed 's/^/    /' "$tmp/header"
    echo "  exported tg_ functions ($(wc -l <"$tmp/exported")):"
    sed 's/^/    /' "$tmp/exported"
    echo "FAIL"
    exit 1
fi
echo "ok: $(wc -l <"$tmp/header") functions, exported exactly"
exit 0
