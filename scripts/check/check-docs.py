"""The docs' examples, run: each fenced block of README.md and docs/*.md
that can run against this server runs against a fresh release binary
(port 0 on loopback; all it started is stopped after the block).

- ```text of `$ command` lines, each followed by what it printed: run in
  one bash, each command must print exactly that.
- ```sh, ```bash or untagged, of curl commands against 127.0.0.1:8080
  and assignments (T=...): each must exit 0, curl with --fail (a status
  of 400 or more fails); an untagged block right after it (blank lines
  between) is what it prints, exactly.
- ```js: an ES module in Node 20 whose fetch resolves a relative URL
  against the server (as on a page it serves) and throws on a status of
  400 or more; it must exit 0 or, reading the change feed, print what its
  setup expects. `EventSource` is the npm `eventsource` package (the
  WHATWG EventSource for Node, as scripts/peer/peer-eventsource.sh installs
  it), its relative URLs resolved the same way. One using what only a
  browser has (the document, storage) is listed as not run.
- An output block with no command (the feed's sample): its setup has it.
Every other block is listed as not run, with the reason.

Setup: an empty store, the token change-me, T='Authorization: Bearer
change-me' (as docs/api.md defines it), an empty working folder. A block
that needs more is preceded by `<!-- check-docs: NAME -->`, NAME a key of
SETUPS (plants seeded, flags, changes made before it or, for a feed
reader, while it reads): the doc names the state in one short line, and
the state is written out once, here.

Compared as printed, except: CRLF is LF (curl -i, -D); the server's real
address is written 127.0.0.1:8080; a feed id's epoch (its start-up time)
is <epoch> on both sides, a Date header's value <date>; blank lines
ending one command's output are dropped (the next prompt starts a line).

Usage: check-docs.py BINARY   (called by scripts/check/check-docs.sh)
"""

import difflib
import json
import os
import re
import select
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

BIN = sys.argv[1]
DOCS = ["README.md"] + sorted(f"docs/{n}" for n in os.listdir("docs") if n.endswith(".md"))
DOC_ADDR, TOKEN, SEP = "127.0.0.1:8080", "change-me", "@@check-docs: end of a command@@"
BROWSER_ONLY = ["document", "window", "sessionStorage", "localStorage"]

CREATE = "curl -s -o /dev/null http://127.0.0.1:8080/plants -H \"$T\" -H 'Content-Type: application/json' -d "
FEED_BEFORE = [CREATE + """'{"id":1,"name":"Monstera"}'""", CREATE + """'{"id":2,"name":"Fern"}'"""]
FEED_DURING = [CREATE + """'{"id":3,"name":"Fern","tag":"green"}'""",
               "curl -s -X DELETE http://127.0.0.1:8080/plants/3 -H \"$T\""]
SETUPS = {
    # docs/api.md's first block reads and replaces the README's plant 1.
    "monstera": dict(seed=[dict(id=1, name="Monstera", tag="tropical")]),
    # docs/api.md's "With six plants stored" (1 as the first block left it).
    "six-plants": dict(seed=[
        dict(id=1, name="Monstera deliciosa"), dict(id=2, name="Boston fern", tag="shade"),
        dict(id=3, name="fern, maidenhair"), dict(id=4, name="Staghorn", tag="Fernlike"),
        dict(id=5, name="Érable du Japon", tag="tree"), dict(id=6, name="Cactus 100%", tag="desert")]),
    # docs/api.md's reset: one plant in the seed.
    "reset": dict(seed=[dict(id=1, name="Monstera", tag="tropical")], flags=["--allow-reset"]),
    "cors": dict(flags=["--cors-origin", "http://localhost:3000", "--cors-origin", "https://plants.example"]),
    # The feed's sample is changes 3 and 4, so two come first; a stream's
    # first message (the last id alone) is not in it.
    "feed": dict(before=FEED_BEFORE, during=FEED_DURING,
                 command='curl -sN http://127.0.0.1:8080/plants/changes -H "$T" | sed -u 1,2d'),
    "feed-js": dict(before=FEED_BEFORE, during=FEED_DURING, expect=[
        "created { id: 3, name: 'Fern', tag: 'green' }", "deleted { id: 3 }"]),
}
JS_PRELUDE = """const checkDocsFetch = globalThis.fetch;
globalThis.fetch = async (url, init) => {
  const res = await checkDocsFetch(new URL(url, process.env.BASE), init);
  if (res.status >= 400) throw new Error(
    `${init?.method ?? 'GET'} ${url}: ${res.status} ${await res.text()}`);
  return res;
};
import { createRequire as checkDocsRequire } from 'node:module';
const { EventSource: CheckDocsEventSource } =
  checkDocsRequire(import.meta.url)(process.env.EVENTSOURCE);
globalThis.EventSource = class extends CheckDocsEventSource {
  constructor(url, init) { super(new URL(url, process.env.BASE), init); }
};
"""
STARTED = []  # every process started (each leads a process group), stopped after each block
signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so that every finally runs


