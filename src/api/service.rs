//! The service endpoints: the OpenAPI document, health and metrics.
//!
//! The OpenAPI 3.1 document is a file written by hand for this server
//! (`openapi.json`, compiled in) and checked against the running server by
//! the conformance script; `/openapi.json` and `/healthz` need no token.

use super::{ApiError, App};
use crate::http::{Request, Response};

/// The server's own OpenAPI 3.1 document.
pub const OPENAPI: &str = include_str!("openapi.json");

/// `GET /openapi.json`.
pub(super) fn openapi() -> Response {
    Response::bytes(200, "application/json", OPENAPI.as_bytes().to_vec())
}

/// `GET /healthz`: `ok`, or 503 `failing` with the reason once the journal
/// has failed (reads still work, changes are refused).
pub(super) fn health(app: &App) -> Response {
    match app.store.failure() {
        None => Response::bytes(200, "application/json", br#"{"status":"ok"}"#.to_vec()),
        Some(reason) => Response::json(
            503,
            &serde_json::json!({ "status": "failing", "reason": &*reason }),
        ),
    }
}

/// `GET /metrics` (bearer auth): Prometheus text exposition.
pub(super) fn metrics(app: &App, request: &Request<'_>) -> Result<Response, ApiError> {
    app.authorize(request)?;
    let text = app.metrics.render(app.store.len(), app.webhooks.counters());
    Ok(Response::bytes(
        200,
        "text/plain; version=0.0.4; charset=utf-8",
        text.into_bytes(),
    ))
}
