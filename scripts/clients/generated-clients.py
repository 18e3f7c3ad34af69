"""The Python client that openapi-generator made from /openapi.json, against
a running server (scripts/clients/generated-clients.sh installs the client and runs
this): create, list, read and delete a plant, then the listing's search,
sort, count and fields, each answer checked.

Usage: generated-clients.py BASE_URL TOKEN   (the store must be empty; it
is left empty)
"""

import sys
import urllib.parse

import plantstore_client as ps

# The listing's checks use these. "FERN" matches 2 and 3 by name and 4 by
# its tag, in any case; by name, descending, they come 3, 4, 2 (names
# compare by bytes: lower case after upper).
SEED = [
    (1, "Monstera deliciosa", "tropical"),
    (2, "Boston fern", "shade"),
    (3, "fern, maidenhair", None),
    (4, "Staghorn", "Fernlike"),
]


def check(condition, what):
    if not condition:
        print(f"clients: FAIL (python): {what}", file=sys.stderr)
        sys.exit(1)


def after_of(link):
    """The cursor in a `Link: <...>; rel="next"` header."""
    url = link.split(">")[0].lstrip("<")
    return urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)["after"][0]


def crud(plants, client):
    made = plants.add_plant(ps.NewPlant(id=7, name="Monstera deliciosa", tag="tropical"))
    check(made.name == "Monstera deliciosa", f"created {made}")
    listed = plants.list_plants(tag="tropical")
    check([p.id for p in listed] == [7], f"listed {listed}")
    check(plants.get_plant(7).tag == "tropical", "read")
    plants.delete_plant(7)
    check(plants.list_plants() == [], "deleted")
    health = ps.OperationsApi(client).health()
    check(health.status == "ok", f"health {health}")
    print("clients: ok: the python client created, listed, read and deleted a plant")


def listing(plants):
    for id, name, tag in SEED:
        plants.add_plant(ps.NewPlant(id=id, name=name, tag=tag))
    first = plants.list_plants_with_http_info(q="FERN", sort="-name", count=True, limit=2)
    check([p.id for p in first.data] == [3, 4], f"first page {first.data}")
    check(first.headers.get("X-Total-Count") == "3", f"total {first.headers}")
    cursor = after_of(first.headers["Link"])
    check(cursor.startswith("-name:4:="), f"cursor {cursor!r}")
    rest = plants.list_plants_with_http_info(
        q="FERN", sort="-name", count=True, limit=2, after=cursor
    )
    check([p.id for p in rest.data] == [2], f"second page {rest.data}")
    check(rest.headers.get("X-Total-Count") == "3" and "Link" not in rest.headers, f"{rest.headers}")

    by_id = plants.list_plants(sort="-id", fields="id,name")
    check([(p.id, p.name) for p in by_id] == [(i, n) for i, n, _ in reversed(SEED)], f"{by_id}")
    check(all(p.tag is None for p in by_id), f"fields=id,name sent a tag: {by_id}")
    names = plants.list_plants(sort="name", fields="tag,name")
    check([(p.id, p.name, p.tag) for p in names] == [
        (None, "Boston fern", "shade"),
        (None, "Monstera deliciosa", "tropical"),
        (None, "Staghorn", "Fernlike"),
        (None, "fern, maidenhair", None),
    ], f"fields=tag,name {names}")
    uncounted = plants.list_plants_with_http_info()
    check("X-Total-Count" not in uncounted.headers, f"counted unasked: {uncounted.headers}")
    try:
        plants.list_plants(after="name:1:=Fern")  # a cursor of another sort
        check(False, "a name cursor in the id order was taken")
    except ps.exceptions.BadRequestException as e:
        check("after" in (e.body or ""), f"400 body {e.body}")
    for id, _, _ in SEED:
        plants.delete_plant(id)
    print("clients: ok: the python client searched, sorted both ways, counted, paged and chose fields")


def main():
    base, token = sys.argv[1:]
    config = ps.Configuration(host=base, access_token=token)
    with ps.ApiClient(config) as client:
        plants = ps.PlantsApi(client)
        crud(plants, client)
        listing(plants)


if __name__ == "__main__":
    main()
