#!/usr/bin/env python3
"""prometheus-rules.yaml is rules.yml's groups in a PrometheusRule: regenerate it, or check it.

    prometheus_rules.py [--check] [rules.yml] [prometheus-rules.yaml]

Without --check, rewrites prometheus-rules.yaml: its own header (everything up to and including
the line `spec:`), then rules.yml from its line `groups:` on, every non-empty line indented by two
spaces (so spec.groups is rules.yml's groups, comments included). With --check, changes nothing
and exits 1 with a diff when the file is not what it would write (edit rules.yml, then run this
without --check). The paths default to the files beside this script. Needs no YAML library.
"""

import difflib
import os
import sys


def generated(rules_text, resource_text):
    header = []
    for line in resource_text.splitlines(keepends=True):
        header.append(line)
        if line.rstrip("\n") == "spec:":
            break
    else:
        raise ValueError("the PrometheusRule has no line `spec:`")
    lines = rules_text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.startswith("groups:")), None)
    if start is None:
        raise ValueError("the rules file has no line `groups:`")
    body = ["  " + line if line.strip() else line for line in lines[start:]]
    return "".join(header + body)


def main(argv):
    check = "--check" in argv
    args = [a for a in argv if a != "--check"]
    if any(a.startswith("-") for a in args) or len(args) > 2:
        print(__doc__, file=sys.stderr)
        return 2
    here = os.path.dirname(os.path.abspath(__file__))
    rules = args[0] if args else os.path.join(here, "rules.yml")
    resource = args[1] if len(args) > 1 else os.path.join(here, "prometheus-rules.yaml")
    with open(rules) as f:
        rules_text = f.read()
    with open(resource) as f:
        resource_text = f.read()
    try:
        want = generated(rules_text, resource_text)
    except ValueError as e:
        print(f"{resource}: {e}", file=sys.stderr)
        return 1
    if not check:
        if want != resource_text:
            with open(resource, "w") as f:
                f.write(want)
            print(f"{resource}: regenerated from {rules}")
        return 0
    if want != resource_text:
        diff = difflib.unified_diff(
            resource_text.splitlines(keepends=True),
            want.splitlines(keepends=True),
            resource,
            f"{resource} as generated from {rules}",
        )
        sys.stderr.writelines(diff)
        print(
            f"{resource}: spec.groups differs from the groups of {rules}; regenerate it with "
            f"`python3 {os.path.relpath(__file__)}`",
            file=sys.stderr,
        )
        return 1
    print(f"{resource}: spec.groups = the groups of {rules}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
