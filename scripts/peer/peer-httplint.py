"""REDbot, a linter for HTTP written by others, run against the server's GET
routes: each URL is fetched with REDbot's own client, its response linted
(headers, caching, framing, content) and its active checks run (gzip
negotiation, If-None-Match and If-Modified-Since revalidation with the
validators received, Range when Accept-Ranges says bytes), every answer
linted too. REDbot sends a Range request only where Accept-Ranges offers
one, so each URL is also fetched once with `Range: bytes=0-9` and that
answer linted (ignoring Range is allowed; a 206 must be right).

Usage: peer-httplint.py BASE_URL TOKEN PATH... (a PATH starting with '+'
is sent with `Authorization: Bearer TOKEN`, the API's routes; the page's
files, /openapi.json and /healthz need none). Prints per URL the counts by
level and each warning and error; exits 1 if any error-level note ("bad")
is not on ALLOWED, a warning in REQUIRED is found (a missing Date), or a
fetch failed, 0 otherwise. Every fetch is bounded
by DEADLINE seconds in all.

Run by scripts/peer/peer-httplint.sh, which installs REDbot and starts the
server.
"""

import sys
from configparser import ConfigParser

import thor
from httplint.note import levels
from redbot.resource import HttpResource

DEADLINE = 60

# Error-level notes judged harmless, by note id (REDbot's class name) and
# the path they are allowed on ('*': every path), each with why. Keep it
# short: an entry here hides that note from CI for good.
ALLOWED: dict[tuple[str, str], str] = {}

# Warning-level notes that fail all the same, by note id: an answer
# without `Date` (RFC 9110 6.6.1: an origin server with a clock sends it;
# httplint only warns).
REQUIRED = {"DATE_CLOCKLESS", "NO_DATE_304"}


def config():
    # enable_local_access: REDbot refuses loopback addresses by default (it
    # is meant to run as a public service); here loopback is the point.
    parser = ConfigParser()
    parser.read_dict({"redbot": {"enable_local_access": "True"}})
    return parser["redbot"]


RANGE = "bytes=0-9"


def start(base, token, spec):
    """The checks of one URL: (path, label, resource) for REDbot's run and
    for the Range request."""
    path = spec.lstrip("+")
    headers = [("Authorization", f"Bearer {token}")] if spec.startswith("+") else []
    checks = []
    for label, extra, active in [(path, [], True), (f"{path} [Range: {RANGE}]", [("Range", RANGE)], False)]:
        resource = HttpResource(config(), active_checks_enabled=active)
        resource.set_request(base + path, headers=headers + extra)
        checks.append((path, label, resource))
    return checks


def notes_of(resource):
    """Every note of the resource and of its active checks' own answers
    (a 304 or 206 is linted as a response in its own right), with their
    subnotes, each once."""
    seen, found = set(), []
    fetchers = [resource, *resource.subreqs.values()]
    for fetcher in fetchers:
        pending = list(fetcher.response.notes)
        while pending:
            note = pending.pop(0)
            pending.extend(note.subnotes)
            key = (type(note).__name__, note.summary)
            if key not in seen:
                seen.add(key)
                found.append(note)
    return found


def report(path, label, resource, warnings):
    """Prints the URL's summary, notes its warnings in `warnings` (note id
    to labels); returns its failures."""
    failures = []
    for fetcher in [resource, *resource.subreqs.values()]:
        if fetcher.fetch_error is not None:
            error = fetcher.fetch_error
            detail = f" ({error.detail})" if error.detail else ""
            failures.append(f"fetch failed ({fetcher.check_name}): {error.desc}{detail}")
    if not resource.check_done:
        failures.append(f"not finished within {DEADLINE} s")
    # A refusal (a wrong token, the page turned off) would lint clean and
    # check nothing of the route.
    status = resource.response.status_code
    if status is not None and status not in ((200, 206) if "Range" in label else (200,)):
        failures.append(f"status {status}: not the route's answer")
    notes = notes_of(resource)
    counts = {level: 0 for level in levels}
    for note in notes:
        counts[note.level] += 1
    summary = ", ".join(f"{counts[level]} {level.value}" for level in levels)
    print(f"{label}: {status}; {summary}")
    for failure in failures:
        print(f"    FAIL     {failure}")
    for note in notes:
        name = type(note).__name__
        if note.level == levels.WARN and name in REQUIRED:
            print(f"    FAIL     {name}: {note.summary}")
            failures.append(f"{name}: {note.summary}")
        elif note.level == levels.WARN:
            warnings.setdefault(f"{name}: {note.summary}", []).append(label)
        elif note.level == levels.BAD:
            reason = ALLOWED.get((path, name)) or ALLOWED.get(("*", name))
            if reason:
                print(f"    allowed  {name}: {note.summary} ({reason})")
            else:
                print(f"    FAIL     {name}: {note.summary}")
                failures.append(f"{name}: {note.summary}")
    return failures


def main():
    if len(sys.argv) < 4:
        sys.exit("usage: peer-httplint.py BASE_URL TOKEN PATH...")
    base, token = sys.argv[1].rstrip("/"), sys.argv[2]
    checks = [check for spec in sys.argv[3:] for check in start(base, token, spec)]
    pending = {id(resource) for _, _, resource in checks}

    def finished(resource):
        pending.discard(id(resource))
        if not pending:
            thor.stop()

    for _, _, resource in checks:
        resource.on("check_done", lambda resource=resource: finished(resource))
        resource.check()
    thor.schedule(DEADLINE, thor.stop)
    thor.run()

    failed, warnings = {}, {}
    for path, label, resource in checks:
        failures = report(path, label, resource, warnings)
        if failures:
            failed[label] = failures
    for warning, labels in warnings.items():
        print(f"warning {warning}\n    on {len(labels)} of {len(checks)}: {', '.join(labels)}")
    if failed:
        count = sum(map(len, failed.values()))
        print(f"peer-httplint: FAIL: {count} finding(s) on {len(failed)} of {len(checks)} fetches")
        sys.exit(1)
    print(f"peer-httplint: {len(checks)} fetches of {len(sys.argv) - 3} URLs, no error-level note")


if __name__ == "__main__":
    main()
