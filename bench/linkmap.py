#!/usr/bin/env python3
"""What a build is made of, from GNU ld's map of its link (the
plantstore.map scripts/release/release-build.sh writes beside a glibc
build; the binary itself is stripped):

    bench/linkmap.py MAP TITLE KEY_PREFIX FIGURES_OUT

prints two markdown tables under TITLE: the largest crates, and the
modules of plantstore itself, each with its bytes and share; and writes
KEY VALUE lines to FIGURES_OUT (KEY_PREFIX + crate.NAME or module.NAME),
which bench/run.sh footprint hands to bench/figures.py.

Bytes are those of the input sections the linker kept in the sections
that take room in the file (code, constants, data, unwind tables; not
.bss). With LTO and one codegen unit the Rust code is one object, so a
section is attributed by its symbol (functions and statics each have a
section: -ffunction-sections), demangled: a crate is the symbol's first
path segment (for an impl, its type's, or else its trait's), a module of
plantstore its second. Sections without a symbol are counted apart:
constants the compiler left unnamed (strings, panic locations, tables),
unwind tables, the C runtime and what the linker makes. A generic
function is counted where it is defined (core, alloc), not where it was
instantiated: the crate that used it is not named in its symbol.
"""

import re
import sys

CRATES_SHOWN = 12
# Output sections that take no room in the file, or are removed by strip.
SKIPPED = re.compile(r"\.(bss|tbss|comment|debug|stab|symtab|strtab|shstrtab|note\.GNU-stack|gnu_debuglink)")
INPUT = re.compile(r"^ (\S+)\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+(\S.*)$")
NAME_ONLY = re.compile(r"^ (\S+)$")
CONTINUED = re.compile(r"^\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+(\S.*)$")
OUTPUT = re.compile(r"^(\.\S+|/DISCARD/)")
ESCAPES = {"$LT$": "<", "$GT$": ">", "$RF$": "&", "$BP$": "*", "$LP$": "(", "$RP$": ")",
           "$C$": ",", "$SP$": "@", "$u20$": " ", "$u27$": "'", "$u5b$": "[", "$u5d$": "]",
           "$u7b$": "{", "$u7d$": "}", "$u3b$": ";", "$u22$": '"', "$u7e$": "~", "$u21$": "!"}
# Names of sections without a symbol, by their kind.
SPECIAL = {
    "constants": "constants without a symbol (strings, panic locations, tables)",
    "unwind": "unwind tables (.eh_frame, .gcc_except_table)",
    "runtime": "the C runtime, libgcc and what the linker makes (PLT, GOT, headers)",
    "other-crates": "the other crates",
    "root": "the crate roots (lib.rs, main.rs)",
}


def sections(path):
    """(output section, input section, bytes, file) of each section kept."""
    output = None
    pending = None
    started = False
    with open(path, encoding="utf-8", errors="replace") as lines:
        for line in lines:
            line = line.rstrip("\n")
            if not started:
                started = line.startswith("Linker script and memory map")
                continue
            match = OUTPUT.match(line)
            if match:
                output, pending = match[1], None
                continue
            if output is None or output == "/DISCARD/" or SKIPPED.match(output):
                continue
            match = INPUT.match(line)
            if match and not match[1].startswith("*"):
                yield output, match[1], int(match[3], 16), match[4]
                pending = None
                continue
            match = NAME_ONLY.match(line)
            if match and not match[1].startswith("*"):
                pending = match[1]
                continue
            match = CONTINUED.match(line)
            if match and pending is not None:
                yield output, pending, int(match[2], 16), match[3]
            pending = None


def demangle(symbol):
    """The path segments of a legacy-mangled Rust symbol (_ZN...E), hash
    dropped, escapes decoded; None if it is not one."""
    if not symbol.startswith("_ZN"):
        return None
    rest, parts = symbol[3:], []
    while rest and rest[0].isdigit():
        digits = re.match(r"[0-9]+", rest)[0]
        size = int(digits)
        part, rest = rest[len(digits):len(digits) + size], rest[len(digits) + size:]
        if part.startswith("_$"):
            part = part[1:]
        part = re.sub(r"\$[A-Za-z0-9]+\$", lambda m: ESCAPES.get(m[0], m[0]), part).replace("..", "::")
        parts.append(part)
    if parts and re.fullmatch(r"h[0-9a-f]{16}", parts[-1]):
        parts.pop()
    return parts or None


