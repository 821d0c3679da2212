#!/usr/bin/env python3
"""Finds import cycles between the modules of a Rust crate.

Usage: scripts/module-cycles.py CRATE_SRC [CRATE_SRC ...]   (e.g. host/src plugin-sdk/src)

Every `.rs` file is a module (`foo.rs` and `foo/mod.rs` are `foo`). A module depends on another
when its code (outside `#[cfg(test)]` items) names a path into it: `crate::a::b`, `super::b`,
`use` trees with braces included. At every level of the module tree, the children of one parent
must form an acyclic graph, where a child stands for itself and everything below it: `app` may
use `telemetry`, but then nothing in `telemetry` may use `app`. A parent may use its children and
children may use their parent's own items (that is not a cycle between siblings).

With `--no-parent-imports DIR` (a folder of one of the crates, repeatable), the modules inside
DIR also may not use an item their parent (or any ancestor inside DIR) defines: they depend on
their siblings and on the rest of the crate, never upward (`host/src/plugins`: `docs/architecture.md`).

Exits 1 and prints each cycle or upward import when there is one; prints nothing and exits 0
otherwise; exits 2 with the usage when no crate is given.
"""

import re
import sys
from pathlib import Path


def module_path(src: Path, file: Path) -> tuple:
    rel = file.relative_to(src).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return tuple(parts)


def strip_comments_and_tests(text: str) -> str:
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    # Drop `#[cfg(test)]` items: the attribute, then the item up to its matching brace.
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\((?:all\()?test\b[^\]]*\]", text):
        if m.start() < i:
            continue
        out.append(text[i : m.start()])
        j = text.find("{", m.end())
        semi = text.find(";", m.end())
        if j < 0 or (0 <= semi < j):
            i = semi + 1 if semi >= 0 else len(text)
            continue
        i = past_matching_brace(text, j)
    out.append(text[i:])
    return "".join(out)


def past_matching_brace(text: str, open_at: int) -> int:
    """The index just past the `}` that closes the `{` at `open_at` (the end of `text` if none)."""
    depth = 0
    for k in range(open_at, len(text)):
        if text[k] == "{":
            depth += 1
        elif text[k] == "}":
            depth -= 1
            if depth == 0:
                return k + 1
    return len(text)


def expand_use_tree(tree: str) -> list:
    """`a::{b, c::{d, e}}` -> ['a::b', 'a::c::d', 'a::c::e']."""
    tree = tree.strip()
    brace = tree.find("{")
    if brace < 0:
        return [tree]
    prefix = tree[:brace]
    inner = tree[brace + 1 : tree.rfind("}")]
    parts, depth, start = [], 0, 0
    for k, ch in enumerate(inner):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(inner[start:k])
            start = k + 1
    parts.append(inner[start:])
    result = []
    for p in parts:
        p = p.strip()
        if p:
            result.extend(prefix + q for q in expand_use_tree(p))
    return result


def paths_in(text: str) -> list:
    paths = []
    for m in re.finditer(r"\buse\s+([^;]+);", text):
        paths.extend(expand_use_tree(re.sub(r"\s+", "", m.group(1))))
    paths.extend(re.findall(r"\b((?:crate|super)(?:::\w+)+)", text))
    return paths


def reexports_in(text: str) -> list:
    """The paths a module re-exports (`pub use a::b::C;`), as (name, path)."""
    found = []
    for m in re.finditer(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]+);", text):
        for p in expand_use_tree(re.sub(r"\s+", "", m.group(1))):
            name = p.split("::")[-1]
            if " as " in p or "as" in p.split("::")[-1:]:
                continue
            found.append((name, p))
    return found


def resolve(path: str, here: tuple, modules: set, reexports: dict):
    segs = [s for s in path.split("::") if s]
    if not segs:
        return None
    if segs[0] == "crate":
        base, rest = (), segs[1:]
    elif segs[0] in ("super", "self"):
        # In `foo.rs` or `foo/mod.rs`, `self` is foo and `super` its parent.
        base = here
        rest = segs
        while rest and rest[0] in ("super", "self"):
            if rest[0] == "super":
                base = base[:-1]
            rest = rest[1:]
    elif here + (segs[0],) in modules:
        # `use child::Item;` names a child module of this one.
        base, rest = here, segs
    else:
        return None
    target = base
    for s in rest:
        if target + (s,) in modules:
            target = target + (s,)
        else:
            # An item the module re-exports from elsewhere: the dependency is on where it lives.
            origin = reexports.get((target, s))
            if origin is not None and origin != target:
                target = origin
            break
    return target


