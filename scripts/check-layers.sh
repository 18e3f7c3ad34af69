#!/usr/bin/env bash
# Import cycles among the top-level modules of src/ (src/X.rs or src/X/;
# lib.rs and main.rs are the crate root, not modules), found cheaply from
# the source text, without compiling.
#
#   scripts/check-layers.sh
#
# Prints on stdout the module map (one line a module: `module -> what it
# imports`, sorted; `*` marks an import made only from #[cfg(test)] code)
# and the layering order, lowest layer first, that tsort finds. Exits 1,
# saying why on stderr with the file and line of every reference involved,
# when the modules import each other in a cycle, or when a module reaches
# into the crate root itself (`crate::random_hex`, `super::Service` from
# src/x.rs: shared items belong in a leaf module, not in lib.rs).
# tsort names the loops it had to break; where several modules are tangled
# that need not be every loop, so after fixing one, run it again.
#
# What counts as a reference from a file of module M to module N:
# `crate::N::...` anywhere in code (paths, `use`, `pub(in ...)`), grouped
# forms (`use crate::{N::X, O::{Y, Z}}`), and `super::` paths that climb
# out of M (`super::N` in src/M.rs, src/M/mod.rs or in an inline `mod`
# there, counted from where it is written). Comments (`//`, `///`, `//!`,
# `/* */`) and string and char literals are ignored. Test code counts: a
# test that imports upward still ties the layers together; the map marks
# such edges with `*` so they can be told apart. Not seen: `#[path]`
# attributes, macros that build paths, and the paths of `tests/` and
# `main.rs` (they are clients of the crate, not layers in it).
set -euo pipefail
cd "$(dirname "$0")/.."

case ${1:-} in
  "") ;;
  -h | --help) sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) echo "usage: scripts/check-layers.sh" >&2; exit 2 ;;
esac

exec python3 - <<'PY'
import os
import re
import subprocess
import sys

SRC = "src"
ROOT_FILES = {"lib.rs", "main.rs"}


def modules():
    """The top-level modules: src/X.rs and src/X/ (with .rs files)."""
    found = set()
    for entry in os.listdir(SRC):
        path = os.path.join(SRC, entry)
        if entry.endswith(".rs") and entry not in ROOT_FILES and os.path.isfile(path):
            found.add(entry[:-3])
        elif os.path.isdir(path) and any(
            name.endswith(".rs") for _, _, names in os.walk(path) for name in names
        ):
            found.add(entry)
    return sorted(found)


def files_of(module):
    """Every .rs file of a top-level module, with its module path."""
    out = []
    single = os.path.join(SRC, module + ".rs")
    if os.path.isfile(single):
        out.append((single, [module]))
    top = os.path.join(SRC, module)
    for dirpath, dirnames, names in os.walk(top):
        dirnames.sort()
        for name in sorted(names):
            if not name.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(dirpath, name), SRC).split(os.sep)
            rel[-1] = rel[-1][:-3]
            if rel[-1] == "mod":
                rel.pop()
            out.append((os.path.join(dirpath, name), rel))
    return out


def blank(text):
    """The text with comments and string and char literals turned into
    spaces (newlines kept, so line numbers stay right)."""
    out = list(text)
    n = len(text)
    i = 0

    def wipe(a, b):
        for k in range(a, min(b, n)):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            wipe(i, end)
            i = end
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            wipe(i, j)
            i = j
        elif c == "r" and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")) \
                and re.match(r'r#*"', text[i:i + 300]):
            hashes = re.match(r"r(#*)\"", text[i:]).group(1)
            close = '"' + hashes
            end = text.find(close, i + 2 + len(hashes))
            end = n if end < 0 else end + len(close)
            wipe(i, end)
            i = end
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            wipe(i, j + 1)
            i = j + 1
        elif c == "'":
            if i + 1 < n and text[i + 1] == "\\":
                end = text.find("'", i + 2)
                end = n if end < 0 else end + 1
                wipe(i, end)
                i = end
            elif i + 2 < n and text[i + 2] == "'":
                wipe(i, i + 3)
                i += 3
            else:
                i += 1  # a lifetime
        else:
            i += 1
    return "".join(out)


TOKEN = re.compile(r"\$?[A-Za-z_][A-Za-z0-9_]*|::|\S")


def tokens(text):
    """(token, line) pairs of blanked text."""
    out = []
    for line_no, line in enumerate(text.split("\n"), 1):
        for m in TOKEN.finditer(line):
            out.append((m.group(0), line_no))
    return out


