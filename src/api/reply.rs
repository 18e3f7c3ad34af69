//! The one reply path for plant operations: an outcome answered now
//! becomes the response at once; one answered later (the journal's
//! committer, a database worker) becomes a deferred response, completed on
//! that thread, counted in the metrics then (its duration from the
//! request's head), and given the request's CORS headers there (`App::handle`
//! adds them only to an answer it sends itself). The event loop never
//! waits for the disk or the database.

use std::sync::Arc;

use super::{ApiError, App, Resource, label};
use crate::http::{Request, Response};
use crate::plants::Outcome;

/// Answers `request` with what `respond` makes of `outcome`'s value.
pub(super) fn reply<T: Send + 'static>(
    app: &App,
    request: &mut Request<'_>,
    resource: Resource,
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
    let metrics = Arc::clone(&app.metrics);
    let cors = app.cors_headers(request);
    let started = request.started();
    pending.then(move |answer| {
        let response = answer
            .map_err(ApiError::from)
            .and_then(respond)
            .unwrap_or_else(|e| e.to_response());
        metrics.record(label(Some(resource)), response.status(), started.elapsed());
        later.complete(cors.apply(response));
    });
    Ok(Response::deferred())
}
