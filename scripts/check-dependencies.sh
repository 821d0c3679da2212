#!/usr/bin/env bash
# What conductor's dependencies may be (deny.toml), checked with cargo-deny: licenses from the
# allow-list, crates only from the registry or from paths in this repository, no second TLS
# stack; crates present in two versions are listed (a warning). RustSec advisories are checked
# too when CONDUCTOR_ADVISORY_DBS names a folder holding a copy of the advisory database (they
# need a download this check never makes; `CONDUCTOR_ADVISORY_DBS=DIR cargo deny fetch` makes one
# where the database can be reached).
#
#   scripts/check-dependencies.sh      (cargo-deny from scripts/tools.sh)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
eval "$(scripts/tools.sh cargo-deny)"

checks=(bans licenses sources)
if [ -n "${CONDUCTOR_ADVISORY_DBS:-}" ]; then
    checks+=(advisories)
else
    echo "dependencies: advisories not checked (CONDUCTOR_ADVISORY_DBS names no local advisory database)" >&2
fi

# Every crate of Cargo.lock, for every platform (a build fetches only this machine's): cargo-deny
# and `cargo metadata` below then read them offline.
cargo fetch --locked --quiet

report="$(mktemp)"
trap 'rm -f "$report"' EXIT
status=0
cargo deny --locked --offline --format json check "${checks[@]}" 2>"$report" || status=$?

# Errors in full (what failed and why); warnings as one line a crate.
python3 - "$report" <<'PY'
import json, sys
duplicates, errors = [], []
for line in open(sys.argv[1]):
    try:
        item = json.loads(line)
    except ValueError:
        print(line.rstrip(), file=sys.stderr)  # cargo-deny's own failure (no such config, ...)
        continue
    fields = item.get("fields", {})
    if item.get("type") != "diagnostic":
        continue
    if fields.get("severity") == "error":
        labels = "; ".join(l.get("span", "").replace("\n", ", ") for l in fields.get("labels", []))
        krates = [f"{g['Krate']['name']} {g['Krate']['version']}" for g in fields.get("graphs", [])]
        errors.append(f"  {', '.join(krates) or '-'}: {fields.get('code')}: {fields.get('message')} [{labels}]")
    elif fields.get("code") == "duplicate":
        versions = [g["Krate"]["version"] for g in fields.get("graphs", [])]
        name = fields["graphs"][0]["Krate"]["name"] if fields.get("graphs") else fields["message"]
        duplicates.append(f"{name} ({', '.join(versions)})")
if duplicates:
    print(f"dependencies: {len(duplicates)} crates in more than one version: {'; '.join(duplicates)}",
          file=sys.stderr)
if errors:
    print("dependencies: refused by deny.toml:", file=sys.stderr)
    print("\n".join(errors), file=sys.stderr)
PY

# cargo-deny leaves path dependencies alone: each must be a crate of this repository — a member
# of the workspace or a patched crate of third_party/.
python3 - <<'PY' || status=1
import json, os, subprocess, sys
meta = json.loads(subprocess.check_output(["cargo", "metadata", "--locked", "--offline", "--format-version", "1"]))
root = os.path.realpath(meta["workspace_root"])
members = set(meta["workspace_members"])
outside = [
    f"{p['name']} {p['version']} ({os.path.dirname(p['manifest_path'])})"
    for p in meta["packages"]
    if p["source"] is None and p["id"] not in members
    and not os.path.realpath(p["manifest_path"]).startswith(os.path.join(root, "third_party") + os.sep)
]
if outside:
    print("dependencies: path dependencies outside the workspace and third_party/:", *outside, sep="\n  ", file=sys.stderr)
    sys.exit(1)
PY

if [ "$status" -ne 0 ]; then
    echo "dependencies: cargo deny failed (deny.toml); run \`cargo deny check ${checks[*]}\` for the details" >&2
    exit 1
fi
echo "dependencies: ${checks[*]} ok" >&2
