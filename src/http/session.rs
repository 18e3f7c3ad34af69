//! Runs the handler for the requests a connection's protocol has ready.
//!
//! The glue between the sans-I/O `Protocol` and the application: shared by
//! the event loops and the replay harness, so both serve a connection the
//! same way. A handler that panics answers 500 (the message and location
//! are logged by the panic hook, the request here) and the server lives on.
//! It keeps no state and does no I/O: the driver reads, writes and keeps
//! time.

use std::net::SocketAddr;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::Instant;

use log::error;

use super::deferred::{Mailbox, Ticket};
use super::protocol::{Action, Handled, Protocol};
use super::request::{Deferral, Request};
use super::{Handler, Response};
use crate::transport::Https;

/// Where a connection's deferred responses go: its loop's mailbox, and its
/// place there.
pub(crate) struct Home<'a> {
    pub(crate) mailbox: &'a Arc<dyn Mailbox>,
    pub(crate) slot: usize,
    pub(crate) conn: u64,
}

/// Runs the handler for every request `protocol` has ready at `now`;
/// `https`: the connection is TLS, with what it serves.
pub(crate) fn drive(
    protocol: &mut Protocol,
    handler: &dyn Handler,
    peer: SocketAddr,
    home: Option<&Home<'_>>,
    https: Option<&Https>,
    now: Instant,
) {
    while protocol.poll(now) != Action::Wait {
        let deferral = home.map(|home| Deferral {
            mailbox: home.mailbox,
            ticket: Ticket {
                slot: home.slot,
                conn: home.conn,
                request: protocol.request_number(),
            },
        });
        let started = protocol.started();
        let (head, inbox, notes) = protocol.request_parts();
        let secure = https.is_some();
        let mut request = Request::new(head, inbox, notes, peer, started, deferral, secure);
        let answer = match catch_unwind(AssertUnwindSafe(|| handler.handle(&mut request))) {
            Err(_) => {
                error!(
                    "handler panicked on {} {}",
                    request.method(),
                    request.path()
                );
                Handled::Now(Response::error(500, "internal error"))
            }
            Ok(_) if request.awaits_body() => Handled::NeedsBody,
            Ok(placeholder) if request.is_deferred() => Handled::Later(placeholder.hold_ms()),
            Ok(response) => Handled::Now(secured(response, https)),
        };
        protocol.answer(answer, now);
    }
}

/// `response` as it goes out over TLS (`https`): with
/// `Strict-Transport-Security` when `--hsts` asks for it.
pub(crate) fn secured(response: Response, https: Option<&Https>) -> Response {
    match https.and_then(Https::hsts) {
        Some(hsts) => response.with_header("Strict-Transport-Security", hsts),
        None => response,
    }
}
