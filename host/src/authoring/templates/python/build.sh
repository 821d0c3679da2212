#!/usr/bin/env bash
# Builds {{name}}: a virtual environment holding the SDK (requirements.txt), the WIT world of the
# capabilities conductor.toml grants (the SDK's conductor-plugin-wit), its Python bindings, the
# unit tests (tests/, against the SDK's fakes), then the component {{wasm}} beside this script.
#
#   ./build.sh
#
# componentize-py builds the component: $COMPONENTIZE_PY, else the pinned one
# `conductor plugins tools install --lang python` installs
# (${XDG_CACHE_HOME:-~/.cache}/conductor/tools/bin/componentize-py), else componentize-py on PATH
# (`pip install componentize-py=={{componentize_py}}`). To take a newer SDK: rm -rf .venv.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

# The capabilities the plugin imports: conductor.toml's `grants` must hold them.
CAPABILITIES="log,kv"
WORLD="conductor-source"

COMPONENTIZE_PY="${COMPONENTIZE_PY:-${XDG_CACHE_HOME:-$HOME/.cache}/conductor/tools/bin/componentize-py}"
[ -x "$COMPONENTIZE_PY" ] || COMPONENTIZE_PY="$(command -v componentize-py || true)"
[ -n "$COMPONENTIZE_PY" ] || {
    echo "build.sh: componentize-py not found: run \`conductor plugins tools install --lang python\` (or set COMPONENTIZE_PY)" >&2
    exit 1
}

if [ ! -f .venv/.installed ] || [ requirements.txt -nt .venv/.installed ]; then
    python3 -m venv .venv
    .venv/bin/pip install --quiet --disable-pip-version-check -r requirements.txt
    touch .venv/.installed
fi
rm -rf build
.venv/bin/conductor-plugin-wit --capabilities "$CAPABILITIES" --world "$WORLD" build/wit
"$COMPONENTIZE_PY" -q -d build/wit -w "$WORLD" bindings build/bindings
PYTHONPATH="build/bindings:src" PYTHONDONTWRITEBYTECODE=1 .venv/bin/python -m unittest discover -s tests
# componentize-py mounts the folders of the app's path at /0, /1, … while it builds (the virtual
# environment's site-packages, where the SDK is, last): the SDK reads their names from
# _conductor_sources, so tracebacks name src/app.py rather than /0/app.py.
SITE=(.venv/lib/python3*/site-packages)
mkdir -p build/sources
printf 'ROOTS = ("src", "build/sources", "%s")\n' "${SITE[0]}" >build/sources/_conductor_sources.py
VIRTUAL_ENV="$PWD/.venv" "$COMPONENTIZE_PY" -q -d build/wit -w "$WORLD" componentize -p src -p build/sources app -o {{wasm}}
echo "build.sh: built $PWD/{{wasm}}"
