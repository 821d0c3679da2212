#!/usr/bin/env bash
# Builds the example source plugins written in Python (examples/python-works, componentize-py) and
# JavaScript (examples/js-works, componentize-js) as WebAssembly components, after running their
# unit tests against the SDK's fakes.
#
#   scripts/build-polyglot-plugins.sh [python-works] [js-works]     # default: both
#   scripts/build-polyglot-plugins.sh --tools                        # only install and link the tools
#
# Writes $CARGO_TARGET_DIR/polyglot/ (target/polyglot/ without it), skipping a component newer
# than everything it is built from (the unit tests always run):
#   python_works.wasm, js_works.wasm         the plugins (capabilities emit, log, timer, kv)
#   python_works_pg.wasm, js_works_pg.wasm   the same code built with the `pg` capability as well,
#                                            for the test that the host refuses it without the grant
#
# The bindings are generated from plugin-sdk/wit at every build, never committed:
# plugin-sdk/tools/plugin_wit.py derives the world of the capabilities a plugin uses (see its
# header for why), componentize-py and componentize-js bind to it. The SDK goes in with the
# plugin: componentize-py takes plugin-sdk/python/src beside the staged app.py (and names both
# folders to the SDK, which names them in tracebacks: _conductor_sources), plugin.js
# imports plugin-sdk/js/sdk.mjs by a relative path (componentize-js runs from the repository's
# root); the SDK's own unit tests (plugin-sdk/python/tests, plugin-sdk/js/*.test.mjs) run first.
# The tools are pinned (plugin-sdk/python/requirements.txt, plugin-sdk/js/tools/package-lock.json)
# and installed once through the machine's own pip and npm configuration, each into a folder
# named by its pin:
#   ${XDG_CACHE_HOME:-$HOME/.cache}/conductor/tools/componentize-py-<pin>/      (a venv)
#   ${XDG_CACHE_HOME:-$HOME/.cache}/conductor/tools/js-plugin-tools-<pin>/      (npm ci)
# (<pin>: the first 12 hex digits of the SHA-256 of the pin files); a new pin installs anew and
# removes the old. tools/bin/componentize-py, tools/bin/componentize-js and tools/bin/rolldown
# (the bundler jco brings, which a plugin importing the npm package `conductor-plugin-sdk` is
# bundled with) link to the current pin's, for building plugins of your own (`--tools` installs
# and links them without building anything).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$PWD"

CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/conductor"
TOOLS="$CACHE/tools"
OUT="${CARGO_TARGET_DIR:-target}/polyglot"
CAPABILITIES="emit,log,timer,kv"
WORLD="conductor-source"

log() { echo "build-polyglot-plugins: $*" >&2; }
die() { log "$*"; exit 1; }

plugins=("$@")
[ ${#plugins[@]} -gt 0 ] || plugins=(python-works js-works)
TOOLS_ONLY=0
for p in "${plugins[@]}"; do
    case "$p" in python-works | js-works) ;; --tools) TOOLS_ONLY=1 ;; *) die "unknown plugin $p (python-works, js-works, --tools)" ;; esac
done

command -v python3 >/dev/null || die "python3 is needed (the WIT world generator and componentize-py)"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$OUT" "$TOOLS"
OUT="$(cd "$OUT" && pwd)"

key_of() { cat "$@" | sha256sum | cut -c1-12; }

# Whether the component `$1` exists and is newer than everything it is built from: the plugin's
# folder `$2`, the contract, the SDK's tools and fakes, and this script.
up_to_date() {
    local out="$1" src="$2"
    [ -f "$out" ] || return 1
    [ -z "$(find "$ROOT/$src" "$ROOT/plugin-sdk/wit" "$ROOT/plugin-sdk/tools" "$ROOT/plugin-sdk/python" \
        "$ROOT/plugin-sdk/js" "$ROOT/scripts/build-polyglot-plugins.sh" -newer "$out" \
        -not -path '*/node_modules*' -not -name '__pycache__' -not -name '*.pyc' -print -quit)" ]
}