class V0:
    """The leftmost path of a v0-mangled Rust symbol (_R...: the scheme
    Debian's rustc uses), as far as it reads plainly: the crate, then the
    modules nested in it, up to an impl, generic arguments or a trait
    item (an impl's own path is where its block is written, which is
    what is wanted). Enough to attribute a symbol; not a demangler."""

    def __init__(self, symbol):
        self.s, self.i = symbol, 2
        while self.i < len(self.s) and self.s[self.i].isdigit():
            self.i += 1  # the encoding version, if any

    def base62(self):
        while self.s[self.i] != "_":
            self.i += 1
        self.i += 1

    def ident(self):
        if self.s[self.i] == "s":
            self.i += 1
            self.base62()
        if self.s[self.i] == "u":
            self.i += 1
        digits = re.match(r"[0-9]+", self.s[self.i:])[0]
        self.i += len(digits)
        if self.s[self.i] == "_":
            self.i += 1
        name = self.s[self.i:self.i + int(digits)]
        self.i += int(digits)
        return name

    def path(self):
        """(segments, whole): whole is False once something other than a
        crate or module was met (the segments are then all there is)."""
        tag = self.s[self.i]
        self.i += 1
        if tag == "C":
            return [self.ident()], True
        if tag == "N":
            self.i += 1  # the namespace
            parts, whole = self.path()
            if whole:
                parts.append(self.ident())
            return parts, whole
        if tag in "MX":
            if self.s[self.i] == "s":
                self.i += 1
                self.base62()
            return self.path()[0], False
        if tag == "I":
            return self.path()[0], False
        if tag == "Y" and self.s[self.i] in "CNMXIY":
            return self.path()[0], False
        raise ValueError(tag)


def demangle_v0(symbol):
    """The leading path segments of a v0 symbol (_R...), or None."""
    try:
        parts = V0(symbol).path()[0]
    except (ValueError, IndexError, TypeError):
        return None
    return parts or None


def owner(parts):
    """(crate, module) of a demangled path: an impl's (<T as Trait>) is its
    type's where the type is a path, else its trait's."""
    first = parts[0]
    if first.startswith("<"):
        inner = first[1:-1] if first.endswith(">") else first[1:]
        for candidate in inner.split(" as ", 1):
            candidate = re.sub(r"^(&|mut |\*const |\*mut |dyn |\[|\()+", "", candidate.strip())
            path = re.match(r"[A-Za-z_][A-Za-z0-9_]*(::[A-Za-z_][A-Za-z0-9_]*)*", candidate)
            if path and "::" in path[0]:
                segments = path[0].split("::")
                return segments[0], segments[1] if len(segments) > 2 else None
        return "core", None
    return first, parts[1] if len(parts) > 2 else None


def attribute(input_section, file):
    """(crate or special, module of plantstore or None) of one input section."""
    archive = re.search(r"lib([A-Za-z0-9_]+)-[0-9a-f]+\.rlib\(", file)
    if ".rcgu.o" not in file and archive is None:
        return "runtime", None
    symbol = re.search(r"\.(_ZN[0-9A-Za-z_$.]*E)", input_section)
    if symbol:
        parts = demangle(symbol[1])
        if parts:
            crate, module = owner(parts)
            return crate, module if crate == "plantstore" else None
    symbol = re.search(r"\.(_R[0-9A-Za-z_]+)", input_section)
    parts = demangle_v0(symbol[1]) if symbol else None
    if parts:
        return parts[0], (parts[1] if len(parts) > 1 else None) if parts[0] == "plantstore" else None
    if input_section.startswith((".eh_frame", ".gcc_except_table")):
        return "unwind", None
    if archive is not None:
        # C and assembly of a crate (ring's): not part of the LTO object.
        return archive[1], None
    return "constants", None


def tally(path):
    crates, modules, total = {}, {}, 0
    for _, input_section, size, file in sections(path):
        crate, module = attribute(input_section, file)
        crates[crate] = crates.get(crate, 0) + size
        if crate == "plantstore":
            module = module or "root"
            modules[module] = modules.get(module, 0) + size
        total += size
    return crates, modules, total


def table(rows, total, what):
    out = [f"| {what} | bytes | KiB | share |", "|---|--:|--:|--:|"]
    for name, size in rows:
        out.append(f"| {name} | {size:,} | {size / 1024:,.1f} | {100 * size / total:.1f}% |")
    return out


def main(argv):
    if len(argv) != 5:
        raise SystemExit(__doc__)
    path, title, prefix, figures_out = argv[1:]
    crates, modules, total = tally(path)
    if total == 0:
        raise SystemExit(f"bench/linkmap.py: no sections read from {path}")
    named = sorted(((c, s) for c, s in crates.items() if c not in SPECIAL), key=lambda r: -r[1])
    shown, rest = named[:CRATES_SHOWN], named[CRATES_SHOWN:]
    rows = shown + [(k, crates[k]) for k in ("constants", "unwind", "runtime") if k in crates]
    if rest:
        rows.append(("other-crates", sum(s for _, s in rest)))
    print(f"### {title}: crates ({total:,} bytes of sections; the {len(rest)} other crates in one row)")
    print()
    print("\n".join(table([(SPECIAL.get(n, n), s) for n, s in rows], total, "crate")))
    print()
    print(f"### {title}: plantstore's modules ({crates.get('plantstore', 0):,} bytes)")
    print()
    print("\n".join(table([(SPECIAL.get(n, n), m) for n, m in sorted(modules.items(), key=lambda r: -r[1])],
                           total, "module")))
    print()
    with open(figures_out, "w", encoding="utf-8") as out:
        for name, size in rows:
            out.write(f"{prefix}crate.{name} {size}\n")
        for name, size in modules.items():
            out.write(f"{prefix}module.{name} {size}\n")


if __name__ == "__main__":
    main(sys.argv)
