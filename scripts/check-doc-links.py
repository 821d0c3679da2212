#!/usr/bin/env python3
"""Checks the relative links of the repository's Markdown: the book's pages (docs/) and every other
Markdown file (README.md, BENCHMARKS.md, CHANGELOG.md, SECURITY.md, plugin-sdk/, examples/,
deploy/, …; not third_party/ nor node_modules/).

Every relative link must name a file or folder that exists, and every `#anchor` a heading (or an
`id`/`name` attribute) of the Markdown file it points at. Anchors are made from a heading's text as
mdBook and GitHub make them: lowercase, punctuation dropped but `-` and `_`, each space a `-`; a
heading met again gets `-1`, `-2`, …. Links with a scheme (http:, https:, mailto:, …) are not
checked. A page of the book (docs/) links only within the book: the rendered book has nothing
else (a repository file is named in code, or its text included).

mdBook's `{{#include FILE}}` (and `FILE:ANCHOR`, `FILE:START:END`, `{{#rustdoc_include …}}`) is
expanded first, as mdBook expands it: the included file must exist (and its anchor), and the links
of the included text are checked from the page that includes it, where the book renders them.

    python3 scripts/check-doc-links.py [FILE.md …]     # default: every Markdown file of the repository

Prints `FILE:LINE: LINK: what is wrong` for each broken link and exits 1 if there is one.
"""

import os
import re
import subprocess
import sys
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BOOK = ROOT / "docs"  # the book's source folder (docs/book.toml's `src`)
SKIPPED_DIRS = {".git", "target", "third_party", "node_modules", ".venv", "book"}

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
INCLUDE = re.compile(r"\{\{#(include|rustdoc_include)\s+([^}\s]+)\s*\}\}")
# [text](destination "title") and ![alt](destination): the text may hold one level of brackets.
INLINE_LINK = re.compile(
    r"!?\[(?:[^\[\]\\]|\\.|\[(?:[^\[\]\\]|\\.)*\])*\]"
    r"\(\s*(<[^>]*>|(?:[^()\s\\]|\\.|\([^()\s]*\))*)(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)"
)
REFERENCE_DEFINITION = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
HTML_LINK = re.compile(r"<(?:a|img)\b[^>]*?\s(?:href|src)\s*=\s*\"([^\"]*)\"", re.IGNORECASE)
HTML_ID = re.compile(r"<[a-z][^>]*?\s(?:id|name)\s*=\s*\"([^\"]*)\"", re.IGNORECASE)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
ANCHOR_LINE = re.compile(r"ANCHOR(?:_END)?:\s*([\w-]+)")


def markdown_files():
    """Every Markdown file of the repository git knows of or would add (ignored ones left out)."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z", "--", "*.md"],
            cwd=ROOT,
            check=True,
            capture_output=True,
        ).stdout.decode()
        files = [ROOT / f for f in out.split("\0") if f]
    except (OSError, subprocess.CalledProcessError):
        files = [Path(d) / f for d, _, fs in os.walk(ROOT) for f in fs if f.endswith(".md")]
    return sorted(
        f
        for f in files
        if f.is_file() and not SKIPPED_DIRS.intersection(f.relative_to(ROOT).parts[:-1])
    )


def shown(path):
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


class Line:
    """A line of a page once its includes are expanded, and where it was written."""

    def __init__(self, text, file, number, via=None):
        self.text = text
        self.file = file
        self.number = number
        self.via = via  # the include directive's (file, line) when the line was included

    def where(self):
        where = f"{shown(self.file)}:{self.number}"
        if self.via:
            where = f"{shown(self.via[0])}:{self.via[1]} (included from {where})"
        return where


def select(lines, selector, path):
    """The lines an include's `:ANCHOR`, `:START:END`, `:START:` or `:LINE` selects; `None` with
    a reason when the selection does not exist."""
    if not selector:
        return lines, None
    parts = selector.split(":")
    if all(p == "" or p.isdigit() for p in parts) and len(parts) <= 2:
        start = int(parts[0]) if parts[0] else 1
        if len(parts) == 1:
            end = start
        else:
            end = int(parts[1]) if parts[1] else len(lines)
        if start < 1 or start > len(lines):
            return None, f"{shown(path)} has no line {start}"
        return lines[start - 1 : end], None
    name = selector
    inside, found, selected = False, False, []
    for line in lines:
        match = ANCHOR_LINE.search(line.text)
        if match and match.group(1) == name:
            if "ANCHOR_END" in line.text:
                inside = False
            else:
                inside, found = True, True
            continue
        if match:  # another anchor's markers are left out, as mdBook does
            continue
        if inside:
            selected.append(line)
    if not found:
        return None, f"{shown(path)} has no ANCHOR: {name}"
    return selected, None


def expand(path, errors, via=None, depth=0):
    """The lines of `path` with every `{{#include}}` replaced by what it includes."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        errors.append(f"{shown(path)}: cannot read: {e}")
        return []
    out = []
    for number, raw in enumerate(text.split("\n"), start=1):
        line = Line(raw, path, number, via)
        match = INCLUDE.search(raw)
        if not match or depth > 10:
            out.append(line)
            continue
        target, _, selector = match.group(2).partition(":")
        included = (path.parent / target).resolve()
        if not included.is_file():
            errors.append(f"{line.where()}: {match.group(0)}: no file {shown(included)}")
            out.append(line)
            continue
        lines, why = select(expand(included, errors, via or (path, number), depth + 1), selector, included)
        if lines is None:
            errors.append(f"{line.where()}: {match.group(0)}: {why}")
            out.append(line)
            continue
        before, after = raw[: match.start()], raw[match.end() :]
        if before.strip() or after.strip():
            # An include inside a line: keep the line's own text around what it includes.
            out.append(Line(before, path, number, via))
            out.extend(lines)
            out.append(Line(after, path, number, via))
        else:
            out.extend(lines)
    return out