def is_test_attr(toks, close):
    """Whether the attribute ending at toks[close] (a `]`) is a cfg that
    holds only under test: #[cfg(test)], #[cfg(all(test, ...))]."""
    depth, j = 0, close
    while j >= 0:
        t = toks[j][0]
        if t == "]":
            depth += 1
        elif t == "[":
            depth -= 1
            if depth == 0:
                break
        j -= 1
    body = [t for t, _ in toks[j + 1:close]]
    return bool(body) and body[0] == "cfg" and "test" in body and "not" not in body and "any" not in body


def attrs_before(toks, i):
    """Start index of the outer attributes and visibility before toks[i],
    and whether one of them is a test-only cfg."""
    test = False
    j = i - 1
    while j >= 0:
        t = toks[j][0]
        if t == ")" and j >= 1:  # pub(crate), pub(in path)
            k = j
            while k >= 0 and toks[k][0] != "(":
                k -= 1
            if k >= 1 and toks[k - 1][0] == "pub":
                j = k - 2
                continue
            break
        if t in ("pub", "unsafe"):
            j -= 1
            continue
        if t == "]":
            depth, k = 0, j
            while k >= 0:
                if toks[k][0] == "]":
                    depth += 1
                elif toks[k][0] == "[":
                    depth -= 1
                    if depth == 0:
                        break
                k -= 1
            if k >= 1 and toks[k - 1][0] == "#":
                test = test or is_test_attr(toks, j)
                j = k - 2
                continue
        break
    return j + 1, test


def scan(path, modpath, top, tops, test_paths):
    """References out of `top` in one file: (kind, target, line, test)
    with kind "edge" (target a module) or "root" (target the item named
    in the crate root). Also records `#[cfg(test)] mod x;` declarations in
    test_paths."""
    with open(path, encoding="utf-8") as f:
        raw = f.read()
    toks = tokens(blank(raw))
    n = len(toks)
    file_test = any(tuple(modpath[:len(p)]) == p for p in test_paths)
    # A test-only file may also say so itself: #![cfg(test)].
    for k in range(n - 3):
        if toks[k][0] == "#" and toks[k + 1][0] == "!" and toks[k + 2][0] == "[":
            close = k + 2
            while close < n and toks[close][0] != "]":
                close += 1
            if close < n and is_test_attr(toks, close):
                file_test = True
    refs = []
    # Scopes: one entry per open bracket: (kind, name, test). kind is
    # "mod" for an inline module's brace, else the bracket.
    stack = []
    test_until = []  # (depth at which a test-only item ends, started?)
    i = 0

    def scope():
        return list(modpath) + [name for kind, name, _ in stack if kind == "mod"]

    def in_test():
        return file_test or any(t for _, _, t in stack) or bool(test_until)

    while i < n:
        t, line = toks[i]
        if t == "#" and i + 1 < n and toks[i + 1][0] == "[":
            # An outer attribute: a test-only cfg makes the item it starts
            # test code, up to its `;` or the end of its first brace block.
            close, depth = i + 1, 0
            while close < n:
                if toks[close][0] == "[":
                    depth += 1
                elif toks[close][0] == "]":
                    depth -= 1
                    if depth == 0:
                        break
                close += 1
            if close < n and is_test_attr(toks, close):
                test_until.append(len(stack))
            i = close + 1
            continue
        if t == "mod" and i + 2 < n and re.match(r"[A-Za-z_]", toks[i + 1][0]):
            name, after = toks[i + 1][0], toks[i + 2][0]
            _, test = attrs_before(toks, i)
            if after == ";" and test:
                test_paths.add(tuple(scope() + [name]))
            if after == "{":
                stack.append(("mod", name, test or in_test()))
                if test_until and test_until[-1] == len(stack) - 1:
                    test_until.pop()
                i += 3
                continue
        if t in "([{":
            stack.append((t, None, False))
        elif t in ")]}":
            if stack:
                stack.pop()
            if t == "}" and test_until and test_until[-1] == len(stack):
                test_until.pop()
        elif t == ";" and test_until and test_until[-1] == len(stack):
            test_until.pop()
        elif t in ("crate", "$crate", "super") and i + 2 < n and toks[i + 1][0] == "::":
            if t == "super":
                base = scope()[:-1]
                j = i + 2
                while j + 1 < n and toks[j][0] == "super" and toks[j + 1][0] == "::":
                    base = base[:-1]
                    j += 2
            else:
                base, j = [], i + 2
            firsts, j = first_segments(toks, j)
            for seg in firsts:
                if base:
                    target = base[0]
                elif seg in tops:
                    target = seg
                else:
                    refs.append(("root", seg, line, in_test()))
                    continue
                if target != top:
                    refs.append(("edge", target, line, in_test()))
            i = j
            continue
        i += 1
    return raw.split("\n"), refs


