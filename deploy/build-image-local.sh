#!/usr/bin/env bash
# Builds the image with podman where no image registry is reachable: both bases are made from
# Debian 12 with mmdebstrap (the machine's Debian mirror), and the build stage uses this
# machine's Rust toolchain and crate cache, mounted read-only / shared, so nothing is fetched
# but Debian packages. Usage: deploy/build-image-local.sh [TAG]   (default conductor:dev)
#
# The build stage's target folder is CARGO_TARGET_DIR (default ~/.cache/conductor/target), so
# a second build only compiles what changed. In a sandbox without CAP_SYS_RESOURCE or with
# hybrid cgroups, podman needs runc, cgroupfs and ulimits within the hard limits — set in
# /etc/containers/containers.conf (docs/how-to/deploy.md, "Before you install").
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
tag="${1:-conductor:dev}"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/conductor"
target_dir="${CARGO_TARGET_DIR:-$cache/target}"
bases="$cache/image-bases"
mkdir -p "$bases" "$target_dir" "$cache/tools" "$cache/tools-target"

base() {  # base NAME PACKAGES [IMPORT-CHANGES...]
    local name="$1" packages="$2"
    shift 2
    if ! podman image exists "localhost/$name:bookworm"; then
        mmdebstrap --variant=essential --include="$packages" bookworm "$bases/$name.tar"
        podman import "$@" "$bases/$name.tar" "localhost/$name:bookworm"
    fi
}
base conductor-runtime ca-certificates
base conductor-builder ca-certificates,gcc,libc6-dev,make,binutils \
    --change "ENV PATH=$HOME/.cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    --change "ENV HOME=$HOME"

podman build --network host \
    --volume "$HOME/.rustup:$HOME/.rustup:ro" \
    --volume "$HOME/.cargo:$HOME/.cargo" \
    --volume "$target_dir:/src/target" \
    --volume "$cache/tools:$cache/tools" --volume "$cache/tools-target:$cache/tools-target" \
    --build-arg BUILDER=localhost/conductor-builder:bookworm \
    --build-arg RUNTIME=localhost/conductor-runtime:bookworm \
    --build-arg VERSION="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)" \
    --build-arg REVISION="$(git rev-parse HEAD 2>/dev/null || echo unknown)" \
    -f deploy/Containerfile -t "$tag" .
