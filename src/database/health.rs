//! The heartbeat: one thread, one connection of its own, that asks the
//! database a trivial question every [`BEAT`] and calls it unreachable
//! when no answer comes within [`ANSWER`] (stopped, refusing, or frozen
//! with its connections open: the case no client timeout sees). No
//! request pays for it, and the pool knows within about `BEAT + ANSWER`
//! either way.
//!
//! Unreachable: `/healthz` says 503 with the reason, new requests are
//! refused at once, those waiting are refused, and the watchdog gives up
//! on those already running on a connection (they are answered 503; a
//! change among them may still commit if the database comes back, which
//! the guide says). Reachable again: workers waiting before connecting
//! again try at once.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread;
use std::time::{Duration, Instant};

use log::{info, warn};

use super::state::PoolState;
use super::{Connect, DbError, JobFailure};

/// How often the heartbeat asks.
pub const BEAT: Duration = Duration::from_millis(250);
/// How long an answer may take before the database counts as unreachable.
pub const ANSWER: Duration = Duration::from_millis(500);

/// The heartbeat's loop, until the pool stops.
pub(super) fn beat(shared: &Arc<PoolState>) {
    let mut client: Option<postgres::Client> = None;
    while !shared.is_stopping() {
        let started = Instant::now();
        let no_answer = |e: postgres::Error| {
            format!(
                "no answer within {} ms: {}",
                ANSWER.as_millis(),
                DbError::from(e)
            )
        };
        let asked = match client.as_mut() {
            Some(c) => c.is_valid(ANSWER).map_err(no_answer),
            // On a frozen server this waits until it thaws (the client
            // has no timeout past the TCP connect); it is unreachable
            // meanwhile, which is what it says.
            None => match shared.config.connect_health() {
                Err(e) => Err(format!("cannot connect: {e}")),
                Ok(mut c) => c.is_valid(ANSWER).map_err(no_answer).map(|()| {
                    client = Some(c);
                }),
            },
        };
        match asked {
            Ok(()) => {
                if !shared.answering.swap(true, Ordering::AcqRel) {
                    info!("database {}: answering again", shared.config.describe());
                    shared.back.fetch_add(1, Ordering::AcqRel);
                }
            }
            Err(e) => {
                shared.set_failure(e.clone());
                if shared.answering.swap(false, Ordering::AcqRel) {
                    warn!(
                        "database {}: {e}; answering 503 until it is back",
                        shared.config.describe(),
                    );
                }
                shared.refuse_all(JobFailure::Down(shared.failure()));
                // A client that timed out is kept and asked again (its late
                // answer is passed over): closing it would wait for a
                // frozen server to end the connection, and connecting again
                // takes a connection slot the server may not have to give.
                // One the server closed is made again.
                if client.as_ref().is_some_and(postgres::Client::is_closed) {
                    client = None;
                }
            }
        }
        let next = started + BEAT;
        while !shared.is_stopping() && Instant::now() < next {
            thread::sleep((next - Instant::now()).min(Duration::from_millis(50)));
        }
    }
}
