//! `GET /plants/changes`: the change feed as Server-Sent Events
//! (`text/event-stream`; the events and ids are `changes`' to say).
//!
//! Bearer-authenticated like every API route, so a browser reads it with
//! `fetch` and a streaming body (`EventSource` cannot send a header).
//! `Last-Event-ID` resumes; `?tag=` filters; no other query parameter is
//! taken (a typo is a 400, not "no filter"). `Cache-Control: no-store`
//! and `X-Accel-Buffering: no` keep caches and nginx from holding events
//! back. HEAD answers the same head, without a body.

use super::Call;
use super::query::FeedQuery;
use super::{ApiError, App};
use crate::http::{Request, Response};

/// `GET /plants/changes` (bearer auth).
pub(super) fn changes(
    app: &App,
    request: &mut Request<'_>,
    call: Call,
) -> Result<Response, ApiError> {
    let query = FeedQuery::parse(&call.query);
    // Only the engine's replay (fuzzing) has no waker: a stream that can
    // never be woken cannot follow the feed.
    let Some(waker) = request.waker() else {
        return Ok(Response::error(
            503,
            "the change feed needs a connection that can wait",
        ));
    };
    // Not UTF-8: not an id of ours, so a reset, as for any other.
    let last_event_id = request
        .header("last-event-id")
        .map(|id| std::str::from_utf8(id).unwrap_or("?"));
    let subscriber = app.changes.subscribe(last_event_id, query.tag, waker);
    Ok(Response::stream(200, "text/event-stream", subscriber)
        .with_header("Cache-Control", "no-store")
        .with_header("X-Accel-Buffering", "no"))
}
