#!/usr/bin/env bash
# Builds the default plugins as WebAssembly components and puts them where conductor.toml looks
# for them (plugins/dist/). Adds the wasm32-wasip2 Rust target when rustup is there and it is not.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if command -v rustup >/dev/null 2>&1 && ! rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2; then
    echo "adding rust target wasm32-wasip2" >&2
    rustup target add wasm32-wasip2 >&2
fi
target_dir="${CARGO_TARGET_DIR:-target}"
cargo build --locked --profile plugin --target wasm32-wasip2 -p kube-plugin -p maestro-plugin -p consumer-controller-plugin "$@"
mkdir -p plugins/dist
for plugin in kube maestro consumer-controller; do
    cp "$target_dir/wasm32-wasip2/plugin/${plugin//-/_}_plugin.wasm" "plugins/dist/$plugin.wasm"
done
echo "plugins/dist/: kube.wasm maestro.wasm consumer-controller.wasm" >&2
