"""The built-in page as a user sees it, and the helpers every browser
check shares (scripts/browser/browser.py and scripts/browser/browser_query.py): a failed
check ends the run with a non-zero exit; `api` speaks to the server from
Python, not through the browser, to compare with what the page shows."""

import json
import os
import re
import sys
import urllib.request

from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

WAIT = 10  # seconds for anything to appear


def fail(message):
    print(f"browser: FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def check(condition, message):
    if not condition:
        fail(message)


def api(base, token, method, path, body=None):
    """A request from Python (not the browser): (status, parsed body)."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(base + path, data=data, method=method)
    request.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            text = response.read()
            return response.status, json.loads(text) if text else None
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def severe(driver, expected=()):
    """Console errors since the last call, less those matching `expected`."""
    entries = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    return [e["message"] for e in entries if not any(re.search(p, e["message"]) for p in expected)]


class Page:
    """The built-in page, as a user sees it."""

    def __init__(self, driver, base):
        self.driver = driver
        self.base = base
        self.wait = WebDriverWait(driver, WAIT)

    def find(self, css):
        return self.driver.find_element(By.CSS_SELECTOR, css)

    def visible(self, css):
        return self.wait.until(ec.visibility_of_element_located((By.CSS_SELECTOR, css)))

    def message(self, text):
        """Waits for the status line to say `text` (a substring); returns it."""
        self.wait.until(lambda d: text in d.find_element(By.ID, "msg").text)
        return self.find("#msg")

    def ids(self):
        # In one step: the list may be re-rendered between two reads.
        return self.driver.execute_script(
            "return [...document.querySelectorAll('#list tr')].map((tr) => tr.dataset.id)"
        )

    def wait_ids(self, want):
        try:
            self.wait.until(lambda d: self.ids() == want)
        except Exception:
            fail(f"listed {self.ids()}, want {want}")

    def row(self, id):
        return self.find(f'#list tr[data-id="{id}"]')

    def type(self, css, text):
        field = self.find(css)
        field.clear()
        field.send_keys(text)

    def add(self, id, name, tag=""):
        self.type("#add [name=id]", str(id))
        self.type("#add [name=name]", name)
        self.type("#add [name=tag]", tag)
        self.find("#add button").click()


def screenshot(driver, shots, name):
    path = os.path.join(shots, name)
    check(driver.save_screenshot(path), f"cannot write {path}")
    print(f"browser: screenshot {path}")
