#!/usr/bin/env python3
"""The architecture as a check: ARCHITECTURE.md's table of which top-level
module of src/ may import which, held against the source text (no build;
the reading itself is in layers_rust.py).

    scripts/check/check-layers.py [--files] [--src DIR] [--doc FILE]

(--src and --doc read another tree's sources and table: how
check-layers.sh shows the check failing on a planted defect.)

Fails (exit 1), naming the file and line of every reference involved, on:
  - an import between top-level modules that the table does not allow
    (the table's temporary rows included), or that the table allows only
    from tests (`name (tests)`) and that code makes;
  - a row of the table that no import uses any more (the table is the
    module map, not a wish list);
  - a cycle between top-level modules;
  - a cycle between the files of one module (siblings import one way; a
    file with child files, such as a mod.rs, may use its children and they
    it, so a loop through a parent file is not one): each .rs file is a node, and
    a file's code naming an item of another file of the module (through
    `super::`, `self::`, `crate::m::`, a child module, or a re-export,
    followed to the file that defines the item) is an edge. Test code
    (`#[cfg(test)]` items and files) is left out of this graph: a test
    reaches into what it tests and its fixtures, and nothing can import a
    test back, so it only adds the test's own reach;
  - a reference into the crate root (`crate::random_hex`): shared items
    belong in a leaf module, not in lib.rs;
  - a `pub use` of another top-level module's item: a module shows its
    own items, so that an import of it is an import of it (a re-export
    would let `api` reach `store` through `plants` unseen);
  - a `use` that names the crate root or an ancestor module under another
    name (`use crate as c;`), after which paths could not be read;
  - a path (`src/...`, `scripts/...`, `docs/...`, `http/conn.rs`) or a
    module path (`api::App`) cited in ARCHITECTURE.md that does not exist;
  - a type name (struct, enum, trait, union, type alias; `pub` or
    `pub(crate)`, outside test code) declared in two top-level modules,
    unless ARCHITECTURE.md's table of shared type names (header
    `| type name |`) has a row for it, and a row of that table that no
    two modules' names use. One name, one type: a reader meeting it need
    not check which module's it is.
  - a build option (a cargo feature) named outside the files that
    ARCHITECTURE.md's "Build options" section lists as its seams or in
    its allow list (at most 20 lines in all), and that section out of step
    with Cargo.toml's features (layers_seams.py).
Run from the repository's root, or from LAYERS_ROOT when set (a copy of
it, as scripts/check/check-layers.sh's test of the check makes).
Not seen: `#[path]`, paths built by macros, method calls into another
file's `impl`, and names a glob `use` (`use x::*`) brings in outside
test code (there is none; write the names).
Prints the module map (`*`: an import made only from test code) and a
layering order, lowest first; with --files, each module's file map too.
"""

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import layers_doc as doc  # noqa: E402
import layers_rust as rust  # noqa: E402
import layers_seams as seams  # noqa: E402

ARCH = "ARCHITECTURE.md"
TEMPORARY = "may also import, until"


def read_sources():
    """Every top-level module's files scanned: [(top, path, lines, refs)],
    the module paths that are files (module path -> file), the names the
    `use` declarations bind, and the type names each module declares for
    others ({name: [(top, path, line, kind)]})."""
    tops = rust.modules()
    files = [(top, path, mp) for top in tops for path, mp in rust.files_of(top)]
    owner = {mp: path for _, path, mp in files}
    for _, path, mp in files:
        for inline in rust.declared_modules(path, mp):
            owner.setdefault(inline, path)
    test_paths = set()
    # Two passes: the first learns which files are test-only (declared
    # `#[cfg(test)] mod x;` in their parent), the second counts with that.
    for _ in range(2):
        scanned, bindings = [], {}
        for top, path, mp in files:
            lines, refs, binds = rust.scan(path, mp, set(owner), test_paths)
            scanned.append((top, path, mp, lines, refs))
            for scope, names in binds.items():
                bindings.setdefault(scope, {}).update(names)
    declared = {}
    for top, path, mp in files:
        for name, kind, line in rust.types(path, mp, test_paths):
            declared.setdefault(name, []).append((top, path, line, kind))
    return tops, scanned, owner, bindings, declared


