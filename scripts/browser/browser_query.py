"""The built-in page's search box, column sort and total, checked against
what the API answers for the same query (scripts/browser/browser.py runs it).

A user types into the search box (one listing request for the whole word:
the box waits for typing to pause), clicks the Name header (ascending, then
descending, the header's aria-sort saying which), pages through a sorted
search with Next (the Link keeps the query), sees a change made elsewhere
appear in the searched listing (the change feed's refresh keeps the query),
and clears it all with "All plants". Each time the rows must be the ids the
API lists for that query, and the total shown its X-Total-Count.
"""

import json
import re
import urllib.parse
import urllib.request

from selenium.webdriver.common.by import By

from browser_page import Page, api, check, fail, screenshot, severe

# Names chosen so that each order differs from the others: name order is
# by UTF-8 bytes ("FERN" before "Fern", "Fern" before "Fern, ..."), and
# 304 matches "fern" by its tag only.
PLANTS = [
    (301, "Fern, maidenhair", "shade"),
    (302, "Bird's nest fern", "shade"),
    (303, "FERN asparagus", "desert"),
    (304, "Staghorn", "fernlike"),
]
LIMIT = 20  # the page's page size


def listing(base, token, **query):
    """GET /plants from Python: (ids, X-Total-Count as an int, next URL)."""
    url = f"{base}/plants?" + urllib.parse.urlencode({"limit": LIMIT, "count": "true", **query})
    return listing_at(url, token)


def listing_at(url, token):
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        ids = [str(plant["id"]) for plant in json.loads(response.read())]
        total = response.headers.get("X-Total-Count")
        link = re.search(r'<([^>]*)>\s*;\s*rel="?next"?', response.headers.get("Link") or "")
    check(total is not None, f"no X-Total-Count for {url}")
    return ids, int(total), link and link.group(1)


def listing_requests(base, token):
    """How many GET /plants the server has answered 200 (from /metrics)."""
    request = urllib.request.Request(f"{base}/metrics", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        text = response.read().decode()
    found = re.search(
        r'^plantstore_requests_total\{route="/plants",method="GET",status="200"\} (\d+)$', text, re.M
    )
    check(found, "no count of GET /plants in /metrics")
    return int(found.group(1))


def shows(page, ids, total, what):
    """Waits for the page to list `ids` and say `total` plants `what`."""
    noun = "plant" if total == 1 else "plants"
    want = f"{total} {noun}{what}" if total else f"No plants{what}."
    try:
        page.wait.until(lambda d: page.ids() == ids and page.find("#shown").text == want)
    except Exception:
        fail(f"listed {page.ids()} with {page.find('#shown').text!r}, want {ids} with {want!r}")


def sorted_by(page):
    """Each sortable header's aria-sort (None where absent)."""
    return page.driver.execute_script(
        "return [...document.querySelectorAll('th')].filter((th) => th.querySelector('button'))"
        ".map((th) => th.querySelector('button').textContent + ' ' + th.getAttribute('aria-sort'))"
    )


def header(page, name):
    return page.driver.find_element(By.XPATH, f"//th/button[text()='{name}']")


def check_query(driver, base, token, shots):
    page = Page(driver, base)
    for id, name, tag in PLANTS:
        check(api(base, token, "POST", "/plants", {"id": id, "name": name, "tag": tag})[0] == 200, "seed")
    page.find("#all").click()
    ids, total, _ = listing(base, token, sort="id")
    shows(page, ids, total, "")
    check(sorted_by(page) == ["Id ascending", "Name null"], f"headers: {sorted_by(page)}")

    before = listing_requests(base, token)
    page.type("#q", "fern")
    matching = " matching \u201cfern\u201d"
    ids, total, _ = listing(base, token, q="fern", sort="id")
    check(ids == ["102", "301", "302", "303", "304"], f"the API's search: {ids}")
    shows(page, ids, total, matching)
    typed = listing_requests(base, token) - before - 1  # less the check's own
    check(1 <= typed < 4, f"typing 4 letters made {typed} listing requests")
    print(f"browser: ok: typing 'fern' lists the API's {total} matches in {typed} request(s)")

    header(page, "Name").click()
    ids, total, _ = listing(base, token, q="fern", sort="name")
    check(ids == ["302", "303", "102", "301", "304"], f"the API's name order: {ids}")
    shows(page, ids, total, matching)
    check(sorted_by(page) == ["Id null", "Name ascending"], f"headers: {sorted_by(page)}")
    header(page, "Name").click()
    ids, total, _ = listing(base, token, q="fern", sort="-name")
    check(ids == ["304", "301", "102", "303", "302"], f"the API's reversed name order: {ids}")
    shows(page, ids, total, matching)
    check(sorted_by(page) == ["Id null", "Name descending"], f"headers: {sorted_by(page)}")
    screenshot(driver, shots, "desktop-search.png")
    print("browser: ok: the Name header sorts the search both ways, as the API does")

    # A change made elsewhere: the refresh keeps the search and its order.
    check(api(base, token, "POST", "/plants", {"id": 306, "name": "Palm"})[0] == 200, "add")
    check(api(base, token, "POST", "/plants", {"id": 305, "name": "Fern tree"})[0] == 200, "add")
    ids, total, _ = listing(base, token, q="fern", sort="-name")
    check(ids[:3] == ["304", "301", "305"] and total == 6, f"the API after the adds: {ids}, {total}")
    shows(page, ids, total, matching)
    print("browser: ok: a plant added elsewhere shows in the searched, sorted listing")

    check_paging(page, base, token)
    page.find("#all").click()
    check(page.find("#q").get_attribute("value") == "", "All plants empties the search box")
    ids, total, _ = listing(base, token, sort="-name")
    shows(page, ids, total, "")
    header(page, "Id").click()
    ids, total, _ = listing(base, token, sort="id")
    shows(page, ids, total, "")
    check(sorted_by(page) == ["Id ascending", "Name null"], f"headers: {sorted_by(page)}")
    errors = severe(driver)
    check(not errors, f"console errors while searching and sorting: {errors}")
    print(f"browser: ok: All plants lists all {total}, sorted as chosen, then by id")


def check_paging(page, base, token):
    """A search over two pages, sorted by name descending: Next follows Link."""
    page.type("#q", "Seedling")
    matching = " matching \u201cSeedling\u201d"
    first, total, next_url = listing(base, token, q="Seedling", sort="-name")
    check(total == 30 and len(first) == LIMIT and next_url, f"the API's first page: {first}, {total}")
    check(first[:2] == ["229", "228"], f"the API's order: {first}")
    shows(page, first, total, matching)
    page.find("#next").click()
    second, again, last = listing_at(next_url, token)
    check(second == [str(i) for i in range(209, 199, -1)] and again == 30 and not last, f"page 2: {second}")
    shows(page, second, total, matching)
    check(page.find("#pageno").text == "Page 2", "page number")
    page.find("#prev").click()
    shows(page, first, total, matching)
    print(f"browser: ok: a search of {total} sorted by name pages with Link, keeping the query")
