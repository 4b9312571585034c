#!/bin/sh
# Installing like a Python package: a platform wheel of bindings/python with
# the built library inside, installed into a fresh virtual environment, and
# imported there with no TICKGATE_LIBRARY set. Usage: wheel.sh LIBRARY SOURCE_DIR
set -eu
library=$1
source=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$source/bindings/python" "$work/src"
rm -rf "$work/src/tickgate/_lib" && mkdir -p "$work/src/tickgate/_lib"
cp "$(readlink -f "$library")" "$work/src/tickgate/_lib/libtickgate.so"
python3 -m pip wheel --quiet --no-build-isolation --no-deps -w "$work/dist" "$work/src"
wheel=$(ls "$work"/dist/tickgate-*.whl)
echo "built $(basename "$wheel")"
case $wheel in *linux_x86_64.whl|*linux_*.whl) ;; *) echo "not a platform wheel: $wheel" >&2; exit 1 ;; esac
python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --no-index --no-deps "$wheel"
cd "$work"
env -u TICKGATE_LIBRARY -u PYTHONPATH -u LD_LIBRARY_PATH "$work/venv/bin/python" -c '
import tickgate
with tickgate.Engine() as engine:
    engine.start("login", "+8613800000000", 60)
    assert engine.is_counting("login", "+8613800000000")
print("wheel test: imported", tickgate.__name__, "from", tickgate.__file__)
'
