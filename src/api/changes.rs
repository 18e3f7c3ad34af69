//! `GET /plants/changes`: the change feed as Server-Sent Events
//! (`text/event-stream`; the events and ids are `changes`' to say), and
//! `POST /plants/changes/tickets`, which mints the tickets it also takes.
//!
//! The feed takes a bearer token, or a ticket as `?ticket=` (`ticket.rs`),
//! so that a browser's `EventSource`, which cannot send a header, opens
//! it. `Last-Event-ID` resumes, or `?lastEventId=` (for a new
//! `EventSource`, which cannot set the header; the header wins);
//! `?tag=` filters; no other query parameter is taken (a typo is a 400,
//! not "no filter"). A stream lasts while its token stays in the set: a
//! reload that removes the token ends it (a ticket's expiry does not; a
//! reconnect needs a valid one). `Cache-Control: no-store` and
//! `X-Accel-Buffering: no` keep caches and nginx from holding events
//! back. HEAD answers the same head, without a body.

use super::Call;
use super::auth::bearer;
use super::query::FeedQuery;
use super::{ApiError, App, Scope};
use crate::http::{Request, Response};

/// `GET /plants/changes` (a token or a ticket).
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
    // The gate ran (a GET has no body to resume after).
    let granted = call
        .granted
        .ok_or(ApiError::Unauthorized { presented: false })?;
    // Not UTF-8: not an id of ours, so a reset, as for any other.
    let last_event_id = request
        .header("last-event-id")
        .map(|id| std::str::from_utf8(id).unwrap_or("?"))
        .or(query.last_event_id.as_deref());
    let subscriber = app
        .changes
        .subscribe(last_event_id, query.tag, waker, granted.alive);
    Ok(Response::stream(200, "text/event-stream", subscriber)
        .with_header("Cache-Control", "no-store")
        .with_header("X-Accel-Buffering", "no"))
}

/// `POST /plants/changes/tickets` (bearer): a ticket for the feed, with
/// the token's scope, so a page knows what it may offer. The JSON is
/// written by hand: a ticket is base64url and a scope a word, neither
/// needs escaping (a derived serializer costs the small build more).
pub(super) fn ticket(
    app: &App,
    request: &mut Request<'_>,
    call: Call,
) -> Result<Response, ApiError> {
    // The gate passed on this header's token (this route takes no ticket).
    let token = request.header("authorization").and_then(bearer);
    let (Some(token), Some(granted)) = (token, call.granted) else {
        return Err(ApiError::Unauthorized { presented: false });
    };
    // With `--read-only` no token may change anything: the page is told
    // `read`, so that it offers no change that would be refused.
    let offered = if app.read_only {
        Scope::Read
    } else {
        granted.scope
    };
    let body = format!(
        r#"{{"ticket":"{}","scope":"{}","expiresIn":{}}}"#,
        app.tickets.mint(token, granted.scope),
        offered.name(),
        app.tickets.ttl().as_secs()
    );
    Ok(Response::bytes(200, "application/json", body.into_bytes())
        .with_header("Cache-Control", "no-store"))
}