# Removes the installs of earlier pins beside `$1` (<tool>-<key>).
prune() {
    local keep="$1" old
    for old in "${keep%-*}"-*; do
        [ "$old" = "$keep" ] || [ ! -d "$old" ] || { log "removing $old (an earlier pin)"; rm -rf "$old"; }
    done
}

# --- tools -----------------------------------------------------------------------------------
# $TOOLS/bin/<name of `$1`> → `$1`, the current pin's install.
link_tool() {
    local target="$1" link
    link="$TOOLS/bin/$(basename "$1")"
    [ "$(readlink "$link" 2>/dev/null)" = "$target" ] && return
    mkdir -p "$TOOLS/bin"
    ln -sfn "$target" "$link"
}

componentize_py_install() {
    local req="$ROOT/plugin-sdk/python/requirements.txt"
    local venv
    venv="$TOOLS/componentize-py-$(key_of "$req")"
    if [ ! -f "$venv/.installed" ]; then
        log "installing $(grep -v "^#" "$req" | tr "\n" " ")into $venv"
        rm -rf "$venv"
        python3 -m venv "$venv" >&2
        "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req" >&2
        touch "$venv/.installed"
        prune "$venv"
    fi
    link_tool "$venv/bin/componentize-py"
    COMPONENTIZE_PY="$venv/bin/componentize-py"
}

componentize_py() {
    componentize_py_install
    "$COMPONENTIZE_PY" "$@"
}

