# The two commands: `make demo` and `make test`. Both configure and build
# with CMake + Ninja in build/, installing CMake and Ninja with apt-get when
# they are missing and this user may.

BUILD_DIR ?= build
BUILD_TYPE ?= Release
# Where `make install` puts the library, the headers, tickgate.pc and the
# CMake package.
PREFIX ?= /usr/local
CMAKE ?= cmake
CTEST ?= ctest
# The Swift toolchain's driver (the one CMake found, else the PATH's).
SWIFT ?= $(shell sed -n 's/^SWIFT_EXECUTABLE:[A-Z]*=//p' $(BUILD_DIR)/CMakeCache.txt 2>/dev/null || true)

.PHONY: all build demo demo-web test install uninstall clean tools web-tools typing-tools

all: build

# Make sure the build tools (CMake, Ninja, pkg-config), tmux (the demo's
# screen test) and the libraries the examples and tests link (SQLite, GLib,
# libuv, hiredis, OpenSSL) and redis-server and redis-sentinel (the Redis tests)
# exist; install what is missing
# with apt-get (Debian/Ubuntu) if we can, else say what to install.
tools:
	@missing=""; \
	command -v $(CMAKE) >/dev/null 2>&1 || missing="$$missing cmake"; \
	command -v ninja >/dev/null 2>&1 || missing="$$missing ninja-build"; \
	command -v pkg-config >/dev/null 2>&1 || missing="$$missing pkg-config"; \
	command -v tmux >/dev/null 2>&1 || missing="$$missing tmux"; \
	pkg-config --exists glib-2.0 2>/dev/null || missing="$$missing libglib2.0-dev"; \
	pkg-config --exists libuv 2>/dev/null || missing="$$missing libuv1-dev"; \
	pkg-config --exists sqlite3 2>/dev/null || missing="$$missing libsqlite3-dev"; \
	pkg-config --exists hiredis 2>/dev/null || missing="$$missing libhiredis-dev"; \
	pkg-config --exists openssl 2>/dev/null || missing="$$missing libssl-dev"; \
	command -v redis-server >/dev/null 2>&1 || missing="$$missing redis-server"; \
	command -v redis-sentinel >/dev/null 2>&1 || missing="$$missing redis-sentinel"; \
	if [ -n "$$missing" ]; then \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    echo "Installing$$missing with apt-get"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  elif command -v apt-get >/dev/null 2>&1 && command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then \
	    echo "Installing$$missing with sudo apt-get"; \
	    sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else \
	    echo "Tickgate needs:$$missing (CMake >= 3.25, Ninja, and the libraries the examples and tests use). Install them, e.g. 'sudo apt-get install$$missing', then run make again." >&2; \
	    exit 1; \
	  fi; \
	fi
	@command -v swiftc >/dev/null 2>&1 || { echo "Tickgate needs Swift 6.3 or later: put its bin folder (with swift and swiftc) on PATH." >&2; exit 1; }

$(BUILD_DIR)/build.ninja: CMakeLists.txt | tools
	$(CMAKE) -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE)

build: tools $(BUILD_DIR)/build.ninja
	$(CMAKE) --build $(BUILD_DIR)

demo: build
	$(BUILD_DIR)/examples/tickgate-demo $(ARGS)

# The metrics collector's test (Tests/python/test_stats.py) imports Python's
# prometheus_client. Nothing is installed into the user's Python: without
# it, that test reports SKIP, and this says what to install.
test: build web-tools typing-tools
	@python3 -c 'import prometheus_client' >/dev/null 2>&1 || \
	  echo "the metrics collector's test needs Python's prometheus_client in the python3 that runs the tests (e.g. in a virtual environment: 'pip install prometheus_client'); without it, it reports SKIP" >&2
	$(CTEST) --test-dir $(BUILD_DIR) --output-on-failure --timeout 900

