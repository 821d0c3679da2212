#!/usr/bin/env bash
# The image's build steps: deploy/Containerfile runs this in its build stage, and the test
# command runs it into a staging folder to start conductor from there. Builds conductor and the
# default plugins (as WebAssembly components) and lays out the image's files under ROOT:
#
#   ROOT/usr/local/bin/conductor
#   ROOT/server -> usr/local/bin/conductor   (where OCM's operator starts its gRPC server:
#                                             `/server grpc --server-config=…`, docs/replace-ocm-grpc-server.md)
#   ROOT/usr/lib/conductor/plugins/{kube,maestro,consumer-controller}.wasm   (plugin_folder)
#   ROOT/etc/conductor/conductor.toml   (the kube-only hub configuration, deploy/overlays/kube;
#                                        the Deployment mounts its ConfigMap over this folder)
#
# PROFILE=release (the default; the image) or dev (tests reuse the test build).
set -euo pipefail
root="${1:?usage: deploy/stage.sh ROOT}"
cd "$(dirname "${BASH_SOURCE[0]}")/.."

profile="${PROFILE:-release}"
target_dir="${CARGO_TARGET_DIR:-target}"
cargo build --locked --profile "$profile" -p conductor
scripts/build-plugins.sh
case "$profile" in
    dev) out="$target_dir/debug" ;;
    *) out="$target_dir/$profile" ;;
esac

mkdir -p "$root"
rm -rf "$root/usr/local/bin/conductor" "$root/server" "$root/usr/lib/conductor" "$root/etc/conductor"
install -D -m 0755 "$out/conductor" "$root/usr/local/bin/conductor"
ln -s usr/local/bin/conductor "$root/server"
# The release build keeps line tables for the benchmarks' profiles; the image does without them
# (symbols stay, so a backtrace still names functions): about a quarter of the size.
if [ "$profile" != dev ] && command -v strip >/dev/null 2>&1; then
    strip --strip-debug "$root/usr/local/bin/conductor"
fi
install -d -m 0755 "$root/usr/lib/conductor/plugins"
for plugin in kube maestro consumer-controller; do
    install -m 0644 "plugins/dist/$plugin.wasm" "$root/usr/lib/conductor/plugins/$plugin.wasm"
done
install -D -m 0644 deploy/overlays/kube/conductor.toml "$root/etc/conductor/conductor.toml"
echo "staged conductor ($profile) and its default plugins in $root" >&2
