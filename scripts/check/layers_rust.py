"""Reads the Rust sources of src/ for scripts/check/check-layers.py, cheaply and
without compiling: which module paths each file names, where, and whether
from test code.

A reference is any path that starts at `crate::`, `$crate::`, `super::`,
`self::` or at a child module of the scope it is written in, in code or in
a `use` (grouped forms `use crate::{a::X, b::{Y, Z}}` included), turned
into a path from the crate root. `use` declarations also bind names, so
that a path through a re-export (`super::Pool`, re-exported by
`pub use pool::Pool`) can be followed to the file that defines the item.
Comments and string and char literals are blanked first. Not seen:
`#[path]`, paths that macros build, and method calls (a method defined in
another file's `impl` block is not a path).
"""

import os
import re

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
        out.append((single, (module,)))
    for dirpath, dirnames, names in os.walk(os.path.join(SRC, module)):
        dirnames.sort()
        for name in sorted(names):
            if not name.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(dirpath, name), SRC).split(os.sep)
            rel[-1] = rel[-1][:-3]
            if rel[-1] == "mod":
                rel.pop()
            out.append((os.path.join(dirpath, name), tuple(rel)))
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
        elif c in "rb" and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")) \
                and re.match(r'b?r#*"', text[i:i + 300]):
            m = re.match(r'(b?r)(#*)"', text[i:])
            close = '"' + m.group(2)
            end = text.find(close, i + len(m.group(0)))
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
IDENT = re.compile(r"\$?[A-Za-z_][A-Za-z0-9_]*$")


def tokens(text):
    """(token, line) pairs of blanked text."""
    out = []
    for line_no, line in enumerate(text.split("\n"), 1):
        for m in TOKEN.finditer(line):
            out.append((m.group(0), line_no))
    return out


def bracket_start(toks, close):
    """Index of the `[` that the `]` at toks[close] closes."""
    depth, j = 0, close
    while j >= 0:
        t = toks[j][0]
        if t == "]":
            depth += 1
        elif t == "[":
            depth -= 1
            if depth == 0:
                return j
        j -= 1
    return 0


def is_test_attr(toks, close):
    """Whether the attribute ending at toks[close] (a `]`) is a cfg that
    holds only under test: #[cfg(test)], #[cfg(all(test, ...))]."""
    body = [t for t, _ in toks[bracket_start(toks, close) + 1:close]]
    return bool(body) and body[0] == "cfg" and "test" in body \
        and "not" not in body and "any" not in body


def prefix_of(toks, i):
    """(is public, is test-only) from the visibility and the outer
    attributes written before the item at toks[i]."""
    public = test = False
    j = i - 1
    while j >= 0:
        t = toks[j][0]
        if t == ")" and j >= 1:  # pub(crate), pub(in path)
            k = j
            while k >= 0 and toks[k][0] != "(":
                k -= 1
            if k >= 1 and toks[k - 1][0] == "pub":
                public, j = True, k - 2
                continue
            break
        if t == "pub":
            public, j = True, j - 1
            continue
        if t == "unsafe":
            j -= 1
            continue
        if t == "]":
            k = bracket_start(toks, j)
            if k >= 1 and toks[k - 1][0] == "#":
                test = test or is_test_attr(toks, j)
                j = k - 2
                continue
        break
    return public, test


def use_tree(toks, j, base):
    """The leaves of the use tree at toks[j], each (path, bound name or
    None for a glob), base being the segments before it. Returns them and
    the index after the tree."""
    n = len(toks)
    if j < n and toks[j][0] == "{":
        out, j = [], j + 1
        while j < n and toks[j][0] != "}":
            if toks[j][0] == ",":
                j += 1
                continue
            leaves, j = use_tree(toks, j, base)
            out.extend(leaves)
        return out, j + 1
    path = list(base)
    while j < n:
        t = toks[j][0]
        if t == "*":
            return [(path, None)], j + 1
        if t == "{":
            return use_tree(toks, j, path)
        if not IDENT.match(t):
            break
        if t != "self" or not path:
            path.append(t)
        j += 1
        if j < n and toks[j][0] == "::":
            j += 1
            continue
        break
    name = path[-1] if path else None
    if j + 1 < n and toks[j][0] == "as":
        name, j = toks[j + 1][0], j + 2
    return [(path, name)], j


