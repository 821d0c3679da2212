"""The WIT world a Python or JavaScript plugin is built against, derived from the SDK's contract.

    conductor-plugin-wit --capabilities emit,log,timer,kv OUT_DIR
    python3 -m conductor_plugin_wit --capabilities emit,log,timer,kv OUT_DIR

writes OUT_DIR/plugin.wit: the contract package (`conductor:plugin`, the version this SDK ships,
in this package's `plugin.wit`; `--wit DIR` for another) with one world, `conductor-source` (or
`--world`), that imports the capabilities named and exports `plugin`. The capabilities not named
keep their types but lose their functions and resources.

Why: a component's capabilities are the conductor interfaces it imports functions from, and the
host refuses a plugin that imports one it was not granted. wit-bindgen (Rust) imports only the
functions the code calls, but componentize-py and componentize-js bind every function of every
interface in the world they build against — and `plugin` uses types of `pg` and `kube`
(notifications, watch events), so any world exporting it imports `pg` and `kube` too. Built
against this world, a Python or JavaScript plugin imports exactly the capabilities it names, and
only the types of the others: the shape a Rust component gets on its own.

Generated at build time, never committed: the contract stays the one source. The JavaScript
package ships the same generator (`conductor-plugin-wit` of the npm package, `wit.mjs`), which
writes the same bytes. Standard library only (Python 3.9+); it imports no bindings, so it runs
before any exist.
"""

import argparse
import pathlib
import re
import sys

# The contract this SDK ships: plugin.wit beside this module (in the repository, a link to
# plugin-sdk/wit/plugin.wit).
DEFAULT_WIT = pathlib.Path(__file__).resolve().parent
# The world every capability is imported by (the host's own bindings are generated from it).
FULL_WORLD = "conductor-plugin"


class WitError(Exception):
    pass


def split_items(text):
    """Splits a WIT body into its items: each ends at a `;` or at the `}` that closes its block,
    at nesting depth 0, and carries the comments before it. Returns (items, rest): `rest` is what
    follows the last item (comments, whitespace)."""
    items, depth, start, i, n = [], 0, 0, 0, len(text)
    while i < n:
        if text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise WitError("unterminated block comment")
            i = end + 2
            continue
        c = text[i]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth < 0:
                raise WitError("unbalanced `}`")
            if depth == 0:
                items.append(text[start : i + 1])
                start = i + 1
        elif c == ";" and depth == 0:
            items.append(text[start : i + 1])
            start = i + 1
        i += 1
    if depth != 0:
        raise WitError("unbalanced `{`")
    return items, text[start:]


def code_of(item):
    """An item without its comments and attributes (`@since(…)`, `@unstable(…)`), stripped."""
    code = re.sub(r"//[^\n]*|/\*.*?\*/", "", item, flags=re.S).strip()
    while code.startswith("@"):
        code = re.sub(r"^@[\w-]+(\([^)]*\))?\s*", "", code)
    return code


def code_start(item):
    """Where an item's code starts: past the whitespace and comments before it."""
    i = 0
    while i < len(item):
        if item[i].isspace():
            i += 1
        elif item.startswith("//", i):
            end = item.find("\n", i)
            i = len(item) if end < 0 else end + 1
        elif item.startswith("/*", i):
            i = item.index("*/", i + 2) + 2
        else:
            break
    return i


def block_parts(item):
    """(header, body) of `interface x { body }` / `world x { body }`."""
    open_at = item.index("{", code_start(item))
    return item[:open_at], item[open_at + 1 : item.rindex("}")]


def is_function_or_resource(item):
    code = code_of(item)
    return bool(re.match(r"%?[A-Za-z][\w-]*\s*:\s*(async\s+)?func\b", code) or re.match(r"resource\b", code))


def generate(wit_dir, capabilities, world):
    files = sorted(pathlib.Path(wit_dir).glob("*.wit"))
    if not files:
        raise WitError(f"no .wit files in {wit_dir}")
    package, interfaces, full_world = None, [], None
    for f in files:
        items, rest = split_items(f.read_text())
        if code_of(rest):
            raise WitError(f"{f}: unexpected text at the end: {code_of(rest)[:40]!r}")
        for item in items:
            code = code_of(item)
            if code.startswith("package "):
                if package is not None and package != code:
                    raise WitError(f"{f}: a second package declaration: {code}")
                package = code
            elif code.startswith("interface "):
                name = code.split()[1].rstrip("{")
                interfaces.append((name, item))
            elif code.startswith("world "):
                if code.split()[1].rstrip("{") == FULL_WORLD:
                    full_world = item
            else:
                raise WitError(f"{f}: unsupported top-level item: {code[:60]!r}")
    if package is None:
        raise WitError(f"{wit_dir}: no package declaration")
    if full_world is None:
        raise WitError(f"{wit_dir}: no world {FULL_WORLD!r} (the world importing every capability)")
    body_items, _ = split_items(block_parts(full_world)[1])
    known = [code_of(i).split()[1].rstrip(";") for i in body_items if code_of(i).startswith("import ")]
    unknown = [c for c in capabilities if c not in known]
    if unknown:
        raise WitError(f"unknown capabilities {unknown}: the contract's are {', '.join(known)}")

    out = [
        f"// Generated by conductor-plugin-wit from {', '.join(f.name for f in files)} ({package[len('package '):].rstrip(';')})",
        f"// for the capabilities: {', '.join(capabilities) or 'none'}. Do not edit, do not commit.",
        "",
        package,
        "",
    ]
    for name, item in interfaces:
        if name not in known or name in capabilities:
            out.append(item.strip("\n"))
        else:
            header, body = block_parts(item)
            kept, rest = split_items(body)
            kept = [i for i in kept if not is_function_or_resource(i)]
            out.append(
                header.strip("\n")
                + "{"
                + "".join(kept)
                + rest.rstrip()
                + f"\n    // (functions and resources left out: `{name}` is not a capability of this plugin)\n}}"
            )
        out.append("")
    imports = "".join(f"    import {c};\n" for c in capabilities)
    out.append(f"/// A plugin using {', '.join(capabilities) or 'no capability'}.\nworld {world} {{\n{imports}    export plugin;\n}}\n")
    return "\n".join(out)


def contract_version(wit_dir=DEFAULT_WIT):
    """The version of the contract package in `wit_dir` (`package conductor:plugin@<version>;`)."""
    for f in sorted(pathlib.Path(wit_dir).glob("*.wit")):
        m = re.search(r"^package conductor:plugin@([0-9][0-9A-Za-z.+-]*);", f.read_text(), re.M)
        if m:
            return m.group(1)
    raise WitError(f"{wit_dir}: no `package conductor:plugin@<version>;`")


def main(argv, prog="conductor-plugin-wit"):
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", type=pathlib.Path, help="folder to write plugin.wit into")
    parser.add_argument(
        "--capabilities",
        required=True,
        help="comma-separated capabilities the plugin uses, e.g. emit,log,timer,kv (empty: none)",
    )
    parser.add_argument("--wit", type=pathlib.Path, default=DEFAULT_WIT, help="the contract (default: %(default)s)")
    parser.add_argument("--world", default="conductor-source", help="the world's name (default: %(default)s)")
    args = parser.parse_args(argv)
    capabilities = [c.strip() for c in args.capabilities.split(",") if c.strip()]
    try:
        text = generate(args.wit, capabilities, args.world)
    except (WitError, OSError) as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 1
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "plugin.wit").write_text(text)
    return 0


def console():
    """The `conductor-plugin-wit` command."""
    sys.exit(main(sys.argv[1:]))
