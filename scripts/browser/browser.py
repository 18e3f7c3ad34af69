"""Headless Chromium against plantstore, driven by Selenium (see browser.sh).

Usage: browser.py STATIC CORS_API PLAIN_API TOKEN SHOTS_DIR HTTPS_API SPKI FEED_API READ_TOKEN

STATIC serves tests/browser/ (another origin than either server);
CORS_API is a server started with --cors-origin STATIC (and --data);
PLAIN_API one started without it, whose built-in page is driven here;
HTTPS_API one serving HTTPS with a self-signed certificate whose public
key's SHA-256 (base64) is SPKI; FEED_API one started with --ticket-ttl 2
and a token file holding TOKEN and READ_TOKEN (a read token).
Checks, failing with a non-zero exit on the first that does not hold:

1. A page from STATIC calls CORS_API with fetch() (Authorization and
   Content-Type headers, so with preflights): every step succeeds, and the
   Link and WWW-Authenticate headers are readable. The same page against
   PLAIN_API: every fetch rejects, and nothing reached the store.
2. The built-in page loads with no console error and no CSP violation; a
   scripted user enters a token, adds plants, filters by tag, edits,
   deletes, pages through with Link, and sees the server's 401 and 409
   messages. No console error but the expected failed loads (those 401 and
   409 answers), no CSP violation, no horizontal scrolling on a phone; an
   inline style injected at the end must be refused and seen by both.
3. Live updates: the page open in two tabs, a plant added in one shows
   in the other with no user action (the change feed; bound 5 s, the delay
   printed), and so does a delete made through the API.
4. Search, sort and total (scripts/browser/browser_query.py): typing into the
   search box, clicking the Name and Id headers, paging a sorted search
   and a change made elsewhere show the rows and the total the API
   answers for the same query.
5. The feed with EventSource and a ticket (scripts/browser/browser_feed.py): the
   page follows it through a proxy that cuts it once the ticket expired,
   resumes with a new ticket losing no change, and a read token's page has
   no edit controls.
6. Over HTTPS: a browser that does not trust the certificate gets no
   page; one told to trust its key (Chromium's
   --ignore-certificate-errors-spki-list) loads the page in a secure
   context, with no console error, and adds a plant through it.
7. Screenshots at 1280x800 and 390x844 go to SHOTS_DIR.

Selenium is given the driver and browser paths, so it never downloads
anything (SE_OFFLINE is set too, by browser.sh).
"""

import json
import os
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from browser_feed import check_feed
from browser_page import WAIT, Page, api, check, fail, screenshot, severe
from browser_query import check_query

# Watches for CSP violations from before the first script of every page
# runs; installed through the DevTools protocol, so no inline script.
WATCH = """
window.__violations = [];
document.addEventListener('securitypolicyviolation', (e) => {
  window.__violations.push(e.violatedDirective + ' ' + e.blockedURI);
});
"""


def chromium(extra=()):
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in [
        "--headless=new",
        "--no-sandbox",  # root in a container has no user namespaces
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--no-first-run",
        "--window-size=1280,800",
        *extra,
    ]:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(
        service=Service(executable_path="/usr/bin/chromedriver"), options=options
    )
    driver.set_page_load_timeout(30)
    driver.set_script_timeout(30)
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": WATCH})
    return driver


def violations(driver):
    return driver.execute_script("return window.__violations || []")


def cross_origin(driver, static, target, token):
    """Runs tests/browser/cross.js against `target`; its steps."""
    driver.get(f"{static}/cross.html?api={target}&token={token}")
    WebDriverWait(driver, WAIT).until(
        lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-done") == "yes"
    )
    return json.loads(driver.find_element(By.ID, "result").text)