def code_path(toks, j):
    """The segments of the path at toks[j] in code: identifiers joined by
    `::`, up to generics (`::<`) or anything else."""
    n = len(toks)
    path = [toks[j][0]]
    j += 1
    while j + 1 < n and toks[j][0] == "::" and IDENT.match(toks[j + 1][0]):
        path.append(toks[j + 1][0])
        j += 2
    return path, j


def skip_path(toks, j):
    """The index after the path at toks[j]."""
    return code_path(toks, j)[1] if j < len(toks) else j


def absolute(path, scope, module_set):
    """The path from the crate root that a written path names, or None
    when it starts outside the crate."""
    if not path:
        return None
    head = path[0]
    if head in ("crate", "$crate"):
        return list(path[1:])
    if head in ("super", "self"):
        base, k = list(scope), 0
        while k < len(path) and path[k] in ("super", "self"):
            if path[k] == "super":
                base = base[:-1]
            k += 1
        return base + list(path[k:])
    if tuple(scope) + (head,) in module_set:
        return list(scope) + list(path)
    return None


def declared_modules(path, modpath):
    """Inline `mod x { ... }` of a file, as module paths (a pre-pass, so
    that relative paths into them are known before the scan)."""
    with open(path, encoding="utf-8") as f:
        toks = tokens(blank(f.read()))
    found, stack, pending = set(), [], None
    for i, (t, _) in enumerate(toks):
        if t == "mod" and i + 2 < len(toks) and toks[i + 2][0] == "{":
            pending = toks[i + 1][0]
        elif t == "{":
            stack.append(pending)
            if pending:
                found.add(tuple(modpath) + tuple(n for n in stack if n))
            pending = None
        elif t == "}" and stack:
            stack.pop()
    return found


class Ref:
    """One path a file names: `target` from the crate root, where, and
    how (`test`: from test code; `export`: a `pub use`, the module's list
    of what it shows, which costs nothing by itself)."""

    def __init__(self, target, line, test, export=False):
        self.target, self.line, self.test, self.export = target, line, test, export


def attribute_end(toks, open_at):
    """The index of the `]` that closes the `[` at `open_at` (len(toks)
    if none does)."""
    close, depth = open_at, 0
    while close < len(toks):
        depth += {"[": 1, "]": -1}.get(toks[close][0], 0)
        if depth == 0:
            break
        close += 1
    return close


def nest(t, stack, test_until, opened):
    """Follows brackets for a walk over tokens: `opened` pushed on an
    opening one, popped on a closing one, and a test item's end (its `}`
    or `;` at the depth it began) taken off `test_until`. Whether `t` was
    one of these."""
    if t in "([{":
        stack.append(opened)
    elif t in ")]}":
        if stack:
            stack.pop()
        if t == "}" and test_until and test_until[-1] == len(stack):
            test_until.pop()
    elif t == ";" and test_until and test_until[-1] == len(stack):
        test_until.pop()
    else:
        return False
    return True


