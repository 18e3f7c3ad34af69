"""Holds ARCHITECTURE.md to the tree, for scripts/check/check-layers.py: every
path and module path it cites in backticks must exist.

  - a path with a slash (`scripts/check/check-layers.sh`, `docs/`,
    `http/conn.rs`): a file or folder from the repository's root, or
    from src/;
  - a file name alone (`lib.rs`): a file of src/;
  - a module path (`api::App::handle`, `store::hook::Sequencer`): its modules
    exist and the first item after them is defined (or imported by name)
    in that module. Paths that start outside the crate (`std::`) and
    names that are not paths are not checked.
Fenced code blocks are left out (a sketch, not a citation).
"""

import os
import re

import layers_rust as rust

SPAN = re.compile(r"`([^`\n]+)`")
PATH = re.compile(r"[A-Za-z0-9_.][\w./-]*/[\w./-]*$|[\w./-]*/[\w.-]+$")
FILE = re.compile(r"[a-z_]+\.rs$")
MODULE_PATH = re.compile(r"([a-z_]+)((?:::[A-Za-z_][A-Za-z0-9_]*)+)(\(\))?$")
DEFINES = r"\b(?:struct|enum|fn|trait|type|const|static|mod|union)\s+{}\b"


def citations(text):
    """(line, span) for each backticked span outside fenced blocks."""
    fenced = False
    for no, line in enumerate(text.split("\n"), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            for m in SPAN.finditer(line):
                yield no, m.group(1).strip()


def defined(module, name, owner, bindings, cache):
    """Whether module (a module path) defines or imports `name`."""
    if name in bindings.get(module, {}) or module + (name,) in owner:
        return True
    path = owner.get(module)
    if path not in cache:
        with open(path, encoding="utf-8") as f:
            cache[path] = rust.blank(f.read())
    return re.search(DEFINES.format(re.escape(name)), cache[path]) is not None


def crates():
    """The crates a path may start with besides this one's modules."""
    names = {"std", "core", "alloc"}
    with open("Cargo.toml", encoding="utf-8") as f:
        section = ""
        for line in f:
            if line.startswith("["):
                section = line.strip()
            elif "dependencies" in section and re.match(r"[A-Za-z0-9_-]+\s*=", line):
                names.add(line.split("=")[0].strip().replace("-", "_"))
    return names


def module_path_exists(span, tops, owner, bindings, cache):
    m = MODULE_PATH.match(span)
    segments = [m.group(1)] + m.group(2).split("::")[1:]
    if segments[0] == "crate":
        segments = segments[1:]
    elif segments[0] not in tops:
        return segments[0] in crates()
    module = ()
    for seg in segments:
        if module + (seg,) in owner:
            module += (seg,)
            continue
        return defined(module, seg, owner, bindings, cache)
    return True


def check(text, tops, owner, bindings, err):
    """Prints each citation that names nothing; returns how many."""
    bad, cache = 0, {}
    for no, span in citations(text):
        if " " in span or "://" in span or span.startswith(("/", "-")):
            continue
        if PATH.match(span):
            ok = os.path.exists(span) or os.path.exists(os.path.join(rust.SRC, span))
        elif FILE.match(span):
            ok = os.path.exists(os.path.join(rust.SRC, span))
        elif MODULE_PATH.match(span):
            ok = module_path_exists(span, tops, owner, bindings, cache)
        else:
            continue
        if not ok:
            print(f"ARCHITECTURE.md:{no}: `{span}` names nothing in the tree", file=err)
            bad += 1
    return bad
