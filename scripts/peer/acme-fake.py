#!/usr/bin/env python3
"""A refusing ACME CA for scripts/peer/acme.sh (pebble cannot answer rate
limits or server errors): HTTPS on loopback with a test certificate, a
directory, nonces, accounts made without question (no signature is
checked: nothing here is trusted), and then every order refused, as
MODE says:

  ratelimited  newOrder answers 429 urn:ietf:params:acme:error:rateLimited
  500          newAccount and newOrder answer 500 with a text body
  garbage      the directory is an HTML page

Python's standard library only. Prints "listening on 127.0.0.1:PORT" once
it serves; counts each refused order on stdout ("refused order N").

  scripts/peer/acme-fake.py MODE CERT KEY
"""
import http.server
import json
import ssl
import sys

MODE, CERT, KEY = sys.argv[1], sys.argv[2], sys.argv[3]
refused = 0


class Fake(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def base(self):
        return "https://%s:%d" % self.server.server_address[:2]

    def answer(self, status, body=b"", kind="application/json", extra=()):
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Replay-Nonce", "nonce-%d" % id(body))
        for name, value in extra:
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_HEAD(self):
        self.answer(200)

    def do_GET(self):
        if self.path == "/dir" and MODE == "garbage":
            self.answer(200, b"<html><body>It works!</body></html>", "text/html")
        elif self.path == "/dir":
            b = self.base()
            directory = {"newNonce": b + "/nonce", "newAccount": b + "/account",
                         "newOrder": b + "/order"}
            self.answer(200, json.dumps(directory).encode())
        else:
            self.answer(404, b"{}")

    def do_POST(self):
        global refused
        length = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(min(length, 1 << 20))
        if MODE == "500" and self.path in ("/account", "/order"):
            refused += 1
            print("refused order %d" % refused, flush=True)
            self.answer(500, b"internal error, try later", "text/plain")
        elif self.path == "/account":
            self.answer(201, b'{"status":"valid"}',
                        extra=[("Location", self.base() + "/account/1")])
        elif self.path == "/order":
            refused += 1
            print("refused order %d" % refused, flush=True)
            problem = {"type": "urn:ietf:params:acme:error:rateLimited",
                       "detail": "too many certificates for this name this week",
                       "status": 429}
            self.answer(429, json.dumps(problem).encode(), "application/problem+json",
                        [("Retry-After", "3600")])
        else:
            self.answer(404, b"{}")

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Fake)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(CERT, KEY)
server.socket = context.wrap_socket(server.socket, server_side=True)
print("listening on 127.0.0.1:%d" % server.server_address[1], flush=True)
server.serve_forever()