def scan(path, modpath, module_set, test_paths):
    """The references of one file and the names its `use` declarations
    bind, as (lines, refs, bindings): bindings maps a scope (module path)
    to {name: path from the crate root, or None for outside the crate}.
    Records `#[cfg(test)] mod x;` declarations in test_paths."""
    with open(path, encoding="utf-8") as f:
        raw = f.read()
    toks = tokens(blank(raw))
    n = len(toks)
    file_test = any(tuple(modpath[:len(p)]) == p for p in test_paths)
    for k in range(n - 3):  # #![cfg(test)]: a test-only file says so itself
        if toks[k][0] == "#" and toks[k + 1][0] == "!" and toks[k + 2][0] == "[":
            close = k + 2
            while close < n and toks[close][0] != "]":
                close += 1
            if close < n and is_test_attr(toks, close):
                file_test = True
    refs, bindings, exported, idents = [], {}, [], []
    stack = []  # one entry per open bracket: (module name or None, test)
    test_until = []  # depths at which a test-only item ends
    i = 0

    def scope():
        return tuple(modpath) + tuple(name for name, _ in stack if name)

    def in_test():
        return file_test or any(t for _, t in stack) or bool(test_until)

    while i < n:
        t, line = toks[i]
        prev = toks[i - 1][0] if i else ""
        if t == "#" and i + 1 < n and toks[i + 1][0] == "[":
            close = attribute_end(toks, i + 1)
            if close < n and is_test_attr(toks, close):
                test_until.append(len(stack))
            i = close + 1
            continue
        if t == "mod" and i + 2 < n and IDENT.match(toks[i + 1][0]):
            name, after = toks[i + 1][0], toks[i + 2][0]
            _, test = prefix_of(toks, i)
            if after == ";" and test:
                test_paths.add(scope() + (name,))
            if after == "{":
                stack.append((name, test or in_test()))
                if test_until and test_until[-1] == len(stack) - 1:
                    test_until.pop()
                i += 3
                continue
        if t == "use" and prev != "::":
            public, _ = prefix_of(toks, i)
            j = i + 1 + (toks[i + 1][0] == "::" if i + 1 < n else 0)
            leaves, j = use_tree(toks, j, [])
            for written, name in leaves:
                target = absolute(written, scope(), module_set)
                if name and name != "_":
                    bindings.setdefault(scope(), {})[name] = target
                if target is not None:
                    refs.append(Ref(target, line, in_test(), public))
                    if public and name:
                        exported.append((scope(), name, target))
            i = j
            continue
        if nest(t, stack, test_until, (None, False)):
            pass
        elif t == "in" and prev == "(" and i >= 2 and toks[i - 2][0] == "pub":
            i = skip_path(toks, i + 1)  # pub(in crate::m): a visibility, not a use
            continue
        elif IDENT.match(t) and prev not in ("::", ".", "mod") and \
                (i + 1 >= n or toks[i + 1][0] != "::"):
            idents.append((t, line, in_test()))
        if IDENT.match(t) and prev != "::" and i + 1 < n and toks[i + 1][0] == "::":
            written, j = code_path(toks, i)
            target = absolute(written, scope(), module_set)
            if target is not None:
                refs.append(Ref(target, line, in_test()))
                i = j
                continue
        i += 1
    # A name the file re-exports and also uses in its own code: that use
    # is a reference (the `pub use` itself counts nothing).
    names = {name: target for _, name, target in exported}
    refs.extend(Ref(names[t], line, test) for t, line, test in idents if t in names)
    return raw.split("\n"), refs, bindings


TYPE_KINDS = ("struct", "enum", "trait", "union", "type")


def crate_visible(toks, i):
    """Whether the item at toks[i] is declared `pub` or `pub(crate)`: a
    name another module may import (`pub(super)`, `pub(in ...)` and
    private items stay within their module)."""
    j = i - 1
    while j >= 0 and toks[j][0] == "unsafe":
        j -= 1
    if j >= 0 and toks[j][0] == "pub":
        return True
    return j >= 3 and toks[j][0] == ")" and toks[j - 1][0] == "crate" \
        and toks[j - 2][0] == "(" and toks[j - 3][0] == "pub"


def types(path, modpath, test_paths):
    """The type names (struct, enum, trait, union, type alias) a file
    declares at module level for other modules to use: `pub` or
    `pub(crate)`, outside test code; [(name, kind, line)]. Associated
    types and items inside functions are not module-level."""
    with open(path, encoding="utf-8") as f:
        toks = tokens(blank(f.read()))
    n = len(toks)
    test = any(tuple(modpath[:len(p)]) == p for p in test_paths)
    found = []
    stack = []  # one entry per open bracket: whether it is a module's body
    test_until = []  # depths at which a test-only item ends
    i = 0
    while i < n:
        t, line = toks[i]
        if t == "#" and i + 1 < n and toks[i + 1][0] in ("[", "!"):
            inner = toks[i + 1][0] == "!"
            close = attribute_end(toks, i + 1 + inner)
            if close < n and is_test_attr(toks, close):
                if inner and not stack:
                    test = True
                else:
                    test_until.append(len(stack))
            i = close + 1
            continue
        if t == "mod" and i + 2 < n and toks[i + 2][0] == "{":
            stack.append(True)
            i += 3
            continue
        if t in TYPE_KINDS and i + 1 < n and IDENT.match(toks[i + 1][0]) \
                and not toks[i + 1][0].startswith("$") and all(stack) \
                and not test and not test_until and crate_visible(toks, i):
            found.append((toks[i + 1][0], t, line))
        nest(t, stack, test_until, False)
        i += 1
    return found