def without_code_spans(text):
    """The text with each inline code span blanked out (same length), so that nothing in code is
    taken for a link."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "`":
            run = len(text[i:]) - len(text[i:].lstrip("`"))
            end = text.find("`" * run, i + run)
            while end != -1 and end + run < len(text) and text[end + run] == "`":
                end = text.find("`" * run, end + run + 1)
            if end == -1:
                out.append(text[i : i + run])
                i += run
                continue
            out.append(" " * (end + run - i))
            i = end + run
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def prose(lines):
    """(line, text) of every line outside fenced code blocks."""
    fence = None
    for line in lines:
        match = FENCE.match(line.text)
        if fence:
            if match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence):
                if not line.text.strip().strip(fence[0]):
                    fence = None
            continue
        if match:
            fence = match.group(1)
            continue
        yield line, line.text


def heading_text(text):
    """A heading's text as it renders: links become their text, code its content, emphasis and
    HTML tags go."""
    text = re.sub(r"!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\([^)]*\)", r"\1", text)
    out = []
    # Code spans keep their content as it is (`<name>` in code is text, not a tag).
    for i, part in enumerate(re.split(r"(`+)(.+?)\1", text)):
        if i % 3 == 1:
            continue
        if i % 3 == 2:
            out.append(part)
            continue
        part = re.sub(r"<[^>]+>", "", part)
        part = re.sub(r"(\*+)(\S.*?\S|\S)\1", r"\2", part)
        part = re.sub(r"(?<!\w)(_+)(\S.*?\S|\S)\1(?!\w)", r"\2", part)
        out.append(part)
    return "".join(out).strip()


def slug(text):
    out = []
    for ch in heading_text(text).lower():
        if ch.isalnum() or ch in "-_":
            out.append(ch)
        elif ch.isspace():
            out.append("-")
    return "".join(out)


def anchors(lines):
    """Every anchor a page has: its headings' (duplicates numbered) and its HTML ids."""
    found, seen = set(), {}
    previous = None
    for line, text in prose(lines):
        heading = None
        match = ATX.match(text)
        if match:
            heading = match.group(2) or ""
        elif previous is not None and previous.strip() and SETEXT.match(text):
            if not re.match(r"^ {0,3}([-*_] *){3,}$", text) or text.strip().startswith("="):
                heading = previous.strip()
        if heading is not None:
            base = slug(heading)
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
        found.update(HTML_ID.findall(text))
        previous = text if not match else None
    return found


def links(lines):
    """(line, destination) of every link and image of a page."""
    for line, text in prose(lines):
        plain = without_code_spans(text)
        for match in INLINE_LINK.finditer(plain):
            yield line, match.group(1)
        match = REFERENCE_DEFINITION.match(plain)
        if match:
            yield line, match.group(1)
        for match in HTML_LINK.finditer(plain):
            yield line, match.group(1)


class Checker:
    def __init__(self):
        self.errors = []
        self.anchors_of = {}

    def anchors(self, path):
        if path not in self.anchors_of:
            self.anchors_of[path] = anchors(expand(path, []))
        return self.anchors_of[path]

    def check(self, page):
        lines = expand(page, self.errors)
        self.anchors_of[page] = anchors(lines)
        for line, destination in links(lines):
            destination = destination.strip()
            if destination.startswith("<") and destination.endswith(">"):
                destination = destination[1:-1]
            if not destination or SCHEME.match(destination) or destination.startswith("//"):
                continue
            target, _, fragment = destination.partition("#")
            target = urllib.parse.unquote(target.split("?")[0])
            fragment = urllib.parse.unquote(fragment)
            if target:
                base = ROOT if target.startswith("/") else page.parent
                path = (base / target.lstrip("/")).resolve()
            else:
                path = page.resolve()
            problem = None
            if not path.exists():
                problem = f"no such file {shown(path)}"
            elif page.resolve().is_relative_to(BOOK) and not path.is_relative_to(BOOK):
                problem = f"{shown(path)} is outside the book (docs/), which the rendered book does not have"
            elif fragment and path.is_file() and path.suffix == ".md":
                if fragment not in self.anchors(path):
                    problem = f"{shown(path)} has no heading #{fragment}"
            if problem:
                self.errors.append(f"{line.where()}: {destination}: {problem}")


def main(argv):
    pages = [Path(a).resolve() for a in argv] if argv else markdown_files()
    checker = Checker()
    for page in pages:
        checker.check(page)
    for error in checker.errors:
        print(error)
    if checker.errors:
        print(f"check-doc-links: {len(checker.errors)} broken link(s) in {len(pages)} files", file=sys.stderr)
        return 1
    print(f"check-doc-links: {len(pages)} files, every relative link and anchor found")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
