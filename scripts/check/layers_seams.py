"""Holds the crate to ARCHITECTURE.md's build options, for
scripts/check/check-layers.py: a cargo feature (`feature = "..."` in code,
in a `cfg`, `cfg_attr` or `cfg!`) is named only in the files that section
lists for it.

Two tables of ARCHITECTURE.md are read:
  - `| option | seam | ... |`: each row's options (backticked; a row
    saying "every option" is for all of them) and the files (backticked,
    under src/) that may name them;
  - `| file | lines naming an option | ... |`: the allow list, files
    outside the seams that may name an option in at most that many lines;
    together at most ALLOWED_IN_ALL lines.
Fails on a file that names an option outside its seams and the allow
list, on an allowed file naming more lines than its row gives, on the
allow list giving more than ALLOWED_IN_ALL lines, on an option of
Cargo.toml's [features] that has no seam, on an option the tables name
that Cargo.toml does not have, and on a seam or allowed file that does not
exist (a row left behind).
"""

import os
import re

import layers_rust as rust

ALLOWED_IN_ALL = 20
NAMED = re.compile(r'\bfeature\s*=\s*"([^"]*)"')
TICKED = re.compile(r"`([^`]+)`")


def features():
    """The options of Cargo.toml's [features] (`default` is not one)."""
    names, section = [], ""
    with open("Cargo.toml", encoding="utf-8") as f:
        for line in f:
            if line.startswith("["):
                section = line.strip()
            elif section == "[features]" and re.match(r"[a-z0-9_-]+\s*=", line):
                name = line.split("=")[0].strip()
                if name != "default":
                    names.append(name)
    return names


def tables(text):
    """({option: {file: line}}, {file: (lines, line)}, [every option's
    files]) from the two tables (files relative to src/)."""
    seams, allowed, kind = {}, {}, None
    for no, line in enumerate(text.split("\n"), 1):
        if not line.startswith("|"):
            kind = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        head = cells[0].lower()
        if head == "option" and len(cells) > 1 and cells[1].lower().startswith("seam"):
            kind = "seams"
            continue
        if head == "file" and len(cells) > 1 and cells[1].lower().startswith("lines naming"):
            kind = "allowed"
            continue
        if kind is None or set(cells[0]) <= set("-: "):
            continue
        if kind == "seams":
            every = "every option" in cells[0].lower()
            options = ["*"] if every else TICKED.findall(cells[0])
            for option in options:
                for path in TICKED.findall(cells[1]):
                    seams.setdefault(option, {})[path] = no
        else:
            paths = TICKED.findall(cells[0])
            count = cells[1].strip()
            if len(paths) == 1 and count.isdigit():
                allowed[paths[0]] = (int(count), no)
    return seams, allowed


def named(path):
    """[(line number, option)] for each option the file's code names
    (comments and the text of strings left out)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    code = rust.blank(text).split("\n")
    found = []
    for no, (line, plain) in enumerate(zip(text.split("\n"), code), 1):
        if not re.search(r"\bfeature\s*=", plain):
            continue
        found += [(no, m.group(1)) for m in NAMED.finditer(line)]
    return found


def check(text, err):
    """Prints each failure; returns how many."""
    bad = 0
    options = features()
    seams, allowed = tables(text)
    for option in sorted(set(seams) - set(options) - {"*"}):
        print(f"ARCHITECTURE.md:{min(seams[option].values())}: option `{option}` is not a "
              "feature of Cargo.toml", file=err)
        bad += 1
    for option in options:
        if option not in seams:
            print(f"ARCHITECTURE.md: feature `{option}` has no seam in the table of build "
                  "options", file=err)
            bad += 1
    rows = {p: no for files in seams.values() for p, no in files.items()}
    rows.update({p: no for p, (_, no) in allowed.items()})
    for path, no in sorted(rows.items()):
        if not os.path.isfile(os.path.join(rust.SRC, path)):
            print(f"ARCHITECTURE.md:{no}: `{path}` is not a file of src/", file=err)
            bad += 1
    given = sum(count for count, _ in allowed.values())
    if given > ALLOWED_IN_ALL:
        print(f"ARCHITECTURE.md: the allow list gives {given} lines naming an option outside "
              f"the seams, more than {ALLOWED_IN_ALL}: make a seam instead", file=err)
        bad += 1
    everywhere = set(seams.get("*", {}))
    for dirpath, dirnames, names in os.walk(rust.SRC):
        dirnames.sort()
        for name in sorted(n for n in names if n.endswith(".rs")):
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, rust.SRC)
            outside = [(no, option) for no, option in named(path)
                       if rel not in everywhere and rel not in seams.get(option, {})]
            limit = allowed.get(rel, (0, None))[0]
            if len(outside) > limit:
                where = "" if limit == 0 else f" (the allow list gives it {limit})"
                print(f"a build option named outside its seams{where}: name it in a seam "
                      "(ARCHITECTURE.md, \"Build options\") and read the same in every build:",
                      file=err)
                with open(path, encoding="utf-8") as f:
                    lines = f.read().split("\n")
                for no, option in outside:
                    print(f"    {path}:{no}: {lines[no - 1].strip()} ({option})", file=err)
                bad += 1
    return bad