def resolve(target, owner, bindings, depth=0):
    """The module (a key of owner) that defines what `target` names,
    following `use` bindings (re-exports) up to a few steps."""
    cur = ()
    for k, seg in enumerate(target):
        if cur + (seg,) in owner:
            cur += (seg,)
            continue
        bound = bindings.get(cur, {}).get(seg, ())
        if bound != () and depth < 8:
            if bound is None:
                return cur
            return resolve(list(bound) + list(target[k + 1:]), owner, bindings, depth + 1)
        return cur
    return cur


def where(path, lines, ref):
    text = lines[ref.line - 1].strip()
    text = text if len(text) <= 100 else text[:97] + "..."
    return f"{path}:{ref.line}: {text}" + (" (test)" if ref.test else "")


def graphs(tops, scanned, owner, bindings):
    """The module edges {(a, b): [(where, test)]}, the file edges per
    module {top: {(file a, file b): [where]}} (test code left out) and the
    references into the crate root."""
    edges, file_edges, roots, relays = {}, {top: {} for top in tops}, [], []
    for top, path, mp, lines, refs in scanned:
        for ref in refs:
            if not ref.target:
                continue
            head = ref.target[0]
            if head not in tops:
                roots.append((top, head, where(path, lines, ref)))
                continue
            relay = (top, head, where(path, lines, ref))
            if head != top and ref.export and relay not in relays:
                relays.append(relay)
            if head != top:
                seen = edges.setdefault((top, head), [])
                if (where(path, lines, ref), ref.test) not in seen:
                    seen.append((where(path, lines, ref), ref.test))
                continue
            if ref.test or ref.export:
                continue
            module = resolve(ref.target, owner, bindings)
            other = owner.get(module)
            # A file's own module and what it holds (its child files) are
            # its to use: a root declares, re-exports and wires its children.
            if other and module[:len(mp)] != mp:
                seen = file_edges[top].setdefault((path, other), [])
                if where(path, lines, ref) not in seen:
                    seen.append(where(path, lines, ref))
    return edges, file_edges, roots, relays


def aliases(scanned, err):
    """`use crate as c;` and its kin: paths through such a name are not
    read, so the name itself is refused."""
    bad = 0
    for _, path, _, lines, _ in scanned:
        for number, line in enumerate(lines, 1):
            code = line.split("//")[0]
            if re.search(r"\buse\s+(crate|super(\s*::\s*super)*)\s+as\b", code):
                print(f"the crate root or an ancestor under another name (paths through it are not read):\n    {path}:{number}: {line.strip()}", file=err)
                bad += 1
    return bad


