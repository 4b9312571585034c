#!/bin/sh
# venv.sh DIR REQUIREMENTS [PYTHON]: makes the virtual environment DIR with the
# packages of REQUIREMENTS (pinned), unless DIR already holds exactly those.
# make demo-web uses it for the example (examples/web/requirements.txt), the
# browser test for its own (Tests/web/requirements.txt), make test for mypy
# (Tests/python/typing-requirements.txt).
set -eu
dir=$1 requirements=$2 python=${3:-python3}
# What was installed: the requirements file and the files it includes (-r).
wanted() {
    cat "$requirements"
    sed -n 's/^-r[[:space:]]*//p' "$requirements" | while read -r included; do
        cat "$(dirname "$requirements")/$included"
    done
}
if [ -x "$dir/bin/python" ] && wanted | cmp -s - "$dir/installed.txt"; then
    exit 0
fi
# The first time it installs from the package index, quietly: say so, so
# that a minute of silence does not look like a hang.
echo "venv.sh: making $dir with the packages of $requirements (the first time, a minute or two)"
rm -rf "$dir"
"$python" -m venv "$dir" || {
    echo "venv.sh: '$python -m venv' failed: install Python's venv module (Debian: apt-get install python3-venv)" >&2
    exit 1
}
"$dir/bin/pip" install --quiet --disable-pip-version-check -r "$requirements" || {
    echo "venv.sh: pip could not install $requirements into $dir (it needs the package index)" >&2
    exit 1
}
wanted > "$dir/installed.txt"
echo "venv.sh: $dir has the packages of $requirements"