# The web example (examples/web): a redis-server and two app servers on
# WEB_PORTS, sharing it; Ctrl-C stops all three. Each server has an admin
# listener on 127.0.0.1 too, at WEB_ADMIN_PORTS (default: each of WEB_PORTS
# + 1000, so 9081,9082): the operator's panels, /metrics, /api/stats and
# /api/records, which the public ports answer 404 for. Redis listens on
# WEB_REDIS_PORT (default: a free port, printed). All of them are printed at
# the start. Its Python packages go into BUILD_DIR/web-venv; ARGS go to the
# app servers (e.g. ARGS='--fail-rate 0').
# A port in use or a server that cannot start: it says why and fails.
WEB_PORTS ?= 8081,8082
WEB_ADMIN_PORTS ?=
WEB_REDIS_PORT ?=
demo-web: build
	sh examples/web/venv.sh $(BUILD_DIR)/web-venv examples/web/requirements.txt
	TICKGATE_LIBRARY=$(abspath $(BUILD_DIR))/libtickgate.so \
	    $(BUILD_DIR)/web-venv/bin/python examples/web/cluster.py --ports $(WEB_PORTS) \
	    $(if $(WEB_ADMIN_PORTS),--admin-ports $(WEB_ADMIN_PORTS)) $(if $(WEB_REDIS_PORT),--redis-port $(WEB_REDIS_PORT)) $(ARGS)

# The browser test's browser: Debian's chromium and chromedriver (and a
# Chinese font for its screenshots of the page in Chinese), and the
# proxy test's nginx, installed with apt-get when missing and we may;
# otherwise those tests report SKIP and say what to install.
web-tools:
	@missing=""; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	command -v chromedriver >/dev/null 2>&1 || missing="$$missing chromium-driver"; \
	command -v nginx >/dev/null 2>&1 || test -x /usr/sbin/nginx || missing="$$missing nginx"; \
	{ command -v fc-list >/dev/null 2>&1 && fc-list :lang=zh 2>/dev/null | grep -q .; } || missing="$$missing fonts-wqy-microhei"; \
	if [ -n "$$missing" ]; then \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    echo "Installing$$missing with apt-get (the web example's browser and proxy tests)"; \
	    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; } || \
	      echo "could not install$$missing: the web tests that need it will report SKIP" >&2; \
	  else \
	    echo "the web tests need$$missing (e.g. 'sudo apt-get install$$missing'); without it, they report SKIP" >&2; \
	  fi; \
	fi

# mypy for the typing tests (Tests/python/test_typing.py, test_newcomer.py:
# mypy --strict on the package and on every Python example of the docs), in
# a virtual environment of its own, BUILD_DIR/mypy-venv (the version pinned
# in Tests/python/typing-requirements.txt), when the python3 that runs the
# tests has none; never into the user's Python. Without it (no package
# index, no venv module) those tests report SKIP, and this says why.
typing-tools:
	@python3 -c 'import mypy' >/dev/null 2>&1 || \
	  sh examples/web/venv.sh $(BUILD_DIR)/mypy-venv Tests/python/typing-requirements.txt || \
	  echo "could not make $(BUILD_DIR)/mypy-venv: the typing tests will report SKIP" >&2

# Installs into PREFIX and records every file in BUILD_DIR/install_manifest.txt.
# As root into /usr or /usr/local it refreshes the loader's cache (ldconfig),
# so programs find libtickgate.so.0 at once; elsewhere it says how to link.
install: build
	$(CMAKE) --install $(BUILD_DIR) --prefix $(PREFIX)
	@case "$(PREFIX)" in \
	  /usr|/usr/|/usr/local|/usr/local/) \
	    if [ "$$(id -u)" = 0 ] && command -v ldconfig >/dev/null 2>&1; then \
	      ldconfig && echo "ran ldconfig: programs find libtickgate.so.0 in $(PREFIX)"; \
	    else \
	      echo "run 'sudo ldconfig' once, so that programs find libtickgate.so.0 in $(PREFIX)"; \
	    fi ;; \
	  *) echo "$(PREFIX) is not searched by the dynamic loader: link with -Wl,-rpath,$(PREFIX)/lib (or set LD_LIBRARY_PATH)" ;; \
	esac

