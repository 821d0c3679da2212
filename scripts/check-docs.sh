#!/usr/bin/env bash
# The docs: the book (docs/, mdBook) builds, and every relative link and `#anchor` of the
# repository's Markdown — the book's pages and README.md, BENCHMARKS.md, CHANGELOG.md, SECURITY.md,
# plugin-sdk/, examples/, deploy/ — points at a file and a heading that exist
# (scripts/check-doc-links.py).
#
#   scripts/check-docs.sh
#
# mdbook is `${MDBOOK:-mdbook}` on PATH (scripts/tools.sh installs the pinned one:
# eval "$(scripts/tools.sh mdbook)"). The book is written to ${CARGO_TARGET_DIR:-target}/book, not
# into the repository.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

mdbook="${MDBOOK:-mdbook}"
if ! command -v "$mdbook" >/dev/null 2>&1; then
    echo "check-docs: $mdbook is not on PATH: scripts/tools.sh installs the pinned mdbook (eval \"\$(scripts/tools.sh mdbook)\"), or set MDBOOK" >&2
    exit 1
fi
out="${CARGO_TARGET_DIR:-target}/book"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
# A warning (an HTML tag left open, an include that does not resolve) fails the check too.
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if ! "$mdbook" build docs --dest-dir "$out" 2>"$log"; then
    cat "$log" >&2
    echo "check-docs: mdbook build docs failed" >&2
    exit 1
fi
if grep -E '(WARN|ERROR)' "$log" >&2; then
    echo "check-docs: mdbook build docs warned (above)" >&2
    exit 1
fi
echo "check-docs: the book is in $out"
python3 scripts/check-doc-links.py
