#!/usr/bin/env python3
"""Structural check of conductor's Grafana dashboard, and the metric names it and the rules use.

    check_dashboard.py grafana-dashboard.json [rules.yml] [--metric-names] [--base]

Checks that the dashboard is valid JSON with the template variables `datasource` (a datasource
variable for Prometheus) and `cluster`, a row for each of ROWS, and panels that each have the
datasource `${datasource}`, a gridPos, a unique id and at least one target, every target with a
non-empty `expr`. With a rules file (plain Prometheus format, or a PrometheusRule), it also checks
that every recording rule an expression uses is defined there. Exits 1, listing the problems, if
anything is wrong.

--metric-names prints instead, one per line and sorted, the metric names the dashboard's and the
rules' expressions read that conductor itself must export: names as they appear as samples in
/metrics (`foo_bucket` for a histogram's buckets), without
  - recorded series (names with a colon, or defined by a `record:` of the rules file),
  - series Prometheus makes itself (`up`, `scrape_*`, `ALERTS`, `ALERTS_FOR_STATE`).
--base folds the suffixes `_bucket`, `_sum` and `_count` into the family name (as `# TYPE` lines
name a histogram). A black-box test compares the list with what /metrics exports.

How names are found (no full PromQL parser; enough for the expressions written here): string
literals, label matchers `{...}`, ranges and subqueries `[...]`, Grafana variables (`$x`,
`${x}`) and the label lists of `by`/`without`/`on`/`ignoring`/`group_left`/`group_right` are
removed; of the identifiers left, those followed by `(` are functions or aggregations, keywords
(`and`, `or`, `unless`, `bool`, `offset`, `inf`, `nan`, ...) are skipped, and the rest are metric
names.
"""

import json
import re
import sys

ROWS = ["Agents", "Requests", "Plugins", "Security", "Sources", "Process"]
VARIABLES = ["datasource", "cluster"]
DATASOURCE = "${datasource}"

KEYWORDS = {
    "and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring",
    "group_left", "group_right", "inf", "nan", "start", "end", "atan2",
}
PROMETHEUS_OWN = {"up", "ALERTS", "ALERTS_FOR_STATE"}
PROMETHEUS_OWN_PREFIXES = ("scrape_",)
IDENT = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")


def strip_expr(expr):
    """The expression without what cannot hold a metric name."""
    s = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    s = re.sub(r"'(?:[^'\\]|\\.)*'", "''", s)
    s = re.sub(r"`[^`]*`", "``", s)
    s = re.sub(r"\{[^{}]*\}", "{}", s)
    s = re.sub(r"\[[^\[\]]*\]", "[]", s)
    s = re.sub(r"\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*", " ", s)
    s = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)", " ", s)
    return s


def metric_names(expr):
    s = strip_expr(expr)
    names = set()
    for m in IDENT.finditer(s):
        name = m.group(0)
        if m.start() > 0 and (s[m.start() - 1].isdigit() or s[m.start() - 1] == "."):
            continue  # part of a number or a duration (5m, 1e3)
        if name.lower() in KEYWORDS:
            continue
        if re.match(r"\s*\(", s[m.end():]):
            continue  # a function or an aggregation
        names.add(name)
    return names


def all_panels(dashboard):
    for panel in dashboard.get("panels", []):
        yield panel
        for inner in panel.get("panels", []) or []:
            yield inner


def datasource_uid(ds):
    if isinstance(ds, dict):
        return ds.get("uid")
    return ds


