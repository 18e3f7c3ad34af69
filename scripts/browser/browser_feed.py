"""The built-in page on the change feed with EventSource and a ticket, and
a read token's page (scripts/browser/browser.py runs it).

FEED_API is a server started with --ticket-ttl 2 and a token file holding
TOKEN (read and write) and READ_TOKEN (read). The page is loaded through a
loopback TCP proxy run here (threads of this process, closed at the end),
which sees every request the page sends and the answers to its feed
requests, and can cut the page's feed and hold it back until let through.
docs/browsers.md's follower (`followChanges`) runs in a tab of its own,
through a second such proxy, and goes through the same steps.

1. Signed in with TOKEN, the page mints a ticket and opens the feed with
   `?ticket=` (the token nowhere in its URL) and shows its edit controls;
   a plant added from Python, straight to the server, shows (by the feed's
   event alone: the refresh when the stream opened is over by then).
2. The proxies cut the feed and hold it back while a plant is added; the
   page must not list it yet. Once EventSource has tried to reconnect and
   the server refuses the first ticket (expired), they let it through:
   EventSource's own reconnection with the old ticket gets a 401, a new
   ticket is minted and a new stream opened with `lastEventId` the last
   event seen, whose events are exactly the change made while cut off and
   one made after (nothing lost, nothing repeated, no reset), and the
   page lists them.
3. Forget, then READ_TOKEN: the page lists the plants with no add form and
   no Edit or Delete button (none in the document), and still follows the
   feed. The follower has seen every change once, in order. No console
   error but the feed's own failed loads.
"""

import os
import re
import socket
import threading
import time
import urllib.parse
import urllib.request

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from browser_page import Page, api, check, fail, severe

FEED = "/plants/changes"
TICKETS = "/plants/changes/tickets"
REQUEST = re.compile(rb"(GET|HEAD|POST|PUT|DELETE|OPTIONS) (/\S*) HTTP/1\.1\r\n")
KEPT = 1 << 20  # the most bytes of one feed answer kept


class Request:
    """One request the page sent through the proxy, and for a feed request
    the answer's bytes (at most KEPT)."""

    def __init__(self, method, target):
        self.method = method
        self.target = target
        self.path, _, query = target.partition("?")
        self.query = dict(urllib.parse.parse_qsl(query))
        self.answer = b""

    def feed(self):
        return self.method == "GET" and self.path == FEED

    def status_and_events(self):
        """The answer's status (None before its head) and its events, as
        (id, event, data), leaving out the id sent alone and a partial one."""
        head, _, body = self.answer.partition(b"\r\n\r\n")
        if not _:
            return None, []
        status = int(head.split(b" ", 2)[1])
        if b"transfer-encoding: chunked" in head.lower():
            body = dechunk(body)
        events = []
        for block in body.decode("utf-8", "replace").split("\n\n")[:-1]:
            fields = dict(line.split(": ", 1) for line in block.split("\n") if ": " in line)
            if "event" in fields:
                events.append((fields.get("id"), fields["event"], fields.get("data")))
        return status, events


def dechunk(body):
    """The complete chunks of a chunked body, joined."""
    out = b""
    while (eol := body.find(b"\r\n")) >= 0:
        size = int(body[:eol].split(b";")[0], 16)
        if size == 0 or len(body) < eol + 4 + size:
            break
        out += body[eol + 2 : eol + 2 + size]
        body = body[eol + 4 + size :]
    return out


