"""The two halves of a soak cycle (see scripts/stress/soak.sh), sharing a model
of what every plant may be, kept in STATE (JSON) between runs.

  soak.py check STATE ADDR TOKEN
      Lists every plant and compares it with the model: a plant whose last
      change was acknowledged must be exactly as acknowledged (absent after
      an acknowledged delete); one with a change in flight when the server
      was killed may be either as before it or as after it. A plant the
      model never wrote must not exist. Prints one line of figures, settles
      the uncertain entries on what was found, and exits 1 on any mismatch.

  soak.py write STATE ADDR TOKEN CYCLE SEED ACKS READY
      Several threads, each on ids of its own, send creates, replaces and
      deletes (one connection each, keep-alive) until the server dies.
      Every 2xx is appended to ACKS and made the id's one allowed state; a
      request cut off without an answer allows both states. READY is
      created once every thread has sent its first request. Exits 1 on an
      answer that no kill explains (a 4xx, a 5xx).

STATE maps each id to its allowed states (null for absent, else
{"name", "tag"?}); ids settled as absent are dropped from it.
"""

import http.client
import json
import os
import random
import sys
import threading
import time

WRITERS = 4
# Live plants a writer keeps at most: replaces and deletes then outnumber
# creates, so the journal grows past its live data and gets compacted.
LIVE_MAX = 150
# A writer gives up this long after it started, whether or not the server
# died (the script kills it well before).
WRITE_LIMIT = 30.0
TAGS = [None, "fern", "cactus", "ŝtono", "🌵"]


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return {"next": {}, "allowed": {}, "acked": 0}


def save(path, state):
    with open(path + ".tmp", "w") as f:
        json.dump(state, f)
    os.replace(path + ".tmp", path)


def connect(addr):
    host, port = addr.rsplit(":", 1)
    return http.client.HTTPConnection(host, int(port), timeout=10)


def list_all(addr, token):
    """Every plant the server lists, by id (as a string, as in STATE)."""
    conn, found, after = connect(addr), {}, None
    while True:
        path = "/plants?limit=1000" + ("" if after is None else f"&after={after}")
        conn.request("GET", path, headers={"Authorization": f"Bearer {token}"})
        reply = conn.getresponse()
        body = reply.read()
        if reply.status != 200:
            sys.exit(f"GET {path}: {reply.status} {body[:200]!r}")
        page = json.loads(body)
        for plant in page:
            state = {"name": plant["name"]}
            if "tag" in plant:
                state["tag"] = plant["tag"]
            found[str(plant["id"])] = state
        if not page or reply.getheader("link") is None:
            return found
        after = page[-1]["id"]


def check(state_path, addr, token):
    state = load(state_path)
    allowed = state["allowed"]
    found = list_all(addr, token)
    wrong, uncertain = [], 0
    for id, states in allowed.items():
        if len(states) > 1:
            uncertain += 1
        now = found.get(id)
        if now not in states:
            wrong.append(f"id {id}: found {now}, allowed {states}")
    phantoms = [id for id in found if id not in allowed]
    wrong += [f"id {id}: found {found[id]}, never written" for id in phantoms]
    for line in wrong[:20]:
        print("LOST " + line)
    state["allowed"] = {id: [found[id]] for id in allowed if id in found}
    save(state_path, state)
    print(f"checked {len(allowed)} ids ({uncertain} in flight at the kill), "
          f"{len(found)} plants, {len(wrong)} wrong")
    sys.exit(1 if wrong else 0)


class Writer(threading.Thread):
    def __init__(self, n, state, addr, token, cycle, seed, acks, started):
        super().__init__(daemon=True)
        self.n, self.addr, self.token, self.cycle = n, addr, token, cycle
        self.rng = random.Random(seed * 31 + n)
        self.acks, self.started = acks, started
        self.base = (n + 1) * 10**12
        self.next = state["next"].get(str(n), self.base)
        self.allowed = {id: s for id, s in state["allowed"].items()
                        if self.base <= int(id) < self.base + 10**12}
        self.acked, self.error = 0, None

    def body(self, name):
        tag = self.rng.choice(TAGS)
        plant = {"name": name} if tag is None else {"name": name, "tag": tag}
        return plant, json.dumps(plant)

    def step(self, conn, k):
        live = [id for id, s in self.allowed.items() if s[0] is not None]
        roll = self.rng.random()
        name = f"c{self.cycle}-w{self.n}-{k} ĉe 🌱"
        if not live or (roll < 0.4 and len(live) < LIVE_MAX):
            self.next += 1
            id = str(self.next)
            after, body = self.body(name)
            body = json.dumps({"id": self.next, **after})
            method, path, ok = "POST", "/plants", 200
        elif roll < 0.7:
            id = self.rng.choice(live)
            after, body = self.body(name)
            method, path, ok = "PUT", f"/plants/{id}", 200
        else:
            id = self.rng.choice(live)
            after, body = None, None
            method, path, ok = "DELETE", f"/plants/{id}", 204
        before = self.allowed.get(id, [None])[0]
        headers = {"Authorization": f"Bearer {self.token}"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        try:
            conn.request(method, path, body=body, headers=headers)
            self.started.set()
            reply = conn.getresponse()
            text = reply.read()
        except (OSError, http.client.HTTPException):
            # Sent (perhaps in part), no answer: the kill. Either state.
            self.allowed[id] = [before, after]
            return False
        if reply.status != ok:
            self.allowed[id] = [before, after]
            self.error = f"{method} {path}: {reply.status} {text[:200]!r}"
            return False
        self.allowed[id] = [after]
        self.acked += 1
        self.acks.write(f"{method} {id} {json.dumps(after, ensure_ascii=False)}\n")
        return True

    def run(self):
        try:
            conn = connect(self.addr)
            until = time.monotonic() + WRITE_LIMIT
            k = 0
            while time.monotonic() < until and self.step(conn, k):
                k += 1
        except Exception as e:  # a fault of this script: fail the soak
            self.error = f"writer {self.n}: {e!r}"
        finally:
            self.started.set()


def write(state_path, addr, token, cycle, seed, acks_path, ready_path):
    state = load(state_path)
    with open(acks_path, "a", encoding="utf-8") as acks:
        started = [threading.Event() for _ in range(WRITERS)]
        writers = [Writer(n, state, addr, token, cycle, seed, _Locked(acks), started[n])
                   for n in range(WRITERS)]
        for w in writers:
            w.start()
        for s in started:
            s.wait(WRITE_LIMIT)
        open(ready_path, "w").close()
        for w in writers:
            w.join()
    allowed = {}
    for w in writers:
        allowed.update(w.allowed)
        state["next"][str(w.n)] = w.next
        state["acked"] += w.acked
    state["allowed"] = allowed
    save(state_path, state)
    errors = [w.error for w in writers if w.error]
    for e in errors:
        print("writer: unexpected answer: " + e, file=sys.stderr)
    sys.exit(1 if errors else 0)


class _Locked:
    """One acknowledgement log shared by the threads, a line at a time."""

    lock = threading.Lock()

    def __init__(self, f):
        self.f = f

    def write(self, line):
        with self.lock:
            self.f.write(line)


def main():
    if sys.argv[1:2] == ["check"] and len(sys.argv) == 5:
        check(*sys.argv[2:5])
    elif sys.argv[1:2] == ["write"] and len(sys.argv) == 9:
        state, addr, token, cycle, seed, acks, ready = sys.argv[2:9]
        write(state, addr, token, int(cycle), int(seed), acks, ready)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