def cycles(nodes, pairs):
    """The strongly connected components of more than one node (Tarjan),
    each sorted, in a stable order."""
    out_of = {v: sorted({b for a, b in pairs if a == v}) for v in nodes}
    index, low, on, stack, found = {}, {}, set(), [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in out_of.get(v, []):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return sorted(found)


def layering(tops, edges):
    """Modules in an order where each comes after what it imports (those
    in a cycle last, in name order)."""
    order, placed = [], set()
    while len(placed) < len(tops):
        ready = [m for m in tops if m not in placed
                 and all(b in placed for a, b in edges if a == m)]
        if not ready:
            order += [m for m in tops if m not in placed]
            break
        order += ready
        placed.update(ready)
    return order


def cell_names(cell):
    """The module names of a table cell: `name` or `name` (tests)."""
    return [(m.group(1), bool(m.group(2)))
            for m in re.finditer(r"`([a-z_]+)`(\s*\(tests\))?", cell)]


def read_table(text):
    """The allowed imports: {(a, b): (tests only, temporary, line)}, read
    from the tables whose header starts `| module |` and has a column
    `may import` (or, for temporary rows, `may also import, until ...`)."""
    allowed, rows, column, temporary = {}, set(), None, False
    for no, line in enumerate(text.split("\n"), 1):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|"):
            column = None
            continue
        if cells[0].lower() == "module":
            column = next((k for k, c in enumerate(cells) if c.lower().startswith("may ")), None)
            temporary = column is not None and cells[column].lower().startswith(TEMPORARY)
            continue
        if column is None or set(cells[0]) <= set("-: "):
            continue
        names = cell_names(cells[0])
        if not names:
            continue
        rows.add(names[0][0])
        for b, tests in cell_names(cells[column]):
            allowed[(names[0][0], b)] = (tests, temporary, no)
    return allowed, rows


def read_shared_names(text):
    """The type names the table headed `| type name |` lets several
    modules declare: {name: line}."""
    shared, inside = {}, False
    for no, line in enumerate(text.split("\n"), 1):
        if not line.startswith("|"):
            inside = False
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0].lower() == "type name":
            inside = True
        elif inside and not set(cells[0]) <= set("-: "):
            m = re.fullmatch(r"`([A-Za-z_][A-Za-z0-9_]*)`", cells[0])
            if m:
                shared[m.group(1)] = no
    return shared


def check_names(declared, shared, err):
    """Each type name declared in two top-level modules listed in the
    table of shared names, each row of it used; the failures."""
    bad = 0
    twice = {name: places for name, places in declared.items()
             if len({top for top, _, _, _ in places}) > 1}
    for name in sorted(twice):
        if name in shared:
            continue
        tops = sorted({top for top, _, _, _ in twice[name]})
        print(f"type name `{name}` declared in {len(tops)} modules ({', '.join(tops)}): "
              f"rename one, or give it a row in {ARCH}'s table of shared type names:",
              file=err)
        for _, path, line, kind in twice[name]:
            print(f"    {path}:{line}: {kind} {name}", file=err)
        bad += 1
    for name, no in sorted(shared.items()):
        if name not in twice:
            print(f"{ARCH}:{no}: the table of shared type names lists `{name}`, which no "
                  "two modules declare: drop its row", file=err)
            bad += 1
    return bad


def check_table(tops, edges, allowed, rows, err):
    """Each edge allowed by the table, each row used; the failures."""
    bad = 0
    for m in tops:
        if m not in rows:
            print(f"{ARCH}: module `{m}` has no row in the table of imports", file=err)
            bad += 1
    for name in sorted(rows - set(tops)):
        print(f"{ARCH}: the table names `{name}`, which is not a module of src/", file=err)
        bad += 1
    for (a, b), refs in sorted(edges.items()):
        rule = allowed.get((a, b))
        code = [w for w, test in refs if not test]
        if rule is None or (rule[0] and code):
            why = "not in the table" if rule is None else "allowed from tests only"
            print(f"forbidden import {a} -> {b} ({why}):", file=err)
            for w in (refs if rule is None else code):
                print(f"    {w[0] if isinstance(w, tuple) else w}", file=err)
            bad += 1
    for (a, b), (_, _, no) in sorted(allowed.items()):
        if (a, b) not in edges and a in tops:
            print(f"{ARCH}:{no}: the table lets {a} import {b}, and nothing does: "
                  "drop it from the table", file=err)
            bad += 1
    return bad


def shortest_loop(part, pairs):
    """A shortest loop through the nodes of one component, as a list of
    nodes (the first repeated at the end)."""
    best = None
    for start in part:
        back, queue = {start: None}, [start]
        while queue:
            v = queue.pop(0)
            for a, b in sorted(pairs):
                if a != v or b not in part:
                    continue
                if b == start:
                    loop, w = [start], v
                    while w is not None:
                        loop.insert(0, w)
                        w = back[w]
                    if best is None or len(loop) < len(best):
                        best = loop
                    queue = []
                    break
                if b not in back:
                    back[b] = v
                    queue.append(b)
    return best


