//! The one reply path for plant operations: an outcome answered now
//! becomes the response at once; one answered later (the journal's
//! committer, a database worker) becomes a deferred response. That thread
//! only hands the answer back: the reply, boxed on the event loop, goes
//! home to it as it is ([`Deferred::take_address`]), and the loop makes the
//! response there, counts it in the metrics (its duration from the
//! request's head) and gives it the request's CORS headers (`App::handle`
//! adds them only to an answer it sends itself). So what the loop
//! allocated for the request is freed on the loop, and the other thread
//! does nothing per request but move a box. The event loop never waits
//! for the disk or the database.

use std::sync::Arc;
use std::time::Instant;

use super::{ApiError, App, CorsHeaders, Metrics};
use crate::http::{Deferred, Errand, Request, Response};
use crate::model::{NotDone, Reply};
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
    pending.then(Box::new(Later {
        answer: None,
        respond,
        completion,
    }));
    Ok(Response::deferred())
}

/// A deferred reply: takes the answer on the thread that has it, then
/// goes home to the event loop to become the response.
struct Later<T, F> {
    /// The answer, once given.
    answer: Option<Result<T, NotDone>>,
    respond: F,
    completion: Completion,
}

impl<T, F> Reply<T> for Later<T, F>
where
    T: Send + 'static,
    F: FnOnce(T) -> Result<Response, ApiError> + Send + 'static,
{
    fn answer(mut self: Box<Self>, answer: Result<T, NotDone>) {
        self.answer = Some(answer);
        if let Some(address) = self.completion.later.take_address() {
            address.send(self);
        }
    }

    fn wanted(&self) -> bool {
        self.completion.later.wanted()
    }
}

impl<T, F> Errand for Later<T, F>
where
    T: Send + 'static,
    F: FnOnce(T) -> Result<Response, ApiError> + Send + 'static,
{
    fn finish(self: Box<Self>) -> Response {
        let Later {
            answer,
            respond,
            completion,
        } = *self;
        let made = match answer {
            Some(answer) => answer.map_err(ApiError::from).and_then(respond),
            // Never: it is sent home only once answered.
            None => Ok(Response::error(500, "internal error: no answer")),
        };
        completion.finish(made)
    }
}

/// What a deferred answer needs when it is sent, whatever the operation
/// (kept apart from `Later`, which is instantiated per operation).
struct Completion {
    metrics: Arc<Metrics>,
    cors: CorsHeaders,
    started: Instant,
    /// Its row in `routes::ROUTES`, its metrics label.
    route: usize,
    /// The request's `metrics::METHODS` index.
    method: usize,
    /// Disarmed once the reply is sent home.
    later: Deferred,
}

impl Completion {
    fn finish(self, made: Result<Response, ApiError>) -> Response {
        let response = made.unwrap_or_else(|e| e.to_response());
        self.metrics.record(
            self.route,
            self.method,
            response.status(),
            self.started.elapsed(),
        );
        self.cors.apply(response)
    }
}