def start(argv, **kw):
    STARTED.append(subprocess.Popen(argv, start_new_session=True, **kw))
    return STARTED[-1]


def stop(proc):
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if proc.poll() is None:
            os.killpg(proc.pid, sig)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                pass


def stop_all():
    while STARTED:
        stop(STARTED.pop())


def blocks(path):
    """Each fenced block (indented ones too): where, language, lines, the
    check-docs setup just before it, and whether only blank lines part it
    from the last."""
    lines, i, last_end, note = open(path, encoding="utf-8").read().split("\n"), 0, None, None
    while i < len(lines):
        m = re.fullmatch(r"( *)```([\w+-]*)\s*", lines[i])
        if m is None:
            c = re.fullmatch(r"\s*<!-- check-docs: (\S+) -->\s*", lines[i])
            note = c.group(1) if c else (note if not lines[i].strip() else None)
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if re.fullmatch(r" *```\s*", lines[j])), len(lines))
        adjacent = last_end is not None and not "".join(lines[last_end + 1:i]).strip()
        body = [line[len(m.group(1)):] for line in lines[i + 1:end]]
        yield dict(where=f"{path}:{i + 1}", lang=m.group(2), lines=body, setup=note, adjacent=adjacent)
        last_end, i, note = end, end + 1, None


def commands(lines):
    """The logical commands of a shell block (continued lines joined)."""
    out, cur = [], ""
    for line in lines:
        if cur or (line.strip() and not line.lstrip().startswith("#")):
            cur += line + "\n"
            if not re.search(r"(\\|&&|\|\||\|)\s*$", line):
                out, cur = out + [cur.rstrip("\n")], ""
    return out + ([cur] if cur else [])


def shell_reason(cmds):
    """Why a shell block is not run, or None if it is."""
    for cmd in cmds:
        try:
            words = shlex.split(cmd, comments=True)
        except ValueError:
            return "not a shell command"
        first = next((w for w in words if not re.fullmatch(r"[A-Za-z_]\w*=.*", w, re.S)), None)
        if first not in (None, "curl"):
            return f"not only curl commands (runs {first})"
        if first == "curl" and f"http://{DOC_ADDR}" not in cmd:
            return "curl to another host than this server"
    return None if any(c.startswith("curl") for c in cmds) else "no curl command"


