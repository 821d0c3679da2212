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
#   ROOT/usr/share/doc/conductor/sbom/{conductor,kube,maestro,consumer-controller}.cdx.json
#       (CycloneDX 1.5 SBOMs: the Rust crates each shipped file is built from, by cargo-cyclonedx,
#        for the platform it is built for; build-time and development dependencies left out)
#
# PROFILE=release (the default; the image) or dev (tests reuse the test build).
set -euo pipefail
root="${1:?usage: deploy/stage.sh ROOT}"
cd "$(dirname "${BASH_SOURCE[0]}")/.."

profile="${PROFILE:-release}"

# stage_sboms DIR: one CycloneDX document per shipped file. cargo-cyclonedx writes a document
# beside every workspace package's Cargo.toml (one run per platform); they are written under a
# name of this run's, the shipped ones moved out, and the others removed.
stage_sboms() {
    local dir="$1" name="sbom-staged-$$" host_target
    eval "$(scripts/tools.sh cargo-cyclonedx)"
    # Reproducible: the documents are dated by the commit, when there is one.
    if [ -z "${SOURCE_DATE_EPOCH:-}" ] && git rev-parse HEAD >/dev/null 2>&1; then
        SOURCE_DATE_EPOCH="$(git log -1 --format=%ct)"
        export SOURCE_DATE_EPOCH
    fi
    host_target="$(rustc -vV | sed -n 's/^host: //p')"
    rm -rf "$dir"
    install -d -m 0755 "$dir"
    sboms() {  # sboms TARGET PACKAGE_DIR:FILE...
        local target="$1" package
        shift
        cargo cyclonedx --format json --spec-version 1.5 --no-build-deps --target "$target" \
            --override-filename "$name" -q
        for package in "$@"; do
            install -m 0644 "${package%%:*}/$name.json" "$dir/${package##*:}.cdx.json"
        done
        find . -name "$name.json" -not -path "./target/*" -delete
    }
    sboms "$host_target" host:conductor
    sboms wasm32-wasip2 plugins/kube:kube plugins/maestro:maestro \
        plugins/consumer-controller:consumer-controller
}

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
stage_sboms "$root/usr/share/doc/conductor/sbom"
echo "staged conductor ($profile) and its default plugins in $root" >&2