class Proxy:
    """A loopback TCP proxy to UPSTREAM (http://host:port) that records the
    requests passed through it; `cut` closes the connections whose latest
    request is the feed and holds new feed requests back until `restore`
    (so a reconnection made while cut off reaches the server at once
    after, not at EventSource's next try, seconds later)."""

    def __init__(self, upstream):
        url = urllib.parse.urlsplit(upstream)
        self.upstream = (url.hostname, url.port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.base = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.lock = threading.Lock()
        self.requests = []
        self.latest = {}  # a connection's sockets -> its latest Request
        self.through = threading.Event()  # clear while cut off
        self.through.set()
        self.held = 0
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return  # closed
            try:
                server = socket.create_connection(self.upstream, timeout=5)
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            pair = (client, server)
            with self.lock:
                self.latest[pair] = None
            threading.Thread(target=self.up, args=(pair,), daemon=True).start()
            threading.Thread(target=self.down, args=(pair,), daemon=True).start()

    def up(self, pair):
        """Client to server: each request line recorded (a feed request
        held back while cut off) before its bytes go on."""
        client, server = pair
        pending = b""
        while data := receive(client):
            pending += data
            for found in REQUEST.finditer(pending):
                request = Request(found[1].decode(), found[2].decode())
                with self.lock:
                    self.requests.append(request)
                    self.latest[pair] = request
                    if request.feed() and not self.through.is_set():
                        self.held += 1
                pending = pending[found.end() :]
            pending = pending[-8192:]
            with self.lock:
                current = self.latest.get(pair)
            if current and current.feed():
                self.through.wait(30)
            if not send(server, data):
                break
        self.drop(pair)

    def down(self, pair):
        """Server to client: a feed request's answer kept."""
        client, server = pair
        while data := receive(server):
            with self.lock:
                request = self.latest.get(pair)
                if request and request.feed() and len(request.answer) < KEPT:
                    request.answer += data
            if not send(client, data):
                break
        self.drop(pair)

    def drop(self, pair):
        with self.lock:
            self.latest.pop(pair, None)
        for sock in pair:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def cut(self):
        with self.lock:
            self.through.clear()
            feeds = [pair for pair, request in self.latest.items() if request and request.feed()]
        for pair in feeds:
            self.drop(pair)
        return len(feeds)

    def restore(self):
        self.through.set()

    def seen(self, method, path):
        with self.lock:
            return [r for r in self.requests if r.method == method and r.path == path]

    def close(self):
        self.listener.close()
        self.through.set()
        with self.lock:
            pairs = list(self.latest)
        for pair in pairs:
            self.drop(pair)


def receive(sock):
    try:
        return sock.recv(65536)
    except OSError:
        return b""


def send(sock, data):
    try:
        sock.sendall(data)
        return True
    except OSError:
        return False


def until(what, test, seconds=10):
    """Waits for `test()` to be true (polling); fails naming `what`."""
    deadline = time.monotonic() + seconds
    while not (found := test()):
        if time.monotonic() > deadline:
            fail(f"{what}: not within {seconds} s")
        time.sleep(0.05)
    return found


def ticket_refused(api_base, ticket):
    """Whether the server now refuses `ticket` on the feed (a HEAD)."""
    url = f"{api_base}{FEED}?ticket={urllib.parse.quote(ticket)}"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=5):
            return False
    except urllib.error.HTTPError as e:
        check(e.code == 401, f"an expired ticket is a {e.code}, not a 401")
        return True


def add(api_base, token, id, name):
    status, _ = api(api_base, token, "POST", "/plants", {"id": id, "name": name})
    check(status == 200, f"adding plant {id}: {status}")


def edit_controls(driver):
    """The add form's display and every Edit or Delete button's text."""
    return driver.execute_script(
        "return [getComputedStyle(document.getElementById('add')).display,"
        " [...document.querySelectorAll('#list button')].map((b) => b.textContent)"
        ".filter((t) => t === 'Edit' || t === 'Delete')]"
    )


def example():
    """docs/browsers.md's follower: the first js block of its section."""
    docs = open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "browsers.md")).read()
    _, heading, section = docs.partition("\n## The change feed from a page\n")
    check(heading, "docs/browsers.md has no section 'The change feed from a page'")
    found = re.search(r"```js\n(.*?)```", section, re.S)
    check(found and "function followChanges(" in found[1], "no followChanges in docs/browsers.md")
    return found[1]


def check_feed(driver, api_base, token, reader):
    """Runs the checks of this file's header; the page's and the example's
    tabs are closed and the proxies stopped, pass or fail."""
    started = time.monotonic()
    page_proxy, example_proxy = Proxy(api_base), Proxy(api_base)
    first = driver.current_window_handle
    try:
        # The example in a tab of its own (the page there stays signed out).
        driver.switch_to.new_window("tab")
        driver.get(example_proxy.base + "/")
        driver.execute_script(
            example() + "window.seen = []; followChanges(arguments[0], (e) => seen.push([e.type, e.lastEventId, e.data]));",
            token,
        )
        seen_by_example = driver.current_window_handle
        driver.switch_to.new_window("tab")
        page = Page(driver, page_proxy.base)
        driver.get(page_proxy.base + "/")
        sign_in(page, token)
        switch = follow_across_expiry(page, {"page": page_proxy, "example": example_proxy}, api_base, token)
        read_only(page, page_proxy, api_base, token, reader)
        quiet(driver, "the page")
        driver.switch_to.window(seen_by_example)
        seen = [(t, id, int(re.search(r'"id":(\d+)', d)[1])) for t, id, d in driver.execute_script("return seen")]
        check([(t, p) for t, _, p in seen] == [("created", p) for p in (501, 502, 503, 504)], f"the example saw {seen}")
        quiet(driver, "the example")
        print("browser: ok: docs/browsers.md's follower saw every change once, across the switch")
    finally:
        for handle in driver.window_handles:
            if handle != first:
                driver.switch_to.window(handle)
                driver.close()
        driver.switch_to.window(first)
        page_proxy.close()
        example_proxy.close()
    print(
        f"browser: ok: the page's ticket switch took {switch * 1000:.0f} ms from letting the feed through; "
        f"the feed's checks {time.monotonic() - started:.1f} s"
    )


def quiet(driver, what):
    """No console error but the feed's: cut, refused, or refused a ticket."""
    failed = rf"{FEED}\?ticket=\S+ - Failed to load resource: "
    expected = [failed + r"(net::ERR_INCOMPLETE_CHUNKED_ENCODING|net::ERR_EMPTY_RESPONSE|.*status of 401 )"]
    errors = severe(driver, expected)
    check(not errors, f"console errors in {what} while following the feed: {errors}")