def report_cycles(kind, found, pairs, err):
    """Each component: its members, then one shortest loop in it with the
    references that make each step (fix it and run again for the next)."""
    for part in found:
        loop = shortest_loop(part, pairs)
        print(f"cycle between {kind}: {' -> '.join(loop)}", file=err)
        if len(part) > len(loop) - 1:
            print(f"  (one loop of a tangle of {len(part)}: {', '.join(part)})", file=err)
        for a, b in zip(loop, loop[1:]):
            print(f"  {a} -> {b}:", file=err)
            for w in pairs[(a, b)]:
                print(f"    {w[0] if isinstance(w, tuple) else w}", file=err)
    return len(found)


def main():
    global ARCH
    args = sys.argv[1:]
    if args in (["-h"], ["--help"]):
        print(__doc__.strip())
        sys.exit(0)
    usage = "usage: scripts/check/check-layers.py [--files] [--src DIR] [--doc FILE]"
    files, given = "--files" in args, [a for a in args if a != "--files"]
    while given:
        if len(given) < 2 or given[0] not in ("--src", "--doc"):
            print(usage, file=sys.stderr)
            sys.exit(2)
        flag, value = given[0], os.path.abspath(given[1])
        if flag == "--src":
            rust.SRC = value
        else:
            ARCH = value
        given = given[2:]
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    os.chdir(os.environ.get("LAYERS_ROOT") or here)
    tops, scanned, owner, bindings, declared = read_sources()
    edges, file_edges, roots, relays = graphs(tops, scanned, owner, bindings)
    err = sys.stderr
    with open(ARCH, encoding="utf-8") as f:
        text = f.read()
    allowed, rows = read_table(text)

    print("Module map (module -> what it imports; * only from test code):")
    for top in tops:
        targets = sorted({b for a, b in edges if a == top})
        shown = [b + ("*" if all(t for _, t in edges[(top, b)]) else "") for b in targets]
        print(f"  {top} -> {', '.join(shown) if shown else '(nothing)'}")
    print("Layering order, lowest first:")
    print("  " + " ".join(layering(tops, edges)))
    temporary = sorted(e for e, rule in allowed.items() if rule[1] and e in edges)
    if temporary:
        print("Imports allowed by the table's temporary rows: "
              + ", ".join(f"{a} -> {b}" for a, b in temporary))
    if files:
        for top in tops:
            pairs = file_edges[top]
            if pairs:
                print(f"Files of {top}/ (file -> the files of the module it uses; tests left out):")
                for a in sorted({a for a, _ in pairs}):
                    out = sorted(os.path.relpath(b, rust.SRC) for x, b in pairs if x == a)
                    print(f"  {os.path.relpath(a, rust.SRC)} -> {', '.join(out)}")

    bad = check_table(tops, edges, allowed, rows, err)
    bad += report_cycles("modules", cycles(tops, edges), edges, err)
    for top in tops:
        nodes = {p for pair in file_edges[top] for p in pair}
        bad += report_cycles(f"files of {top}/", cycles(nodes, file_edges[top]),
                             file_edges[top], err)
    for top, target, w in roots:
        print(f"reference into the crate root ({top} -> {target}; move the item into a module):",
              file=err)
        print(f"    {w}", file=err)
        bad += 1
    for top, target, w in relays:
        print(f"re-export of another module's item ({top} shows {target}'s; import it from "
              f"{target}):", file=err)
        print(f"    {w}", file=err)
        bad += 1
    bad += aliases(scanned, err)
    bad += check_names(declared, read_shared_names(text), err)
    bad += doc.check(text, tops, owner, bindings, err)
    bad += seams.check(text, err)
    if bad:
        print(f"check-layers: {bad} failure(s)", file=err)
        sys.exit(1)
    print("check-layers: every import is in the table; no cycle between modules or between "
          "the files of one; every path ARCHITECTURE.md cites exists; no type name declared "
          "in two modules but those it lists; every build option named in its seams only")


main()
