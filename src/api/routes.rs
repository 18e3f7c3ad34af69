//! The endpoints: one row each in [`ROUTES`], and everything derived from
//! it.
//!
//! A row says where an endpoint is, which methods it answers (each with
//! its handler, the query parameters it takes, and whether it takes a JSON
//! body), whether they need a token, and whether the OpenAPI document
//! describes it. From the table come: finding a request's row (`find`),
//! the `405` and its `Allow` (the row's methods, in its order), the
//! `Access-Control-Allow-Methods` of a preflight, the gate every request
//! passes before its handler (`route`: auth, the query's names, the
//! content type, the body), the metrics' route labels (a row's path; the
//! order of the rows is the order of `/metrics`), and the page's files
//! (the rows with a `part`). Adding an endpoint is adding a row, its
//! handler, and its description in `openapi.json`;
//! `tests/integration/api/routes.rs` walks every row against a running
//! server and the document.
//!
//! The body that is not yet here: a handler is called once, with its body
//! in. `route` reads the body of a method that takes one before calling
//! the handler, after the checks a `100 Continue` waits for. When not all
//! of it has arrived, this call's answer is dropped by the engine, which
//! reads the rest and calls `App::handle` again (`Request::resumed`): the
//! auth and content-type checks are not made twice (they passed, and a
//! `100 Continue` may have gone on their strength), and the handler runs.

use super::query::{self, Values};
use super::ui::Part;
use super::{ApiError, App, Call, Scope, changes, export, listing, plants, service};
use crate::http::{BodyError, Request, Response};
use Scope::{Read, Write};

