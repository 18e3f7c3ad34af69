"""A deliberately broken HTTP server, the subject that shows
scripts/peer/peer-httplint.sh fails when HTTP is wrong: each MODE breaks one
thing on every GET (POST /plants, which the script makes first, is
answered plainly):

  header    a header whose name holds a space
  length    a Content-Length larger than the body, then the close
  date      a Date that is not an HTTP date
  etag      a strong ETag that stays while the body changes
  range     a 206 whose Content-Range names other bytes than it sends

Usage: python3 tests/peer/broken-http.py MODE (binds 127.0.0.1:0 and
prints "listening on http://ADDR"; stop it with a signal). Only for
showing the check fails: nothing runs it in CI.
"""

import itertools
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODES = ("header", "length", "date", "etag", "range")
counter = itertools.count()


def answer(handler, status, headers, body):
    """Writes the answer as given, framing included, so it can be wrong."""
    head = [f"HTTP/1.1 {status} Whatever"] + [f"{n}: {v}" for n, v in headers]
    handler.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
    handler.close_connection = True


class Broken(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = b'{"name":"Fern"}'
        answer(self, 200, [("Content-Type", "application/json"), ("Content-Length", len(body))], body)

    def do_GET(self):
        mode = self.server.mode
        body = b'{"status":"ok","padding":"0123456789abcdef0123456789abcdef"}'
        headers = [("Content-Type", "application/json"), ("Cache-Control", "no-cache")]
        status = 200
        if mode == "header":
            headers.append(("X Broken", "yes"))
        elif mode == "length":
            headers.append(("Content-Length", len(body) + 10))
            answer(self, status, headers + [("Connection", "close")], body)
            return
        elif mode == "date":
            headers.append(("Date", "yesterday"))
        elif mode == "etag":
            headers.append(("ETag", '"same"'))
            body = b'{"answer":%d}' % next(counter)
        elif mode == "range":
            headers.append(("Accept-Ranges", "bytes"))
            if self.headers.get("Range"):
                status = 206
                headers.append(("Content-Range", f"bytes 0-9/{len(body)}"))
                body = body[5:15]
        answer(self, status, headers + [("Content-Length", len(body))], body)

    def log_message(self, *args):
        pass


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in MODES:
        sys.exit(f"usage: broken-http.py {{{'|'.join(MODES)}}}")
    server = ThreadingHTTPServer(("127.0.0.1", 0), Broken)
    server.mode = sys.argv[1]
    host, port = server.server_address
    print(f"listening on http://{host}:{port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
