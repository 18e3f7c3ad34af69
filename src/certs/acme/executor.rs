//! The smallest executor that drives the ACME client's futures on the
//! `acme` thread: poll with a waker that does nothing, since nothing here
//! ever waits on an event source. Our HTTP client (`http.rs`) does its
//! blocking I/O inside the poll and returns ready, so every future the
//! protocol library builds over it completes in its first poll.
//!
//! Why not a runtime: the library's own waits (`poll_ready`,
//! `poll_certificate`) sleep on tokio's timer, which needs one; the driver
//! never calls them (it polls with `refresh` and sleeps the thread
//! itself), so a runtime would be weight for nothing. A future that still
//! says `Pending` (one of those waits, called by mistake) is polled a
//! bounded number of times and then dropped with an error, never spun on
//! forever.

use std::future::Future;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// How many polls a future gets before it is given up on.
const POLLS: u32 = 20;
/// The pause between two polls of a future that was not ready.
const PAUSE: Duration = Duration::from_millis(50);

/// A future that did not complete within its polls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stalled;

impl std::fmt::Display for Stalled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the ACME client waited on something that never came")
    }
}

/// Runs `future` to completion on this thread.
pub fn block_on<F: Future>(future: F) -> Result<F::Output, Stalled> {
    let mut future = std::pin::pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    for poll in 0..POLLS {
        if let Poll::Ready(value) = future.as_mut().poll(&mut cx) {
            return Ok(value);
        }
        if poll + 1 < POLLS {
            std::thread::sleep(PAUSE);
        }
    }
    Err(Stalled)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ready_future_completes_in_one_poll() {
        let value = block_on(async { 40 + 2 });
        assert_eq!(value, Ok(42));
    }

    #[test]
    fn a_future_that_never_completes_is_given_up_on() {
        assert_eq!(block_on(std::future::pending::<()>()), Err(Stalled));
    }

    #[test]
    fn a_future_pending_once_completes_on_the_next_poll() {
        let mut first = true;
        let future = std::future::poll_fn(move |_| {
            if std::mem::take(&mut first) {
                Poll::Pending
            } else {
                Poll::Ready(7)
            }
        });
        assert_eq!(block_on(future), Ok(7));
    }
}
