#!/usr/bin/env bash
# The cargo tools the test command and the image build use, each at a pinned version, installed
# once into ${XDG_CACHE_HOME:-$HOME/.cache}/conductor/tools/bin (built in tools-target beside it)
# and reused from there. Prints the PATH line to evaluate:
#
#   eval "$(scripts/tools.sh)"                     # every tool
#   eval "$(scripts/tools.sh cargo-cyclonedx)"     # only those named
#
# To move a tool to a newer version, change its pin here; the next run installs it.
set -euo pipefail

declare -A pins=(
    [cargo-deny]=0.20.2      # licenses, bans and sources (deny.toml)
    [cargo-cyclonedx]=0.5.9  # the image's SBOM (deploy/stage.sh)
    [cargo-fuzz]=0.13.2      # scripts/fuzz.sh
    [mdbook]=0.5.4           # the docs book (scripts/check-docs.sh)
    [inferno]=0.12.8         # flame graphs of the CPU benches' profiles (scripts/profile.sh)
)

cache="${XDG_CACHE_HOME:-$HOME/.cache}/conductor"
tools="$cache/tools"
wanted=("$@")
[ ${#wanted[@]} -gt 0 ] || wanted=("${!pins[@]}")

for tool in "${wanted[@]}"; do
    version="${pins[$tool]:-}"
    [ -n "$version" ] || { echo "scripts/tools.sh: no pin for $tool (known: ${!pins[*]})" >&2; exit 1; }
    # `cargo install --list` names what was installed into this root, with its version.
    if ! cargo install --list --root "$tools" 2>/dev/null | grep -qx "$tool v$version:"; then
        echo "installing $tool $version into $tools" >&2
        CARGO_TARGET_DIR="$cache/tools-target" \
            cargo install "$tool" --version "$version" --locked --root "$tools" >&2
    fi
done
echo "export PATH=\"$tools/bin:\$PATH\""
