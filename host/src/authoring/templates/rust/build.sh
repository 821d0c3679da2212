#!/usr/bin/env bash
# Builds {{name}}: its unit tests (`cargo test`, against the SDK's fakes), then the WebAssembly
# component {{wasm}} beside this script, which conductor.toml loads.
#
#   ./build.sh
#
# Needs Rust with the wasm32-wasip2 target (added here when rustup is there). With
# CARGO_TARGET_DIR set, cargo builds there: share one between plugins to compile their
# dependencies once.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

if command -v rustup >/dev/null && ! rustup target list --installed | grep -qx wasm32-wasip2; then
    rustup target add wasm32-wasip2
fi
cargo test
cargo build --lib --profile plugin --target wasm32-wasip2
cp "${CARGO_TARGET_DIR:-target}/wasm32-wasip2/plugin/{{snake}}.wasm" {{wasm}}
echo "build.sh: built $PWD/{{wasm}}"