def first_segments(toks, j):
    """The first segment of each path starting at toks[j]: an identifier,
    `*`, or a `{...}` group (each item's first segment; `self` for the
    group's own base). Returns them and the index after what was read."""
    n = len(toks)
    if j >= n:
        return [], j
    t = toks[j][0]
    if t != "{":
        return [t], j + 1
    out, depth, start = [], 0, True
    k = j
    while k < n:
        t = toks[k][0]
        if t == "{":
            depth += 1
            if depth == 1:
                start = True
                k += 1
                continue
            if depth == 2 and start:  # crate::{{a, b}}
                inner, k = first_segments(toks, k)
                out.extend(inner)
                depth -= 1
                start = False
                continue
        elif t == "}":
            depth -= 1
            if depth == 0:
                return out, k + 1
        elif t == "," and depth == 1:
            start = True
            k += 1
            continue
        if start and depth == 1:
            out.append(t)
            start = False
        k += 1
    return out, k


def main():
    tops = modules()
    test_paths = set()
    # Two passes: the first learns which files are test-only (declared
    # `#[cfg(test)] mod x;` in their parent), the second counts with that.
    for _ in range(2):
        edges, roots = {}, []
        for top in tops:
            for path, modpath in files_of(top):
                lines, refs = scan(path, modpath, top, set(tops), test_paths)
                for kind, target, line, test in refs:
                    text = lines[line - 1].strip()
                    text = text if len(text) <= 100 else text[:97] + "..."
                    where = f"{path}:{line}: {text}" + (" (test)" if test else "")
                    if kind == "edge":
                        edges.setdefault((top, target), []).append((where, test))
                    else:
                        roots.append((top, target, where))

    print("Module map (module -> what it imports; * only from #[cfg(test)] code):")
    for top in tops:
        targets = sorted({b for a, b in edges if a == top})
        shown = [b + ("*" if all(test for _, test in edges[(top, b)]) else "") for b in targets]
        print(f"  {top} -> {', '.join(shown) if shown else '(nothing)'}")

    # tsort: "x y" puts x before y, so an imported module comes first.
    pairs = [f"{top} {top}" for top in tops] + [f"{b} {a}" for a, b in sorted(edges)]
    run = subprocess.run(["tsort"], input="\n".join(pairs) + "\n",
                         capture_output=True, text=True)
    order = run.stdout.split()
    loops, current = [], None
    for line in run.stderr.splitlines():
        line = re.sub(r"^tsort: ", "", line)
        if line.endswith("input contains a loop:"):
            current = []
            loops.append(current)
        elif current is not None and line.strip():
            current.append(line.strip())
    if run.returncode != 0 and not loops:
        sys.stderr.write(run.stderr)
        sys.exit(2)
    qualifier = " (cycles broken arbitrarily)" if loops else ""
    print(f"Layering order, lowest first (tsort){qualifier}:")
    print("  " + " ".join(order))

    err = sys.stderr
    for members in loops:
        # tsort lists a loop along its input pairs, each imported by the
        # next: so read backwards, each imports the one after it.
        cycle = list(reversed(members))
        steps = list(zip(cycle, cycle[1:] + cycle[:1]))
        if not all(step in edges for step in steps):
            steps = [(a, b) for a in members for b in members if (a, b) in edges]
            print(f"cycle among {', '.join(members)}:", file=err)
        else:
            print(f"cycle: {' -> '.join(cycle + cycle[:1])}", file=err)
        for a, b in steps:
            print(f"  {a} -> {b}:", file=err)
            for where, _ in edges[(a, b)]:
                print(f"    {where}", file=err)
    if roots:
        print("References into the crate root (move the item into a module):", file=err)
        for top, target, where in roots:
            print(f"  {top} -> crate root ({target}): {where}", file=err)
    if loops or roots:
        print(f"check-layers: {len(loops)} cycle(s), {len(roots)} reference(s) into the crate root",
              file=err)
        sys.exit(1)
    print("check-layers: no cycles, nothing reaches into the crate root")


main()
PY