# Removes exactly what the last `make install` installed (its manifest), and
# the project's own folders it leaves empty.
uninstall:
	@test -f $(BUILD_DIR)/install_manifest.txt || { \
	  echo "nothing to uninstall: $(BUILD_DIR)/install_manifest.txt is missing (make install writes it)" >&2; exit 1; }
	@while IFS= read -r file || [ -n "$$file" ]; do \
	  if [ -e "$$file" ] || [ -L "$$file" ]; then rm -f "$$file" && echo "removed $$file"; fi; \
	done < $(BUILD_DIR)/install_manifest.txt
	@sed -n 's|/[^/]*$$||p' $(BUILD_DIR)/install_manifest.txt | sort -ru | grep -i '/tickgate$$' | \
	  while IFS= read -r dir; do rmdir "$$dir" 2>/dev/null || true; done
	@rm -f $(BUILD_DIR)/install_manifest.txt

clean:
	rm -rf $(BUILD_DIR) .build

# ---------------------------------------------------------------------------
# make bench: the benchmark suite (benchmarks/README.md), Tickgate side by
# side with libuv, libevent and keyed libuv timers (Abseil, uthash), on
# Redis beside redis-benchmark and Python's limits, and the web example under
# load (ab and a threaded client, benchmarks/bench_web.py). Builds the library, installs the peers'
# headers and gnuplot with apt-get when they are missing and we are root,
# then benchmarks/run builds benchmarks/, runs them (about 12 minutes on the
# 2-CPU reference machine), writes build/bench.txt, build/bench.csv and
# build/bench.png, and writes the performance page from the run's rows
# (docs/performance.md, docs/bench-run.txt and the charts; a run with
# BENCH_ARGS writes those into the build folder instead).
# BENCH_ARGS passes options to the driver (e.g. BENCH_ARGS=--quick).
.PHONY: bench bench-deps
bench-deps:
	@missing=""; \
	command -v pkg-config >/dev/null 2>&1 || missing="$$missing pkg-config"; \
	pkg-config --exists libuv 2>/dev/null || missing="$$missing libuv1-dev"; \
	pkg-config --exists libevent 2>/dev/null || missing="$$missing libevent-dev"; \
	pkg-config --exists absl_flat_hash_map 2>/dev/null || missing="$$missing libabsl-dev"; \
	test -f /usr/include/uthash.h || missing="$$missing uthash-dev"; \
	command -v g++ >/dev/null 2>&1 || missing="$$missing g++"; \
	command -v gnuplot >/dev/null 2>&1 || missing="$$missing gnuplot-nox"; \
	command -v redis-benchmark >/dev/null 2>&1 || missing="$$missing redis-server"; \
	command -v ab >/dev/null 2>&1 || missing="$$missing apache2-utils"; \
	command -v callgrind_control >/dev/null 2>&1 || missing="$$missing valgrind"; \
	if [ -n "$$missing" ]; then \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    echo "Installing$$missing with apt-get"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else \
	    echo "make bench needs:$$missing. Install them (e.g. 'sudo apt-get install$$missing') or run make bench as root." >&2; \
	    exit 1; \
	  fi; \
	fi

bench: build bench-deps
	TG_BENCH_LIBRARY_BUILT=1 BUILD_DIR=$(BUILD_DIR) benchmarks/run $(BENCH_ARGS)

# ---------------------------------------------------------------------------
# The stress proof beyond `make test` (Tests/stress, Tests/fuzz): the C
# harness under ThreadSanitizer and AddressSanitizer + LeakSanitizer against
# sanitizer builds of the library, and libFuzzer on the C API and the store
# (FUZZ_SECONDS per target, default 60); and the Swift tests of concurrent
# store decisions (StoreDoubleTests) and of the engine under ThreadSanitizer.
.PHONY: sanitize fuzz
sanitize: build
	Tests/stress/run-tsan
	Tests/stress/run-asan
	$(or $(SWIFT),swift) test --sanitize=thread --scratch-path /tmp/tg-swift-tsan \
	    --filter 'StoreDoubleTests|EngineTests|GateTests|SendFlowTests|BudgetTests'

fuzz: build
	Tests/fuzz/run
