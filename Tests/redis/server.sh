#!/bin/sh
# Starts or stops the Redis server of the tests (CTest fixture "redis"):
#
#   server.sh start DIR   a redis-server on the unix socket DIR/redis.sock,
#                         with its append-only file in DIR (appendfsync
#                         always); waits until it answers
#   server.sh stop DIR    stops it and removes DIR
#
# DIR is short (the socket path must fit in 107 bytes): CMake picks one
# under /tmp per build folder.
set -eu
command -v redis-server >/dev/null 2>&1 || {
    echo "the Redis tests need redis-server (Debian: apt-get install redis-server)" >&2; exit 1; }
action=$1
dir=$2
stop() {
    if [ -f "$dir/redis.pid" ]; then
        pid=$(cat "$dir/redis.pid")
        kill "$pid" 2>/dev/null || true
        i=0
        while kill -0 "$pid" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
        kill -9 "$pid" 2>/dev/null || true
    fi
}
case "$action" in
start)
    stop
    rm -rf "$dir"
    mkdir -p "$dir"
    redis-server --port 0 --unixsocket "$dir/redis.sock" --unixsocketperm 700 \
        --dir "$dir" --appendonly yes --appendfsync always --save "" \
        --enable-debug-command local --daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log"
    i=0
    until [ "$(redis-cli -s "$dir/redis.sock" ping 2>/dev/null)" = PONG ]; do
        i=$((i + 1))
        if [ $i -gt 100 ]; then
            echo "redis-server did not answer on $dir/redis.sock within 10 s:" >&2
            cat "$dir/redis.log" >&2 || true
            exit 1
        fi
        sleep 0.1
    done
    echo "redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/') on $dir/redis.sock"
    ;;
stop)
    stop
    rm -rf "$dir"
    ;;
*)
    echo "usage: server.sh start|stop DIR" >&2; exit 2 ;;
esac