/// A handler: called after the gate, with the request's row, path id and
/// query values.
type Handler = fn(&App, &mut Request<'_>, Call) -> Result<Response, ApiError>;

/// The endpoints. Order matters only to `/metrics` (its routes are listed
/// in this order, then `other`); a literal path is found before a pattern.
pub const ROUTES: &[Route] = &[
    Route {
        path: "/plants",
        methods: &[
            plain("GET", Read, LIST, listing::list),
            plain("HEAD", Read, LIST, listing::list),
            json("POST", Write, NONE, plants::create),
        ],
        auth: true,
        documented: true,
        part: None,
    },
    Route {
        path: "/plants/{id}",
        methods: &[
            plain("GET", Read, NONE, plants::get),
            plain("HEAD", Read, NONE, plants::get),
            json("PUT", Write, NONE, plants::replace),
            plain("DELETE", Write, NONE, plants::delete),
        ],
        auth: true,
        documented: true,
        part: None,
    },
    Route {
        path: "/openapi.json",
        methods: &[
            plain("GET", Read, ANY, openapi),
            plain("HEAD", Read, ANY, openapi),
        ],
        auth: false,
        documented: true,
        part: None,
    },
    Route {
        path: "/healthz",
        methods: &[
            plain("GET", Read, ANY, health),
            plain("HEAD", Read, ANY, health),
        ],
        auth: false,
        documented: true,
        part: None,
    },
    Route {
        path: "/metrics",
        methods: &[
            plain("GET", Read, NONE, service::metrics),
            plain("HEAD", Read, NONE, service::metrics),
        ],
        auth: true,
        documented: true,
        part: None,
    },
    Route {
        path: "/export",
        methods: &[
            plain("GET", Read, NONE, export::export),
            plain("HEAD", Read, NONE, export::export),
        ],
        auth: true,
        documented: true,
        part: None,
    },
    Route {
        path: "/plants/changes",
        methods: &[
            plain("GET", Read, FEED, changes::changes),
            plain("HEAD", Read, FEED, changes::changes),
        ],
        auth: true,
        documented: true,
        part: None,
    },
    Route {
        path: "/plants/changes/tickets",
        methods: &[plain("POST", Read, NONE, changes::ticket)],
        auth: true,
        documented: true,
        part: None,
    },
    // Only with `--allow-reset`: else `App::handle` finds no row (404).
    Route {
        path: RESET,
        methods: &[plain("POST", Write, NONE, plants::reset)],
        auth: true,
        documented: true,
        part: None,
    },
    // Only over HTTPS with `--tls-auto`: else `App::handle` finds no row
    // (404).
    Route {
        path: CA_PEM,
        methods: &[
            plain("GET", Read, ANY, ca_pem),
            plain("HEAD", Read, ANY, ca_pem),
        ],
        auth: false,
        documented: true,
        part: None,
    },
    // The page's files are not part of the API: not in the document, and
    // 404 with `--no-ui`.
    page("/", Part::Page),
    page("/ui.css", Part::Style),
    page("/ui.js", Part::Script),
    page("/ui.svg", Part::Icon),
];

/// `POST /plants/reset`'s path.
pub(super) const RESET: &str = "/plants/reset";
/// `GET /ca.pem`'s path.
pub(super) const CA_PEM: &str = "/ca.pem";

/// No query parameter.
const NONE: Params = Params::Only(&[]);
/// Any query, ignored: `/openapi.json`, `/healthz`, `/ca.pem` and the
/// page's files (a cache-busting `?v=2` is not an error).
const ANY: Params = Params::Any;
/// A listing page's.
const LIST: Params = Params::Only(&["limit", "after", "tag", "q", "sort", "count", "fields"]);
/// The change feed's: its filter, a ticket (a method that takes one
/// takes it instead of a token: `App::authorize`), and where to resume.
const FEED: Params = Params::Only(&["tag", "ticket", "lastEventId"]);

/// The metrics' label for requests that found no row.
pub(super) const OTHER: usize = ROUTES.len();

/// One endpoint.
#[derive(Debug)]
pub struct Route {
    /// Its path, `{id}` standing for one segment, a plant id; also its
    /// metrics label and its key in the OpenAPI document.
    pub path: &'static str,
    /// The methods it answers, in the order `Allow` lists them.
    pub methods: &'static [Method],
    /// Every method needs a bearer token (401 first).
    pub auth: bool,
    /// The OpenAPI document describes it (every method).
    pub documented: bool,
    /// The page's file it serves, if it is one.
    part: Option<Part>,
}

/// One method of a route.
#[derive(Debug)]
pub struct Method {
    /// As sent: `GET`, `PUT`, ...
    pub name: &'static str,
    /// What a token must be allowed to do to call it, on a route that
    /// needs one: `Write` for every change (refused to a read token, and
    /// to every token with `--read-only`).
    pub scope: Scope,
    /// The query parameters it takes.
    pub params: Params,
    /// It takes a JSON body: 415 for another content type, and the body is
    /// read before the handler runs.
    pub body: bool,
    handler: Handler,
}

/// The query parameters a method takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Params {
    /// Any, ignored: a cache-busting `?v=2` is not an error.
    Any,
    /// These (none when empty); another is a 400 naming it and these, so
    /// that a typo is not read as "no filter".
    Only(&'static [&'static str]),
}

impl Route {
    /// Its methods as `Allow` lists them: `GET, HEAD, POST`.
    pub fn allow(&self) -> String {
        let names: Vec<&str> = self.methods.iter().map(|m| m.name).collect();
        names.join(", ")
    }

    /// The page's file it serves, if it is one.
    pub(super) fn part(&self) -> Option<Part> {
        self.part
    }

    /// Whether `--delay` holds its answers: the API's own (plants, export,
    /// tickets), not the service's (health, metrics, the document), the
    /// page's, nor the feed's (a stream that stays open; its heartbeats
    /// would only shift).
    pub(super) fn held(&self) -> bool {
        self.auth && !matches!(self.path, "/metrics" | "/plants/changes")
    }
}

/// A method without a body.
const fn plain(name: &'static str, scope: Scope, params: Params, handler: Handler) -> Method {
    Method {
        name,
        scope,
        params,
        body: false,
        handler,
    }
}

/// A method that takes a JSON body.
const fn json(name: &'static str, scope: Scope, params: Params, handler: Handler) -> Method {
    Method {
        name,
        scope,
        params,
        body: true,
        handler,
    }
}

