#!/usr/bin/env bash
# The patched crates (third_party/<crate>, used through [patch.crates-io]) are each exactly the
# published crate with third_party/patches/<crate>-<version>.diff applied: the published crate is
# fetched through cargo as `cargo vendor` does (from the registry this machine is configured
# with), patched and compared byte for byte; any difference fails, naming the files. A newer patch
# release of a patched crate is named in one line, a warning: rebase the patch when it matters.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
for diff_file in third_party/patches/*.diff; do
    name=$(basename "$diff_file" .diff)
    crate=${name%-*}
    version=${name##*-}
    project="$work/$name"
    mkdir -p "$project/src"
    : > "$project/src/lib.rs"
    cat > "$project/Cargo.toml" <<TOML
[package]
name = "third-party-check"
version = "0.0.0"
edition = "2021"
publish = false
[workspace]
[dependencies]
$crate = { version = "=$version", default-features = false }
TOML
    (cd "$project" && cargo vendor --quiet --versioned-dirs vendor >/dev/null)
    published="$project/vendor/$crate-$version"
    rm -f "$published/.cargo-checksum.json"
    (cd "$published" && patch --quiet --no-backup-if-mismatch -p1) < "$diff_file"
    if ! diff -r "$published" "third_party/$crate" > "$work/$name.out"; then
        echo "third_party/$crate is not $crate $version with $diff_file applied; differences:" >&2
        grep -E '^(Only in|Files |diff )' "$work/$name.out" | sed "s|$published|<published+patch>|g; s/^/  /" >&2
        failed=1
    fi
    sed -i "s/= \"=$version\"/= \"~$version\"/" "$project/Cargo.toml"
    (cd "$project" && cargo generate-lockfile --quiet)
    newest=$(grep -A1 "^name = \"$crate\"$" "$project/Cargo.lock" | sed -n 's/^version = "\(.*\)"$/\1/p' | head -1)
    if [ -n "$newest" ] && [ "$newest" != "$version" ]; then
        echo "third_party: $crate $newest is published; third_party/$crate is $version: rebase its patch (third_party/README.md)"
    fi
done
if [ "$failed" = 0 ]; then
    echo "third_party: every patched crate is its published version with its diff applied"
fi
exit "$failed"
