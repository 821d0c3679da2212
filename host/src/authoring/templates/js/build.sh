#!/usr/bin/env bash
# Builds {{name}}: installs the SDK (package.json), runs the unit tests (npm test, against the
# SDK's fakes), derives the WIT world of the capabilities conductor.toml grants (the SDK's
# conductor-plugin-wit), bundles plugin.js with the SDK (componentize-js loads relative modules
# only; the `conductor:plugin/…` imports stay), then builds the component {{wasm}} beside this script.
#
#   ./build.sh
#
# The tools are the pinned ones `conductor plugins tools install --lang js` installs:
# ${XDG_CACHE_HOME:-~/.cache}/conductor/tools/bin/componentize-js and .../rolldown, or
# $COMPONENTIZE_JS and $ROLLDOWN.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

# The capabilities the plugin imports: conductor.toml's `grants` must hold them.
CAPABILITIES="log,kv"
WORLD="conductor-source"
CONTRACT="{{contract}}"

TOOLS="${XDG_CACHE_HOME:-$HOME/.cache}/conductor/tools/bin"
COMPONENTIZE_JS="${COMPONENTIZE_JS:-$TOOLS/componentize-js}"
ROLLDOWN="${ROLLDOWN:-$TOOLS/rolldown}"
for tool in "$COMPONENTIZE_JS" "$ROLLDOWN"; do
    [ -x "$tool" ] || {
        echo "build.sh: $tool not found: run \`conductor plugins tools install --lang js\` (or set COMPONENTIZE_JS and ROLLDOWN)" >&2
        exit 1
    }
done

[ -d node_modules/conductor-plugin-sdk ] && [ node_modules/.package-lock.json -nt package.json ] ||
    npm install --no-audit --no-fund --loglevel=error
npm test --silent
rm -rf build
npx --no-install conductor-plugin-wit --capabilities "$CAPABILITIES" --world "$WORLD" build/wit
externals=()
for capability in ${CAPABILITIES//,/ }; do
    externals+=(--external "conductor:plugin/$capability@$CONTRACT")
done
"$ROLLDOWN" plugin.js --format esm --platform neutral "${externals[@]}" --file build/plugin.bundle.js >/dev/null
# From here, so a stack names the bundle by its path in the project: build/plugin.bundle.js:LINE:COLUMN.
"$COMPONENTIZE_JS" build/plugin.bundle.js --wit build/wit --world-name "$WORLD" --disable http fetch-event --out {{wasm}} >/dev/null
echo "build.sh: built $PWD/{{wasm}}"