/// The methods of a file of the page.
const PAGE: &[Method] = &[plain("GET", Read, ANY, ui), plain("HEAD", Read, ANY, ui)];

/// A file of the page: `GET` and `HEAD`, no token, any query.
const fn page(path: &'static str, part: Part) -> Route {
    Route {
        path,
        methods: PAGE,
        auth: false,
        documented: false,
        part: Some(part),
    }
}

/// A request's row, found from its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Found {
    /// Its index in `ROUTES`.
    pub row: usize,
    /// The id in a `{id}` path; `None` when it is not an int64 (a 400,
    /// after the auth check).
    pub id: Option<i64>,
}

/// The row for `path`: a literal path first, then a pattern, so that
/// `/plants/changes` is the feed and not a plant; `None` is 404.
pub(super) fn find(path: &str) -> Option<Found> {
    let literal = ROUTES
        .iter()
        .position(|r| !r.path.contains('{') && r.path == path)
        .map(|row| Found { row, id: None });
    literal.or_else(|| {
        ROUTES.iter().enumerate().find_map(|(row, r)| {
            let id = path.strip_prefix(r.path.strip_suffix("{id}")?)?;
            (!id.is_empty() && !id.contains('/')).then(|| Found {
                row,
                id: query::integer(id),
            })
        })
    })
}

/// The metrics' route labels: each row's path, in order, then `other`
/// (row `OTHER`).
pub(super) fn labels() -> Box<[&'static str]> {
    ROUTES.iter().map(|r| r.path).chain(["other"]).collect()
}

/// 404 without a row, 405 for a method it does not answer; then the gate,
/// in the order the contract fixes (auth, the query, the content type, the
/// body), and the handler. See the module header for a body not yet here.
pub(super) fn route(
    app: &App,
    found: Option<Found>,
    request: &mut Request<'_>,
) -> Result<Response, ApiError> {
    let found = found.ok_or(ApiError::NoRoute)?;
    let route = &ROUTES[found.row];
    let method = route
        .methods
        .iter()
        .find(|m| m.name == request.method())
        .ok_or_else(|| ApiError::MethodNotAllowed(route.allow()))?;
    let resumed = request.resumed();
    let granted = match route.auth && !resumed {
        true => Some(app.authorize(request, method)?),
        false => None,
    };
    // Read again when resumed: the handler needs the values, and the same
    // text reads the same (it passed).
    let query = match method.params {
        Params::Any => Values::default(),
        Params::Only(names) => query::read(request.query(), names)?,
    };
    if method.body {
        if !resumed {
            require_json(request)?;
        }
        match request.body() {
            // Dropped by the engine, which calls again once the body is in.
            Err(BodyError::NotYet) => return Ok(Response::empty(0)),
            Err(e) => return Err(e.into()),
            Ok(_) => {}
        }
    }
    let call = Call {
        row: found.row,
        id: found.id,
        query,
        granted,
    };
    (method.handler)(app, request, call)
}

/// 415 unless a request that carries a body says it is JSON (parameters
/// such as `charset=utf-8` are fine).
fn require_json(request: &Request<'_>) -> Result<(), ApiError> {
    if !request.has_body() {
        return Ok(());
    }
    let essence = request
        .header("content-type")
        .map(|v| v.split(|&b| b == b';').next().unwrap_or(v).trim_ascii());
    match essence {
        Some(v) if v.eq_ignore_ascii_case(b"application/json") => Ok(()),
        _ => Err(ApiError::UnsupportedMediaType),
    }
}

/// `GET /openapi.json`.
fn openapi(app: &App, _: &mut Request<'_>, _: Call) -> Result<Response, ApiError> {
    // The reset's route is served (and described) with --allow-reset
    // only, the CA's with --tls-auto only (the plain build's document
    // has no `/ca.pem` to cut).
    let reset = (!app.plants.resettable()).then_some(RESET);
    let ca = app.local_ca.is_none().then_some(CA_PEM);
    let unserved: Vec<&str> = reset.into_iter().chain(ca).collect();
    Ok(service::openapi(app, &unserved))
}

