//! The one reply path for plant operations: an outcome answered now
//! becomes the response at once; one answered later (the journal's
//! committer, a database worker) becomes a deferred response, completed on
//! that thread, counted in the metrics then (its duration from the
//! request's head), and given the request's CORS headers there (`App::handle`
//! adds them only to an answer it sends itself). The event loop never
//! waits for the disk or the database.

use std::sync::Arc;
use std::time::Instant;

use super::{ApiError, App, CorsHeaders, Metrics};
use crate::http::{Deferred, Request, Response};
use crate::plants::Outcome;

/// Answers `request` (of row `route` in `routes::ROUTES`) with what
/// `respond` makes of `outcome`'s value.
pub(super) fn reply<T: Send + 'static>(
    app: &App,
    request: &mut Request<'_>,
    route: usize,
    outcome: Outcome<T>,
    respond: impl FnOnce(T) -> Result<Response, ApiError> + Send + 'static,
) -> Result<Response, ApiError> {
    let pending = match outcome {
        Outcome::Ready(answer) => return answer.map_err(ApiError::from).and_then(respond),
        Outcome::Pending(pending) => pending,
    };
    // Every event loop can defer; only the replay harness cannot, and
    // waits instead.
    let Some(later) = request.defer() else {
        return pending.wait().map_err(ApiError::from).and_then(respond);
    };
    let completion = Completion {
        metrics: Arc::clone(&app.metrics),
        cors: app.cors_headers(request),
        started: request.started(),
        route,
        method: super::metrics::method_label(request.method()),
        later,
    };
    pending.then(move |answer| completion.send(answer.map_err(ApiError::from).and_then(respond)));
    Ok(Response::deferred())
}

/// What a deferred answer needs when it is sent, whatever the operation
/// (kept apart from `reply`, which is instantiated per operation).
struct Completion {
    metrics: Arc<Metrics>,
    cors: CorsHeaders,
    started: Instant,
    /// Its row in `routes::ROUTES`, its metrics label.
    route: usize,
    /// The request's `metrics::METHODS` index.
    method: usize,
    later: Deferred,
}

impl Completion {
    fn send(self, made: Result<Response, ApiError>) {
        let response = made.unwrap_or_else(|e| e.to_response());
        self.metrics.record(
            self.route,
            self.method,
            response.status(),
            self.started.elapsed(),
        );
        self.later.complete(self.cors.apply(response));
    }
}