def check_cross_origin(driver, static, cors_api, plain_api, token):
    steps = cross_origin(driver, static, cors_api, token)
    for step in steps:
        check(step["ok"], f"with --cors-origin, {step['name']} failed: {step['detail']}")
    details = {step["name"]: step["detail"] for step in steps}
    check(details["GET /plants (Link)"].startswith(f"<{cors_api}/plants?after=41"), f"Link: {details}")
    check(details["401 is readable"] == 'Bearer realm="plantstore"', f"401: {details}")
    # Failed loads the page asked for: its 401 step.
    errors = severe(driver, [r"status of 401"])
    check(not errors, f"console errors with --cors-origin: {errors}")
    print(f"browser: ok: another origin, with --cors-origin: {len(steps)} steps succeed")

    steps = cross_origin(driver, static, plain_api, token)
    for step in steps:
        check(not step["ok"], f"without --cors-origin, {step['name']} succeeded")
        check("Failed to fetch" in step["detail"], f"{step['name']}: {step['detail']}")
    status, plants = api(plain_api, token, "GET", "/plants")
    check(status == 200 and plants == [], f"a refused preflight let a change through: {plants}")
    severe(driver)  # the CORS refusals, expected
    print(f"browser: ok: another origin, without the flag: all {len(steps)} fetches reject")


