"""Judges the findings of testssl (its flat JSON, --jsonfile) for
scripts/peer/peer-testssl.sh: prints counts by severity, the findings allowed
below and why, and the findings that fail; exits 1 when any fails.

    python3 scripts/peer/peer-testssl.py FINDINGS.json

What fails: every finding of severity LOW or above (testssl's scale: OK
and INFO, then LOW, MEDIUM, HIGH, CRITICAL), and every WARN or FATAL
(testssl could not make a check: a check not made is not a pass), unless
the allow-list below names it. LOW is where testssl puts the first real
weakness of a protocol or a cipher (obsolete CBC suites offered, no TLS
1.3), so the line is drawn there. A scan that lacks a finding the chosen
checks always make (REQUIRED) fails too: testssl stopped short.
"""

import json
import re
import sys
from collections import Counter

FAILING = ("LOW", "MEDIUM", "HIGH", "CRITICAL", "WARN", "FATAL")
ORDER = ("OK", "INFO", "DEBUG") + FAILING

# One finding of each group of checks that peer-testssl.sh asks for.
REQUIRED = (
    "TLS1_2",  # -p protocols
    "cipherlist_AVERAGE",  # -s cipher categories
    "PFS",  # -f forward secrecy
    "cipher_order",  # -P server preferences
    "cert_chain_of_trust",  # -S server defaults, the certificate
    "HSTS",  # -h HTTP headers
    "heartbleed",  # -U vulnerabilities, first
    "RC4",  # -U vulnerabilities, last
    "scanTime",  # the scan's end
)

# The cipher categories weaker than AEAD: "not offered" in each means that
# every suite served is AEAD.
WEAKER_THAN_AEAD = (
    "cipherlist_NULL",
    "cipherlist_aNULL",
    "cipherlist_EXPORT",
    "cipherlist_LOW",
    "cipherlist_3DES_IDEA",
    "cipherlist_AVERAGE",
)

# The allow-list: (finding id, its whole text as a regular expression,
# findings that must read "not offered" for the reason to hold, why it is
# harmless). A finding is allowed only when all three match; any other
# text under the same id fails. What a certificate from a public CA would
# make of OCSP stapling, CAA and certificate transparency is no finding
# here: testssl rates them INFO for a certificate that names no OCSP
# responder, and makes no DNS lookups (--nodns none).
ALLOWED = (
    (
        "sessionresumption_ticket",
        r"check failed because of connect problem",
        (),
        "testssl's check races with TLS 1.3: a server sends its session "
        "ticket after the client's Finished, and when openssl s_client, "
        "its input at an end, closes before the ticket arrives, the "
        "session file stays empty and the resuming connection that reads "
        "it fails (testssl's debug output: '0, 1, empty'); 2 of 6 scans of "
        "one server did so, the others answered 'Tickets: yes'",
    ),
    (
        "engine_problem",
        r"No engine or GOST support via engine with your .*openssl",
        (),
        "about the openssl testssl runs here, not the server: GOST suites "
        "are no part of what is served",
    ),
    (
        "cipher_order",
        r"NOT a cipher order configured",
        WEAKER_THAN_AEAD,
        "the client's order is followed on purpose: every suite served is "
        "AEAD (the weaker categories must read 'not offered'), so no "
        "client can be steered to a weak one, and a client that puts "
        "ChaCha20-Poly1305 first, as browsers on chips without AES "
        "instructions do, gets it (the fast suite on a Raspberry Pi too)",
    ),
    (
        "HSTS",
        r"not offered",
        (),
        "the server sends no Strict-Transport-Security: a browser that saw "
        "it refuses any certificate warning for that name for its max-age, "
        "and a board is often reached by a self-signed certificate, an IP "
        "address or a .local name; it stays the operator's choice (a proxy "
        "in front adds it) until the server gets certificates that browsers "
        "trust by themselves",
    ),
    (
        "cert_chain_of_trust",
        r"failed \(self signed\)\.?",
        (),
        "the certificate is a throwaway one made for the scan",
    ),
    (
        "cert_revocation",
        r"Neither CRL nor OCSP URI provided",
        (),
        "the throwaway certificate names no CRL or OCSP responder; "
        "revocation is the CA's business",
    ),
)


def allowed(finding, by_id):
    """Why `finding` is harmless, or None when it is not allowed."""
    text = finding.get("finding", "").strip()
    for ident, pattern, requires, why in ALLOWED:
        if finding["id"] != ident or not re.fullmatch(pattern, text):
            continue
        if all(by_id.get(r) == "not offered" for r in requires):
            return why
    return None


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        findings = json.load(f)
    by_id = {f["id"]: f.get("finding", "").strip() for f in findings}
    counts = Counter(f["severity"] for f in findings)
    failed, allowed_ones = [], []
    for f in findings:
        if f["severity"] not in FAILING:
            continue
        why = allowed(f, by_id)
        (allowed_ones if why else failed).append((f, why))
    missing = [r for r in REQUIRED if r not in by_id]

    print("testssl findings by severity:", end="")
    for severity in sorted(counts, key=lambda s: (ORDER + (s,)).index(s)):
        print(f" {severity} {counts[severity]}", end="")
    print()
    print(f"allowed ({len(allowed_ones)}):")
    for f, why in allowed_ones:
        print(f"  {f['severity']:8} {f['id']}: {f['finding']}\n           why: {why}")
    print(f"failed ({len(failed)}):")
    for f, _ in failed:
        print(f"  {f['severity']:8} {f['id']}: {f['finding']}")
    if missing:
        print("the scan stopped short; no finding for: " + ", ".join(missing))
    return 1 if failed or missing else 0


if __name__ == "__main__":
    sys.exit(main())