def sign_in(page, token):
    page.visible("#token")
    page.type("#token", token)
    page.find("#login button").click()
    page.visible("#app")


def first_feed(proxy):
    """The one feed request and ticket sent so far, once answered."""
    feeds = until("a feed request", lambda: [r for r in proxy.seen("GET", FEED) if r.answer])
    check(len(feeds) == 1 and len(proxy.seen("POST", TICKETS)) == 1, "one ticket, one feed")
    return feeds[0]


def follow_across_expiry(page, proxies, api_base, token):
    driver = page.driver
    page.wait.until(lambda d: d.find_element(By.ID, "shown").text == "No plants.")
    old = {name: first_feed(proxy) for name, proxy in proxies.items()}
    for name, feed in old.items():
        check(feed.query.keys() == {"ticket"} and token not in feed.target, f"the {name}'s feed URL {feed.target}")
    # A stream opened with no event seen refreshes the listing: past that,
    # only the feed's event can make the page list plant 501.
    time.sleep(0.5)
    add(api_base, token, 501, "Ticket fern")
    page.wait_ids(["501"])
    check(edit_controls(driver) == ["block", ["Edit", "Delete"]], f"a write token's page: {edit_controls(driver)}")
    print("browser: ok: the page follows the feed with EventSource and a ticket, and shows its edit controls")

    last = {}
    for name, feed in old.items():
        events = until(f"the {name}'s event of plant 501", lambda: feed.status_and_events()[1])
        check([e[1] for e in events] == ["created"], f"the {name}'s events before the cut: {events}")
        last[name] = events[-1][0]
    for name, proxy in proxies.items():
        check(proxy.cut() == 1, f"the {name}'s feed was not open when cut")
    add(api_base, token, 502, "Fern added while cut off")
    # Let through once EventSource has tried and its ticket is refused.
    for name, proxy in proxies.items():
        until(f"the {name}'s reconnection while cut off", lambda: proxy.held >= 1)
        until(f"the {name}'s ticket to expire", lambda: ticket_refused(api_base, old[name].query["ticket"]))
    check(page.ids() == ["501"], f"cut off, the page lists {page.ids()}")
    for proxy in proxies.values():
        proxy.restore()
    restored = time.monotonic()
    try:
        WebDriverWait(driver, 15, poll_frequency=0.02).until(lambda d: page.ids() == ["501", "502"])
    except Exception:
        fail(f"after the switch the page lists {page.ids()}")
    switch = time.monotonic() - restored
    add(api_base, token, 503, "Fern after the switch")
    page.wait_ids(["501", "502", "503"])
    for name, proxy in proxies.items():
        switched(name, proxy, old[name].query["ticket"], last[name])
    print(
        f"browser: ok: past the ticket's expiry and a cut, a new ticket resumes after {last['page']}: "
        "the change made while cut off shows, nothing lost or repeated"
    )
    return switch


def switched(name, proxy, ticket, last):
    """The feed requests after the cut: EventSource's own with the expired
    ticket got a 401; one new ticket, and one stream resuming after `last`
    with exactly plants 502 and 503."""
    feeds = proxy.seen("GET", FEED)
    stale = [r.status_and_events()[0] for r in feeds[1:] if r.query.get("ticket") == ticket and r.answer]
    check(401 in stale, f"the {name}'s reconnection with the expired ticket: {stale}")
    check(len(proxy.seen("POST", TICKETS)) == 2, f"the {name} minted {len(proxy.seen('POST', TICKETS))} tickets")
    new = [r for r in feeds if r.query.get("ticket") not in (None, ticket)]
    check(len(new) == 1, f"the {name}'s feeds with a new ticket: {[r.target for r in new]}")
    check(new[0].query.get("lastEventId") == last, f"the {name} resumed with {new[0].query}, not after {last}")
    until(f"the {name}'s new stream's events", lambda: len(new[0].status_and_events()[1]) >= 2)
    time.sleep(0.3)  # a repeat would come right after
    status, events = new[0].status_and_events()
    epoch, number = last.rsplit("-", 1)
    want = [(f"{epoch}-{int(number) + 1}", "created", 502), (f"{epoch}-{int(number) + 2}", "created", 503)]
    got = [(id, event, int(re.search(r'"id":(\d+)', data)[1])) for id, event, data in events]
    check(status == 200 and got == want, f"the {name}'s new stream: {status} {got}, want {want}")


def read_only(page, proxy, api_base, token, reader):
    driver = page.driver
    minted = len(proxy.seen("POST", TICKETS))
    page.find("#forget").click()
    sign_in(page, reader)
    page.wait_ids(["501", "502", "503"])
    check(len(proxy.seen("POST", TICKETS)) == minted + 1, "the read token minted a ticket")
    check(edit_controls(driver) == ["none", []], f"a read token's page: {edit_controls(driver)}")
    add(api_base, token, 504, "Fern seen by a reader")
    page.wait_ids(["501", "502", "503", "504"])
    check(edit_controls(driver) == ["none", []], f"a read token's page after a change: {edit_controls(driver)}")
    print("browser: ok: a read token's page has no edit controls and follows the feed")