componentize_js_install() {
    command -v npm >/dev/null || die "npm is needed (componentize-js)"
    local dir pins="$ROOT/plugin-sdk/js/tools"
    dir="$TOOLS/js-plugin-tools-$(key_of "$pins/package.json" "$pins/package-lock.json")"
    if [ ! -f "$dir/.installed" ]; then
        log "installing componentize-js and jco (plugin-sdk/js/tools/package-lock.json) into $dir"
        rm -rf "$dir"
        mkdir -p "$dir"
        cp "$pins/package.json" "$pins/package-lock.json" "$dir/"
        (cd "$dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2)
        touch "$dir/.installed"
        prune "$dir"
    fi
    link_tool "$dir/node_modules/.bin/componentize-js"
    link_tool "$dir/node_modules/.bin/rolldown"
    COMPONENTIZE_JS="$dir/node_modules/.bin/componentize-js"
}

componentize_js() {
    componentize_js_install
    "$COMPONENTIZE_JS" "$@"
}

# The world for `capabilities`, generated from plugin-sdk/wit into $WORK/<name>-wit.
world() {
    local name="$1" capabilities="$2"
    python3 "$ROOT/plugin-sdk/tools/plugin_wit.py" --capabilities "$capabilities" --world "$WORLD" "$WORK/$name-wit"
    echo "$WORK/$name-wit"
}

# Runs the unit test command `$3…` of `$1`; on failure shows its output and stops, on success
# shows what the filter `$2` keeps of it. The command runs in an `if`, where `set -e` is off: a
# command of several steps chains them with &&.
unit_tests() {
    local what="$1" summary="$2" report
    shift 2
    log "$what: unit tests"
    if ! report="$("$@" 2>&1)"; then
        echo "$report" >&2
        die "$what: unit tests failed"
    fi
    "$summary" <<<"$report" | tr '\n' ' ' >&2
    echo >&2
}
last_lines() { tail -n 3; }
pass_fail() { grep -E '^# (pass|fail)'; }

# Builds $OUT/<stem>.wasm (the capabilities $CAPABILITIES) and $OUT/<stem>_pg.wasm (with `pg`
# too) from the plugin's folder `$3` with `$4 <output> <wit folder>`, each unless up to date.
components() {
    local name="$1" stem="$2" src="$3" builder="$4" variant caps out
    for variant in "" "_pg"; do
        caps="$CAPABILITIES"
        [ -z "$variant" ] || caps="$CAPABILITIES,pg"
        out="$OUT/$stem$variant.wasm"
        if up_to_date "$out" "$src"; then
            log "$name: $out is up to date"
            continue
        fi
        log "$name: $builder → $out (capabilities $caps)"
        "$builder" "$out.tmp" "$(world "$stem$variant" "$caps")"
        mv "$out.tmp" "$out"
    done
}

# --- Python ----------------------------------------------------------------------------------
PYTHON_SRC="examples/python-works"
PYTHON_STAGE="$WORK/python-src"

# The SDK's (plugin-sdk/python/tests: the glue, ocm, the world generator), then the plugin's,
# against the stubs.
python_unit_tests() {
    local bindings="$WORK/python-bindings"
    componentize_py -q -d "$(world python-bindings "$CAPABILITIES")" -w "$WORLD" bindings "$bindings"
    PYTHONPATH="$bindings:$ROOT/plugin-sdk/python/src" PYTHONDONTWRITEBYTECODE=1 \
        python3 -m unittest discover -s plugin-sdk/python/tests -p 'test_*.py' &&
        cd "$PYTHON_SRC" && PYTHONPATH="$bindings:$ROOT/plugin-sdk/python/src:." PYTHONDONTWRITEBYTECODE=1 \
        python3 -m unittest discover -s . -p 'test_*.py'
}

# `app` is the module holding `class Plugin`; only the plugin's own modules are staged (not its
# tests), the SDK's folder beside them. componentize-py mounts the folders at /0, /1, /2 while it
# builds: _conductor_sources names them for tracebacks (examples/python-works/app.py, not /0/app.py).
componentize_python() {
    (cd "$WORK" && componentize_py -q -d "$2" -w "$WORLD" componentize -p "$PYTHON_STAGE" \
        -p "$ROOT/plugin-sdk/python/src" -p "$WORK/python-sources" app -o "$1")
}

build_python() {
    unit_tests "python-works and the SDK package (unittest, conductor_sdk.fakes)" last_lines python_unit_tests
    mkdir -p "$PYTHON_STAGE" "$WORK/python-sources"
    find "$PYTHON_SRC" -maxdepth 1 -name '*.py' ! -name 'test_*.py' -exec cp {} "$PYTHON_STAGE/" \;
    printf 'ROOTS = ("%s", "plugin-sdk/python/src", "<build>")\n' "$PYTHON_SRC" >"$WORK/python-sources/_conductor_sources.py"
    components python-works python_works "$PYTHON_SRC" componentize_python
}

# --- JavaScript ------------------------------------------------------------------------------
JS_SRC="examples/js-works"

# The SDK's (plugin-sdk/js/*.test.mjs: the glue, ocm, the package and its world generator), then
# the plugin's, against the fakes.
js_unit_tests() {
    node --test --test-reporter=tap plugin-sdk/js/ &&
        cd "$JS_SRC" && node --import "$ROOT/plugin-sdk/js/register.mjs" --test --test-reporter=tap
}

# The host links WASI 0.2 (cli, clocks, filesystem, io, random, sockets) but not wasi:http: the
# engine's fetch() and fetch-event features are left out, so nothing imports it.
componentize_javascript() {
    componentize_js "$JS_SRC/plugin.js" --wit "$2" --world-name "$WORLD" --disable http fetch-event \
        --out "$1" >/dev/null
}

build_js() {
    command -v node >/dev/null || die "node is needed (the unit tests and componentize-js)"
    unit_tests "js-works and the SDK package (node:test, plugin-sdk/js fakes)" pass_fail js_unit_tests
    components js-works js_works "$JS_SRC" componentize_javascript
}

if [ "$TOOLS_ONLY" = 1 ]; then
    componentize_py_install
    command -v node >/dev/null || die "node is needed (componentize-js)"
    componentize_js_install
    ls -l "$TOOLS/bin" >&2
    exit 0
fi
plugin_wit_unit_tests() {
    PYTHONPATH=plugin-sdk/python/src PYTHONDONTWRITEBYTECODE=1 \
        python3 -m unittest discover -s plugin-sdk/python/tests -p 'test_plugin_wit.py'
}
unit_tests "the world generator (conductor_plugin_wit)" last_lines plugin_wit_unit_tests
for p in "${plugins[@]}"; do
    case "$p" in
        python-works) build_python ;;
        js-works) build_js ;;
    esac
done
ls -l "$OUT" >&2