def check_page(driver, base, token, shots):
    driver.get(base + "/")
    page = Page(driver, base)
    page.visible("#token")
    check(driver.title == "plantstore", f"title {driver.title!r}")
    errors = severe(driver)
    check(not errors, f"console errors on load: {errors}")
    check(not violations(driver), f"CSP violations on load: {violations(driver)}")
    print("browser: ok: the page loads with no console error and no CSP violation")
    with_size(driver, PHONE, lambda: screenshot(driver, shots, "phone-token.png"))

    page.type("#token", "wrong-token")
    page.find("#login button").click()
    msg = page.message("Error 401")
    check("invalid bearer token" in msg.text, f"401 message: {msg.text}")
    page.visible("#token")

    page.type("#token", token)
    page.find("#login button").click()
    page.visible("#app")
    page.wait.until(lambda d: d.find_element(By.ID, "shown").text == "No plants.")

    page.add(101, "Monstera", "tropical")
    page.message("Added plant 101.")
    page.wait_ids(["101"])
    check(page.row(101).find_element(By.CSS_SELECTOR, ".name").text.startswith("Monstera"), "name shown")
    page.add(102, "Fern", "shade")
    page.message("Added plant 102.")
    page.add(103, "Barrel cactus", "desert")
    page.message("Added plant 103.")
    page.add(104, "Pothos", "tropical")
    page.message("Added plant 104.")
    page.wait_ids(["101", "102", "103", "104"])

    page.row(101).find_element(By.CSS_SELECTOR, ".tag").click()  # a tag filters
    page.wait_ids(["101", "104"])
    shown = page.find("#shown").text
    check(shown == "2 plants tagged \u201ctropical\u201d", f"the filter is shown: {shown!r}")
    page.row(101).find_element(By.XPATH, ".//button[text()='Edit']").click()
    name = page.visible('#list tr[data-id="101"] input[aria-label=Name]')
    name.clear()
    name.send_keys("Monstera deliciosa")
    tag = page.find('#list tr[data-id="101"] input[aria-label=Tag]')
    tag.clear()
    tag.send_keys("jungle")
    page.row(101).find_element(By.XPATH, ".//button[text()='Save']").click()
    page.message("Saved plant 101.")
    page.wait_ids(["104"])  # no longer tagged tropical
    page.find("#all").click()
    page.wait_ids(["101", "102", "103", "104"])
    row = page.row(101)
    shown = (row.find_element(By.CSS_SELECTOR, ".name").text, row.find_element(By.CSS_SELECTOR, ".tag").text)
    check(shown[0].startswith("Monstera deliciosa") and shown[1] == "jungle", f"edited row: {shown}")
    status, stored = api(base, token, "GET", "/plants/101")
    check(stored == {"id": 101, "name": "Monstera deliciosa", "tag": "jungle"}, f"stored {stored}")
    page.row(101).find_element(By.CSS_SELECTOR, ".tag").click()
    page.wait_ids(["101"])
    page.find("#all").click()
    page.wait_ids(["101", "102", "103", "104"])
    print("browser: ok: token, add, filter by tag, edit")

    with_size(driver, DESKTOP, lambda: screenshot(driver, shots, "desktop.png"))
    with_size(driver, PHONE, lambda: phone_checks(page, shots))

    page.add(102, "Another fern")
    msg = page.message("Error 409")
    status, error = api(base, token, "POST", "/plants", {"id": 102, "name": "x"})
    check(status == 409 and msg.text == f"Error 409: {error['message']}", f"409 shown as {msg.text!r}")
    check("bad" in msg.get_attribute("class"), "an error looks like one")
    print(f"browser: ok: the duplicate shows {msg.text!r}")

    delete = page.row(101).find_element(By.CSS_SELECTOR, "button.danger")
    delete.click()
    check(delete.text == "Really delete?", f"first click arms: {delete.text!r}")
    delete.click()
    page.message("Deleted plant 101")
    page.wait_ids(["102", "103", "104"])
    check(api(base, token, "GET", "/plants/101")[0] == 404, "plant 101 is gone")
    print("browser: ok: delete")

    # Paging: 20 a page, Next follows Link.
    for id in range(200, 230):
        check(api(base, token, "POST", "/plants", {"id": id, "name": f"seedling {id}"})[0] == 200, "seed")
    page.find("#all").click()
    first = ["102", "103", "104"] + [str(i) for i in range(200, 217)]
    page.wait_ids(first)
    check(page.find("#prev").get_attribute("disabled") is not None, "no previous page on the first")
    page.find("#next").click()
    page.wait_ids([str(i) for i in range(217, 230)])
    check(page.find("#pageno").text == "Page 2", "page number")
    check(page.find("#next").get_attribute("disabled") is not None, "no next page on the last")
    page.find("#prev").click()
    page.wait_ids(first)
    print("browser: ok: pages follow Link")

    errors = severe(driver, [r"/plants[^ ]* - Failed to load resource: .*status of (401|409) "])
    check(not errors, f"console errors: {errors}")
    check(not violations(driver), f"CSP violations: {violations(driver)}")
    print("browser: ok: no console error but the expected 401 and 409, no CSP violation")

    # The watchers themselves: an inline style must be refused, seen and
    # logged (so a policy gone missing, or a blind watcher, fails here).
    driver.execute_script(
        "const s = document.createElement('style');"
        "s.textContent = 'body { background: red }';"
        "document.head.append(s);"
    )
    time.sleep(0.2)
    seen = violations(driver)
    check(any(v.startswith("style-src") for v in seen), f"an inline style went unnoticed: {seen}")
    logged = severe(driver)
    check(any("Content Security Policy" in m for m in logged), f"no console error for it: {logged}")
    print("browser: ok: an inline style is refused and both watchers see it")


def check_live(driver, base, token):
    """Two tabs of the page: a change in one shows in the other."""
    first = driver.current_window_handle
    a = Page(driver, base)
    before = a.ids()
    driver.switch_to.new_window("tab")
    driver.get(base + "/")
    b = Page(driver, base)
    b.visible("#token")
    b.type("#token", token)  # sessionStorage is per tab
    b.find("#login button").click()
    b.wait_ids(before)
    driver.switch_to.window(first)
    a.add(1, "Live fern", "live")
    a.message("Added plant 1.")
    added = time.monotonic()
    driver.switch_to.window(driver.window_handles[-1])
    try:
        WebDriverWait(driver, 5, poll_frequency=0.02).until(lambda d: b.ids()[:1] == ["1"])
    except Exception:
        fail(f"the other tab lists {b.ids()} 5 s after plant 1 was added")
    delay = time.monotonic() - added
    status, _ = api(base, token, "DELETE", "/plants/1")
    check(status == 204, f"delete: {status}")
    deleted = time.monotonic()
    try:
        WebDriverWait(driver, 5, poll_frequency=0.02).until(lambda d: b.ids() == before)
    except Exception:
        fail(f"the tab lists {b.ids()} 5 s after plant 1 was deleted")
    gone = time.monotonic() - deleted
    errors = severe(driver)
    check(not errors, f"console errors in the second tab: {errors}")
    driver.close()
    driver.switch_to.window(first)
    a.wait_ids(before)
    print(
        f"browser: ok: live: a plant added in one tab shows in the other in {delay * 1000:.0f} ms "
        f"(after the add's own answer), a delete through the API in {gone * 1000:.0f} ms"
    )