def find_cycles(src: Path) -> list:
    files = sorted(src.rglob("*.rs"))
    modules = {module_path(src, f) for f in files}
    texts = {module_path(src, f): strip_comments_and_tests(f.read_text()) for f in files}
    reexports = {}
    for here, text in texts.items():
        for name, p in reexports_in(text):
            origin = resolve(p, here, modules, {})
            if origin is not None:
                reexports[(here, name)] = origin
    edges = {}
    for here, text in texts.items():
        for p in paths_in(text):
            target = resolve(p, here, modules, reexports)
            if target is not None and target != here:
                edges.setdefault(here, set()).add(target)
    problems = []
    parents = {m[:-1] for m in modules if m} | {()}
    for parent in sorted(parents):
        children = sorted(m for m in modules if len(m) == len(parent) + 1 and m[: len(parent)] == parent)
        graph = {c: set() for c in children}
        for a, targets in edges.items():
            if len(a) <= len(parent) or a[: len(parent)] != parent:
                continue
            ca = a[: len(parent) + 1]
            for b in targets:
                if len(b) <= len(parent) or b[: len(parent)] != parent:
                    continue
                cb = b[: len(parent) + 1]
                if ca != cb:
                    graph[ca].add(cb)
        for cycle in strongly_connected(graph):
            if len(cycle) > 1:
                names = ", ".join("::".join(c) for c in sorted(cycle))
                problems.append(f"{src}: cycle among {names}")
    return problems


def strongly_connected(graph: dict) -> list:
    index, low, stack, on_stack, result = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            result.append(comp)

    for v in graph:
        if v not in index:
            visit(v)
    return result


def strip_inline_modules(text: str) -> str:
    """Drops the bodies of inline modules (`mod name { … }`), whose `super` is the file itself."""
    out, i = [], 0
    for m in re.finditer(r"\bmod\s+\w+\s*\{", text):
        if m.start() < i:
            continue
        out.append(text[i : m.start()])
        i = past_matching_brace(text, m.end() - 1)
    out.append(text[i:])
    return "".join(out)


def find_parent_imports(src: Path, folder: Path) -> list:
    """Paths by which a module inside `folder` uses an item one of its ancestors inside it defines."""
    files = sorted(src.rglob("*.rs"))
    modules = {module_path(src, f) for f in files}
    top = module_path(src, folder / "mod.rs") if (folder / "mod.rs").exists() else module_path(src, folder)
    problems = []
    for f in sorted(folder.rglob("*.rs")):
        here = module_path(src, f)
        text = strip_inline_modules(strip_comments_and_tests(f.read_text()))
        reported = set()
        for p in sorted(set(paths_in(text))):
            target = resolve(p, here, modules, {})
            upward = target is not None and len(target) < len(here) and here[: len(target)] == target
            if upward and target[: len(top)] == top and target not in reported:
                reported.add(target)
                problems.append(f"{f}: `{p}` uses an item of its ancestor module {'::'.join(target)}")
    return problems


def main() -> int:
    problems, args = [], sys.argv[1:]
    crates, upward = [], []
    while args:
        arg = args.pop(0)
        if arg == "--no-parent-imports":
            upward.append(Path(args.pop(0)))
        else:
            crates.append(Path(arg))
    if not crates:
        # Without a crate nothing would be read, and the silence would pass for no cycle.
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    for src in crates:
        problems.extend(find_cycles(src))
    for folder in upward:
        src = next((c for c in crates if folder.is_relative_to(c)), None)
        if src is None:
            problems.append(f"--no-parent-imports {folder}: not inside a crate folder given")
            continue
        problems.extend(find_parent_imports(src, folder))
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
