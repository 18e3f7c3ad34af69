"""Schemathesis hooks for scripts/peer/conformance.sh: what the OpenAPI document
cannot say about GET and HEAD /plants, applied to the requests schemathesis
generates as valid (those it generates as invalid are sent as they are).

- A cursor (`after`) is valid only with the sort it came from (`name:...`
  with `sort=name`, a plain id with the default order): a schema describes
  each parameter alone. A valid request keeps its `after` only when it is a
  cursor of its `sort` (of the plain forms: an int64 id, `-id:ID`,
  `name:ID:=NAME` with at most 256 bytes of name); other values are
  dropped, never rewritten into ones the server must take.
- `q` is 1 to 256 bytes; the schema's maxLength counts characters. A
  valid request's longer `q` is cut to 256 bytes at a character boundary.

Loaded through `hooks` in scripts/peer/schemathesis.toml.
"""

import re

import schemathesis

INT64 = range(-(2**63), 2**63)
LIMIT = 256  # bytes of q, and of a name in a cursor


def _id(text):
    return re.fullmatch(r"-?[0-9]+", text) is not None and int(text) in INT64


def _fits(cursor, sort):
    if sort in (None, "id"):
        return _id(cursor)
    if sort == "-id":
        return cursor.startswith("-id:") and _id(cursor[4:])
    prefix = sort + ":"
    if sort not in ("name", "-name") or not cursor.startswith(prefix):
        return False
    id, _, name = cursor[len(prefix) :].partition(":")
    return _id(id) and name.startswith("=") and len(name[1:].encode()) <= LIMIT


@schemathesis.hook
def before_call(context, case, kwargs):
    meta = case.meta
    if case.path != "/plants" or case.method.upper() not in ("GET", "HEAD"):
        return
    if meta is None or not meta.generation.mode.is_positive or not case.query:
        return
    query = case.query
    after = query.get("after")
    if after is not None and not (isinstance(after, str) and _fits(after, query.get("sort"))):
        del query["after"]
    q = query.get("q")
    if isinstance(q, str) and len(q.encode()) > LIMIT:
        query["q"] = q.encode()[:LIMIT].decode(errors="ignore")
