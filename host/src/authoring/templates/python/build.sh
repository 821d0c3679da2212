#!/usr/bin/env bash
# Builds {{name}}: a virtual environment holding the SDK (requirements.txt), the WIT world of the
# capabilities conductor.toml grants (the SDK's conductor-plugin-wit), its Python bindings, the
# unit tests (tests/, against the SDK's fakes), then the component {{wasm}} beside this script.
#
#   ./build.sh
#
# componentize-py builds the component: $COMPONENTIZE_PY, else the pinned one conductor's tools
# install (${XDG_CACHE_HOME:-~/.cache}/conductor/tools/bin/componentize-py, from
# `scripts/build-polyglot-plugins.sh --tools` in the conductor repository), else componentize-py
# on PATH (`pip install componentize-py=={{componentize_py}}`). To take a newer SDK: rm -rf .venv.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

# The capabilities the plugin imports: conductor.toml's `grants` must hold them.
CAPABILITIES="log,kv"
WORLD="conductor-source"

COMPONENTIZE_PY="${COMPONENTIZE_PY:-${XDG_CACHE_HOME:-$HOME/.cache}/conductor/tools/bin/componentize-py}"
[ -x "$COMPONENTIZE_PY" ] || COMPONENTIZE_PY="$(command -v componentize-py || true)"
[ -n "$COMPONENTIZE_PY" ] || {
    echo "build.sh: componentize-py not found: set COMPONENTIZE_PY, or pip install componentize-py=={{componentize_py}}" >&2
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
# The SDK comes from the virtual environment's site-packages.
VIRTUAL_ENV="$PWD/.venv" "$COMPONENTIZE_PY" -q -d build/wit -w "$WORLD" componentize -p src app -o {{wasm}}
echo "build.sh: built $PWD/{{wasm}}"