/// `GET /healthz`.
fn health(app: &App, request: &mut Request<'_>, _: Call) -> Result<Response, ApiError> {
    Ok(service::health(app, request))
}

/// `GET /ca.pem` (`App::handle` finds no row for it without `--tls-auto`).
fn ca_pem(app: &App, request: &mut Request<'_>, _: Call) -> Result<Response, ApiError> {
    service::ca_pem(app, request).ok_or(ApiError::NoRoute)
}

/// A file of the page (`App::handle` finds no row for one with `--no-ui`).
fn ui(app: &App, request: &mut Request<'_>, call: Call) -> Result<Response, ApiError> {
    match (&app.ui, ROUTES[call.row].part) {
        (Some(ui), Some(part)) => Ok(ui.serve(part, request)),
        _ => Err(ApiError::NoRoute),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path_of(found: Option<Found>) -> Option<(&'static str, Option<i64>)> {
        found.map(|f| (ROUTES[f.row].path, f.id))
    }

    #[test]
    fn every_path_finds_its_row() {
        let plant = |id| Some(("/plants/{id}", id));
        let table = [
            ("/plants", Some(("/plants", None))),
            ("/plants/7", plant(Some(7))),
            ("/plants/-9223372036854775808", plant(Some(i64::MIN))),
            ("/plants/9223372036854775808", plant(None)),
            ("/plants/2.0000000000000001", plant(None)),
            ("/plants/x", plant(None)),
            ("/plants/{id}", plant(None)),
            ("/plants/+7", plant(None)),
            ("/plants/-79022.0", plant(Some(-79022))),
            ("/plants/7.5", plant(None)),
            ("/plants/7/leaves", None),
            ("/plants/changes", Some(("/plants/changes", None))),
            ("/plants/changes/", None),
            (
                "/plants/changes/tickets",
                Some(("/plants/changes/tickets", None)),
            ),
            ("/plants/changes/tickets/", None),
            ("/plants/reset", Some(("/plants/reset", None))),
            ("/openapi.json", Some(("/openapi.json", None))),
            ("/healthz", Some(("/healthz", None))),
            ("/metrics", Some(("/metrics", None))),
            ("/export", Some(("/export", None))),
            ("/ca.pem", Some(("/ca.pem", None))),
            ("/plants/", None),
            ("/Plants", None),
            ("/", Some(("/", None))),
            ("/ui.css", Some(("/ui.css", None))),
            ("/ui.js", Some(("/ui.js", None))),
            ("/ui.svg", Some(("/ui.svg", None))),
            ("/ui.html", None),
            ("//", None),
            ("", None),
        ];
        for (path, want) in table {
            assert_eq!(path_of(find(path)), want, "{path}");
        }
    }

    #[test]
    fn every_part_of_the_page_has_one_row_and_no_row_two_methods_alike() {
        for part in super::super::ui::PARTS {
            let rows = ROUTES.iter().filter(|r| r.part == Some(part)).count();
            assert_eq!(rows, 1, "{part:?}");
        }
        for route in ROUTES {
            let mut names: Vec<&str> = route.methods.iter().map(|m| m.name).collect();
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), route.methods.len(), "{}", route.path);
            assert!(!route.path.contains('{') || route.path.ends_with("/{id}"));
        }
    }

    #[test]
    fn labels_are_the_paths_then_other() {
        // The order of /metrics's routes, as dashboards and tests know it.
        let want = [
            "/plants",
            "/plants/{id}",
            "/openapi.json",
            "/healthz",
            "/metrics",
            "/export",
            "/plants/changes",
            "/plants/changes/tickets",
            "/plants/reset",
            "/ca.pem",
            "/",
            "/ui.css",
            "/ui.js",
            "/ui.svg",
            "other",
        ];
        assert_eq!(*labels(), want);
        assert_eq!(labels()[OTHER], "other");
        assert_eq!(ROUTES[1].allow(), "GET, HEAD, PUT, DELETE");
    }
}
