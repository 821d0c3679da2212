#!/usr/bin/env bash
# The whole test suite, from a fresh machine: sets up what the tests need (Python grpcio agent,
# wasm target), builds the workspace (the conductor binary included) and runs every test.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

eval "$(scripts/setup-test-env.sh)"
export CONDUCTOR_PYTHON CONDUCTOR_PYSTUBS CONDUCTOR_GRPCURL CONDUCTOR_KUBECTL CONDUCTOR_KUBE_BIN \
    CONDUCTOR_PROMETHEUS CONDUCTOR_PROMTOOL
# Builds are slow on small machines: keep them between runs (cargo rebuilds what changed).
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/conductor/target}"
# The cargo tools the tests use (scripts/tools.sh pins them), built once into the cache; inferno,
# for the benches' flame graphs only, is not built here.
eval "$(scripts/tools.sh cargo-deny cargo-cyclonedx cargo-fuzz mdbook)"

# The monitoring assets (deploy/observability), before the slow build: the rules load and every
# alert fires and stays quiet as its unit tests say; the dashboard is well formed and reads only
# recorded series the rules define; the PrometheusRule holds exactly the rules' groups.
"$CONDUCTOR_PROMTOOL" check rules deploy/observability/rules.yml
"$CONDUCTOR_PROMTOOL" test rules deploy/observability/rules-test.yml
python3 deploy/observability/check_dashboard.py deploy/observability/grafana-dashboard.json deploy/observability/rules.yml
python3 deploy/observability/prometheus_rules.py --check

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# Modules form an acyclic graph (docs/architecture.md): no import cycle between siblings, and
# nothing in host/src/plugins uses an item of its parent module.
python3 scripts/module-cycles.py host/src plugin-sdk/src plugins/*/src client/src load/src \
    --no-parent-imports host/src/plugins
# The patched crates are their published versions with their diffs (third_party/patches), and a
# newer patch release of one is named.
scripts/check-third-party.sh
# The docs: the book (docs/, mdbook from scripts/tools.sh) builds, and every relative link and
# anchor of the repository's Markdown resolves.
scripts/check-docs.sh
# Licenses, sources and duplicate versions of the dependencies (deny.toml, cargo-deny).
scripts/check-dependencies.sh
# Build first: the black-box tests start target/debug/conductor and load the plugins built here,
# as native libraries (target/debug/lib*.so) and as WebAssembly components
# (target/wasm32-wasip2/plugin/*.wasm; the default ones are also copied to plugins/dist/).
cargo build --workspace --all-targets --locked
scripts/build-plugins.sh -p static-works -p misbehaving-plugin -p wrong-version-plugin -p flaky-plugin -p greedy-plugin
# The Python and JavaScript example plugins (their unit tests, then the components, into
# target/polyglot/; componentize-py, componentize-js and rolldown cached under
# ~/.cache/conductor/tools, where the projects tests/authoring.rs makes with `conductor plugins
# new` take them from).
scripts/build-polyglot-plugins.sh
# Compile each Python and JavaScript component once, one after the other, into the compile cache
# (~/.cache/conductor/compiled): the tests that load them in parallel then load them in
# milliseconds instead of all compiling the same components at once on the same cores.
for component in "$CARGO_TARGET_DIR"/polyglot/*.wasm; do
    "$CARGO_TARGET_DIR/debug/conductor" plugins inspect "$component" >/dev/null
done
# The image's build steps (deploy/Containerfile runs the same script), into a staging root that
# tests/image.rs starts conductor from — with the test build, not a release one. Somewhere every
# user can read: the test runs the staged binary as the image's user.
export CONDUCTOR_IMAGE_ROOT="${TMPDIR:-/tmp}/conductor-image-root"
PROFILE=dev deploy/stage.sh "$CONDUCTOR_IMAGE_ROOT"
cargo test --workspace --locked
# Every fuzz target for a short while (longer runs: scripts/fuzz.sh 300); a crash fails the run.
scripts/fuzz.sh "${FUZZ_SECONDS:-10}"