def phone_checks(page, shots):
    driver = page.driver
    width = driver.execute_script("return document.documentElement.scrollWidth")
    check(width <= 390, f"the page scrolls sideways on a phone ({width} px)")
    screenshot(driver, shots, "phone.png")
    page.row(103).find_element(By.XPATH, ".//button[text()='Edit']").click()
    page.visible('#list tr[data-id="103"] input[aria-label=Name]')
    width = driver.execute_script("return document.documentElement.scrollWidth")
    check(width <= 390, f"editing scrolls sideways on a phone ({width} px)")
    screenshot(driver, shots, "phone-edit.png")
    page.row(103).find_element(By.XPATH, ".//button[text()='Cancel']").click()
    page.wait.until(lambda d: page.row(103).get_attribute("class") != "edit")


DESKTOP = {"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": False}
PHONE = {"width": 390, "height": 844, "deviceScaleFactor": 2, "mobile": True}


def with_size(driver, metrics, run):
    """Runs `run` with the viewport `metrics` (a phone's: mobile, which
    honours the page's viewport tag)."""
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    try:
        run()
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def check_https(driver, https_api, token, spki, shots):
    """The built-in page over HTTPS: refused untrusted, used once trusted."""
    driver.get(https_api + "/")
    check(driver.title != "plantstore", "an untrusted certificate must not show the page")
    print(f"browser: ok: untrusted, Chromium shows {driver.title!r}, not the page")
    trusting = chromium([f"--ignore-certificate-errors-spki-list={spki}"])
    try:
        trusting.get(https_api + "/")
        page = Page(trusting, https_api)
        page.visible("#token")
        check(trusting.title == "plantstore", f"title {trusting.title!r}")
        secure = trusting.execute_script("return [location.protocol, window.isSecureContext]")
        check(secure == ["https:", True], f"protocol and secure context: {secure}")
        page.type("#token", token)
        page.find("#login button").click()
        page.visible("#app")
        page.add(201, "Fern over TLS", "secure")
        page.message("Added plant 201.")
        page.wait_ids(["201"])
        errors = severe(trusting)
        check(not errors, f"console errors over https: {errors}")
        screenshot(trusting, shots, "https.png")
        print("browser: ok: over https the page loads in a secure context and adds a plant")
    finally:
        trusting.quit()


def main():
    if len(sys.argv) != 10:
        fail(__doc__.splitlines()[2])
    static, cors_api, plain_api, token, shots, https_api, spki, feed_api, reader = sys.argv[1:]
    os.makedirs(shots, exist_ok=True)
    started = time.monotonic()
    driver = chromium()
    try:
        print(f"browser: {driver.capabilities['browserVersion']} headless")
        check_cross_origin(driver, static, cors_api, plain_api, token)
        check_page(driver, plain_api, token, shots)
        check_live(driver, plain_api, token)
        check_query(driver, plain_api, token, shots)
        check_feed(driver, feed_api, token, reader)
        check_https(driver, https_api, token, spki, shots)
    finally:
        driver.quit()
    print(f"browser: all checks passed in {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