def check_dashboard(dashboard, problems):
    exprs = []
    variables = {v.get("name"): v for v in dashboard.get("templating", {}).get("list", [])}
    for name in VARIABLES:
        if name not in variables:
            problems.append(f"no template variable {name!r}")
    ds = variables.get("datasource")
    if ds is not None and (ds.get("type") != "datasource" or ds.get("query") != "prometheus"):
        problems.append("variable 'datasource' is not a datasource variable for prometheus")
    for name, v in variables.items():
        if v.get("type") == "query" and datasource_uid(v.get("datasource")) != DATASOURCE:
            problems.append(f"variable {name!r} does not query {DATASOURCE}")
        if v.get("type") == "query":
            q = v.get("query")
            q = q.get("query", "") if isinstance(q, dict) else q or ""
            # label_values(<series selector>, <label>): only the selector names a metric.
            m = re.fullmatch(r"\s*label_values\((.*),\s*[A-Za-z_][A-Za-z0-9_]*\s*\)\s*", q, re.S)
            if m:
                q = m.group(1)
            elif re.fullmatch(r"\s*label_values\(\s*[A-Za-z_][A-Za-z0-9_]*\s*\)\s*", q):
                q = ""
            if q:
                exprs.append(("variable " + name, q))
    rows = [p.get("title") for p in all_panels(dashboard) if p.get("type") == "row"]
    for title in ROWS:
        if title not in rows:
            problems.append(f"no row titled {title!r}")
    ids = {}
    for panel in all_panels(dashboard):
        what = f"panel {panel.get('id')} {panel.get('title')!r}"
        if "id" not in panel:
            problems.append(f"{what}: no id")
        elif panel["id"] in ids:
            problems.append(f"{what}: id also used by {ids[panel['id']]!r}")
        else:
            ids[panel["id"]] = panel.get("title")
        pos = panel.get("gridPos")
        if not isinstance(pos, dict) or not all(isinstance(pos.get(k), int) for k in ("h", "w", "x", "y")):
            problems.append(f"{what}: no complete gridPos")
        elif pos["x"] + pos["w"] > 24:
            problems.append(f"{what}: wider than the grid")
        if panel.get("type") == "row":
            continue
        if datasource_uid(panel.get("datasource")) != DATASOURCE:
            problems.append(f"{what}: datasource is not {DATASOURCE}")
        targets = panel.get("targets") or []
        if not targets:
            problems.append(f"{what}: no targets")
        for t in targets:
            if not (t.get("expr") or "").strip():
                problems.append(f"{what}: target {t.get('refId')} has no expr")
                continue
            tds = t.get("datasource")
            if tds is not None and datasource_uid(tds) != DATASOURCE:
                problems.append(f"{what}: target {t.get('refId')} datasource is not {DATASOURCE}")
            exprs.append((what, t["expr"]))
    return exprs


def rule_groups(path):
    """The rule groups of a plain rules file or a PrometheusRule."""
    text = open(path).read()
    try:
        import yaml
    except ImportError:
        return fallback_groups(text)
    doc = yaml.safe_load(text)
    if isinstance(doc, dict) and doc.get("kind") == "PrometheusRule":
        doc = doc.get("spec", {})
    return doc.get("groups", [])


def fallback_groups(text):
    """Without PyYAML: the `record:`, `alert:` and `expr:` entries (plain, quoted or block)."""
    rules, current = [], None
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)-?\s*(record|alert|expr):\s*(.*)$", lines[i])
        if not m:
            i += 1
            continue
        indent, key, value = len(m.group(1)), m.group(2), m.group(3).strip()
        if value in ("|", "|-", ">", ">-", "|+", ">+"):
            block = []
            i += 1
            while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > indent):
                block.append(lines[i].strip())
                i += 1
            value = " ".join(b for b in block if b)
        else:
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            i += 1
        if key in ("record", "alert"):
            current = {key: value}
            rules.append(current)
        elif current is not None:
            current["expr"] = value
    return [{"name": "rules", "rules": rules}]


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    flags = {a for a in argv if a.startswith("--")}
    unknown = flags - {"--metric-names", "--base", "--help"}
    if "--help" in flags or not 1 <= len(args) <= 2 or unknown:
        print(__doc__, file=sys.stderr)
        return 2
    problems = []
    try:
        dashboard = json.load(open(args[0]))
    except (OSError, ValueError) as e:
        print(f"{args[0]}: not valid JSON: {e}", file=sys.stderr)
        return 1
    exprs = check_dashboard(dashboard, problems)
    recorded = set()
    if len(args) == 2:
        for group in rule_groups(args[1]):
            for rule in group.get("rules", []):
                if "record" in rule:
                    recorded.add(rule["record"])
                what = f"rule {rule.get('record') or rule.get('alert')}"
                if not str(rule.get("expr", "")).strip():
                    problems.append(f"{what}: no expr")
                exprs.append((what, str(rule.get("expr", ""))))
    names = set()
    for what, expr in exprs:
        for name in metric_names(expr):
            if ":" in name or name in recorded:
                if len(args) == 2 and name not in recorded:
                    problems.append(f"{what}: uses the recorded series {name}, which no rule records")
                continue
            if name in PROMETHEUS_OWN or name.startswith(PROMETHEUS_OWN_PREFIXES):
                continue
            names.add(name)
    if problems:
        for p in problems:
            print(p, file=sys.stderr)
        return 1
    if "--metric-names" in flags:
        if "--base" in flags:
            names = {re.sub(r"_(bucket|sum|count)$", "", n) for n in names}
        for name in sorted(names):
            print(name)
    else:
        panels = sum(1 for p in all_panels(dashboard) if p.get("type") != "row")
        print(f"{args[0]}: ok ({panels} panels, {len(exprs)} expressions, {len(names)} metric names)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