class Server:
    """A fresh release binary on a loopback port, set up as SETUPS says."""

    def __init__(self, setup, tmp):
        self.setup, self.tmp = SETUPS.get(setup, {}), tmp
        args = list(self.setup.get("flags", []))
        if "seed" in self.setup:
            with open(os.path.join(tmp, "seed.ndjson"), "w", encoding="utf-8") as f:
                f.writelines(json.dumps(p, ensure_ascii=False) + "\n" for p in self.setup["seed"])
            args += ["--seed", f.name]
        self.log = os.path.join(tmp, "server.log")
        with open(self.log, "w") as log:
            self.proc = start([BIN, "--addr", "127.0.0.1:0", *args], stderr=log,
                              env=dict(os.environ, PLANTSTORE_TOKEN=TOKEN))
        for _ in range(100):
            m = re.search(r"listening on http://([^,\s]+)", open(self.log).read())
            if m or self.proc.poll() is not None:
                break
            time.sleep(0.05)
        if not m:
            raise RuntimeError("the server did not start:\n" + open(self.log).read())
        self.addr = m.group(1)
        self.env = dict(os.environ, T=f"Authorization: Bearer {TOKEN}", BASE=f"http://{self.addr}")

    def bash(self, script, stream=False):
        """Runs a script written for 127.0.0.1:8080 against this server, in
        a process group of its own (stopped whole on a timeout)."""
        proc = start(["bash", "-c", script.replace(DOC_ADDR, self.addr)], cwd=self.tmp, env=self.env,
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if stream:
            return proc
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            stop(proc)
            out, err = proc.communicate()
            err += b"check-docs: timed out after 30 s\n"
        return subprocess.CompletedProcess(proc.args, proc.returncode, out.decode(), err.decode())

    def subscribed(self):
        """Waits until the change feed has its reader (so it misses nothing)."""
        req = urllib.request.Request(f"http://{self.addr}/metrics",
                                     headers={"Authorization": f"Bearer {TOKEN}"})
        for _ in range(100):
            if "\nplantstore_feed_subscribers 1" in urllib.request.urlopen(req, timeout=5).read().decode():
                return
            time.sleep(0.05)
        raise RuntimeError("the change feed got no reader in 5 s")

    def normal(self, text):
        text = text.replace("\r\n", "\n").replace(self.addr, DOC_ADDR)
        text = re.sub(r"^Date: [A-Z][a-z]{2}, \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d GMT$",
                      "Date: <date>", text, flags=re.M)
        return re.sub(r"\b\d{10,}-(\d+)\b", r"<epoch>-\1", text)


def per_command(server, cmds, check):
    """Runs the commands in one bash: each one's output, and the result.
    With check, curl has --fail, and a command that exits non-zero is named
    in stderr and fails the run."""
    script = 'curl() { command curl --fail --show-error "$@"; }\nfailed=0\n' if check else ""
    for n, cmd in enumerate(cmds):
        script += f"{cmd}\n"
        if check:
            script += f'r=$?; [ $r -eq 0 ] || {{ failed=1; echo "exit $r:" {shlex.quote(cmd)} >&2; }}\n'
        script += f"printf '\\n{SEP}\\n'\n"
    r = server.bash(script + ("exit $failed\n" if check else ""))
    return [p.rstrip("\n") for p in server.normal(r.stdout).split(f"\n{SEP}\n")[:len(cmds)]], r


def compare(where, expected, actual, stderr=""):
    if expected != actual:
        label = where if "(" in where else f"{where} (as documented)"
        diff = difflib.unified_diff(expected.split("\n"), actual.split("\n"), label,
                                    "as run", lineterm="")
        print("\n".join(diff) + (f"\nstderr:\n{stderr}" if stderr.strip() else ""))
    return expected == actual


def transcript(server, block):
    entries = []
    for line in block["lines"]:
        if line.startswith("$ "):
            entries.append([line[2:], []])
        elif entries:
            entries[-1][1].append(line)
    outputs, r = per_command(server, [cmd for cmd, _ in entries], check=False)
    render = lambda outs: "\n\n".join(f"$ {c}\n{o}".rstrip("\n") for (c, _), o in zip(entries, outs))
    expected = render([server.normal("\n".join(out)).rstrip("\n") for _, out in entries])
    return compare(block["where"], expected, render(outputs), r.stderr), f"{len(entries)} commands"


def shell(server, block, output):
    cmds = commands(block["lines"])
    outputs, r = per_command(server, cmds, check=True)
    if r.returncode:
        print(f"{block['where']}: a command failed (exit {r.returncode}):\n{r.stderr}")
    ok = r.returncode == 0
    if output is not None:
        actual = "\n".join(o for o in outputs if o)
        ok = compare(output["where"], server.normal("\n".join(output["lines"])).rstrip("\n"), actual) and ok
    return ok, f"{len(cmds)} commands" + (f", printing {output['where']}" if output else "")


def stream(server, where, proc, expected):
    """Makes the setup's changes while the block's reader reads; compares
    what it printed 0.3 s after it printed as many lines (or after 5 s)."""
    out = b""
    try:
        server.subscribed()
        r = per_command(server, server.setup["during"], check=True)[1]
        if r.returncode:
            print(f"{where}: a change of its setup failed:\n{r.stderr}")
            return False
        deadline, settled = time.monotonic() + 5, False
        while time.monotonic() < deadline:
            if select.select([proc.stdout], [], [], 0.05)[0]:
                chunk = os.read(proc.stdout.fileno(), 65536)
                if not chunk:
                    break
                out += chunk
            if not settled and out.count(b"\n") > expected.count("\n"):
                deadline, settled = time.monotonic() + 0.3, True
    finally:
        stop(proc)
    actual = server.normal(out.decode(errors="replace")).rstrip("\n")
    return compare(where, expected, actual, proc.stderr.read().decode())


def kind_of(block):
    """What a block is to this check, or why it is not run."""
    lang, setup = block["lang"], SETUPS.get(block["setup"], {})
    if block["setup"] is not None and block["setup"] not in SETUPS:
        raise SystemExit(f"check-docs: {block['where']}: no setup {block['setup']!r} in SETUPS")
    if lang == "js":
        used = [w for w in BROWSER_ONLY if re.search(rf"\b{w}\b", "\n".join(block["lines"]))]
        return ("js", None) if not used else (None, f"js: uses what only a browser has ({', '.join(used)})")
    if "command" in setup:
        return "command", None
    if lang == "text" and any(line.startswith("$ ") for line in block["lines"]):
        return "transcript", None
    if lang not in ("sh", "bash", ""):
        return None, f"{lang}: output, data or another language, not a command"
    why = shell_reason(commands(block["lines"]))
    if why and not lang and not why.startswith("curl"):
        return None, "untagged: output or data, not a command"
    return ("shell", None) if why is None else (None, f"{lang or 'untagged'}: {why}")


def run(server, kind, block, output):
    """Runs one block on its server: (passed, what was checked)."""
    r = per_command(server, server.setup.get("before", []), check=True)[1]
    if r.returncode:
        print(f"{block['where']}: its setup failed:\n{r.stderr}")
        return False, "its setup"
    if kind == "js":
        path = os.path.join(server.tmp, "example.mjs")
        with open(path, "w", encoding="utf-8") as f:
            f.write(JS_PRELUDE + "\n".join(block["lines"]).replace(DOC_ADDR, server.addr) + "\n")
        if "expect" in server.setup:
            proc = server.bash(f"exec node {path}", stream=True)
            label = f"{block['where']} (as SETUPS[{block['setup']!r}] expects)"
            return stream(server, label, proc, "\n".join(server.setup["expect"])), "prints the feed's changes"
        r = server.bash(f"node {path}")
        if r.returncode:
            print(f"{block['where']}: node exited {r.returncode}:\n{r.stderr}")
        return r.returncode == 0, "exits 0"
    if kind == "command":
        proc = server.bash(server.setup["command"], stream=True)
        expected = server.normal("\n".join(block["lines"])).rstrip("\n")
        return stream(server, block["where"], proc, expected), "printed by its setup's command"
    return transcript(server, block) if kind == "transcript" else shell(server, block, output)


def check(block, following):
    """Checks one block: (passed, or None if not run; what or why; whether
    the following block was its output)."""
    kind, why = kind_of(block)
    if kind is None:
        return None, why, False
    printed = kind == "shell" and following and not following["lang"] and following["adjacent"]
    output = following if printed else None
    with tempfile.TemporaryDirectory() as tmp:
        try:  # an error fails its block alone
            return (*run(Server(block["setup"], tmp), kind, block, output), output is not None)
        except Exception as e:
            print(f"{block['where']}: {type(e).__name__}: {e}")
            return False, "error", False
        finally:
            stop_all()


def main():
    started, ran, failed, skipped = time.monotonic(), 0, [], {}
    for path in DOCS:
        found, taken = list(blocks(path)), set()
        for n, block in enumerate(found):
            if n in taken:
                continue
            passed, what, consumed = check(block, found[n + 1] if n + 1 < len(found) else None)
            taken |= {n + 1} if consumed else set()
            if passed is None:
                skipped.setdefault(what, []).append(block["where"])
                continue
            ran += 1
            failed += [] if passed else [block["where"]]
            print(f"{'ok  ' if passed else 'FAIL'} {block['where']} {block['lang'] or 'untagged'}: {what}")
    for why, where in sorted(skipped.items()):
        print(f"not run ({why}): {' '.join(where)}")
    print(f"check-docs: {ran} blocks run, {len(failed)} failed{''.join(' ' + f for f in failed)}; "
          f"{sum(map(len, skipped.values()))} not run (listed above); {time.monotonic() - started:.1f} s")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    try:
        main()
    finally:
        stop_all()
