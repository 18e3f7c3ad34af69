//! Resuming from outside the history, where ids mean the same on every
//! instance (a shared [`ChangeLog`]: the database's). Without one, an id
//! older than the history is `too far behind` and one past its last event
//! is not one of ours, and the stream starts with a `reset` at once.
//!
//! Older than the history (an instance that had no stream yet keeps
//! nothing, or it was asked for more than it keeps): the history is filled
//! from the log, newest first, up to its [`HISTORY_BYTES`], so the bound is
//! the one an instance that kept every event since would have. One read at
//! a time, on the log's thread (a pool worker), never under the hub's lock
//! and never on an event loop: the stream answers `Idle` until the read is
//! in. Streams resuming from the same place share the read; one that needs
//! older changes than the running read asks for waits for it, then reads
//! again. More than [`MOST_READ_BACK`] changes back can never fit and is
//! `too far behind` without a read; the log bounds its read in bytes, in
//! statements and in time, and answers once whatever happens.
//!
//! Past its last event (another instance's stream is up to a follower's
//! round ahead of this one): the log's last number says whether the id is
//! one at all; if it is, the stream waits until the follower hands it on,
//! at most [`AHEAD_WAIT`], with rounds every [`AHEAD_ROUND`] meanwhile so
//! the wait ends on time.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::event::{self, Event, FOREIGN, LAGGING, OVERHEAD, TOO_FAR, UNREADABLE};
use super::{HISTORY_BYTES, Hub, State, Subscriber};
use crate::lock::lock;
use crate::model::{ChangeLog, NotDone, PlantChange};

/// Every event costs more than `OVERHEAD`, so more changes than this
/// never fit the history.
pub(super) const MOST_READ_BACK: u64 = (HISTORY_BYTES / OVERHEAD) as u64;
/// The longest a stream waits for its instance to be handed an id the
/// log holds.
pub(super) const AHEAD_WAIT: Duration = Duration::from_secs(1);
/// Rounds come at least this often while a stream waits so.
pub(super) const AHEAD_ROUND: Duration = Duration::from_millis(50);

/// Where a subscriber stands before its first event.
pub(super) enum Start {
    /// Its position is known: `Subscriber::next`, after its preface.
    Ready,
    /// After `after`, older than the history: waits for a read of the
    /// log that reaches it (`awaited`: that read's number).
    Behind { after: u64, awaited: Option<u64> },
    /// After `seq`, past the last event: waits until `until` for the
    /// follower to hand it on, unless the log's last number says it is
    /// no id of the feed.
    Ahead {
        seq: u64,
        until: Instant,
        last: Arc<Mutex<Asked>>,
    },
}

/// The log's answer to "what is your last number?".
#[derive(Clone, Copy)]
pub(super) enum Asked {
    Waiting,
    Last(u64),
    Failed,
}

/// The reads of the log that fill the history.
#[derive(Default)]
pub(super) struct Fills {
    /// The read running: its number, and the change it reads after.
    running: Option<(u64, u64)>,
    started: u64,
    finished: u64,
    /// Why the last read finished may have left a subscriber behind.
    why: &'static str,
}

/// One read of the log: the changes `after + 1 ..= upto`, fitting `room`.
#[derive(Clone, Copy)]
pub(super) struct Read {
    number: u64,
    after: u64,
    upto: u64,
    room: usize,
}

/// What a subscriber that is not ready does next.
pub(super) enum Step {
    Ready,
    Wait,
    /// Wait, once this read is asked for (without the hub's lock).
    Read(Read),
}

impl Subscriber {
    /// Moves the subscriber towards `Ready` with what the hub holds now.
    pub(super) fn resolve(&mut self, state: &mut State) -> Step {
        loop {
            match &mut self.start {
                Start::Ready => return Step::Ready,
                Start::Behind { after, awaited } => {
                    let after = *after;
                    let first = state.first();
                    if after + 1 >= first {
                        self.next = after + 1;
                        self.start = Start::Ready;
                        return Step::Ready;
                    }
                    let room = HISTORY_BYTES.saturating_sub(state.bytes);
                    if first - 1 - after > MOST_READ_BACK || room <= OVERHEAD {
                        return self.reset(state, TOO_FAR);
                    }
                    if let Some(number) = *awaited {
                        let fills = &state.fills;
                        if fills.finished >= number {
                            let why = if fills.finished == number {
                                fills.why
                            } else {
                                TOO_FAR
                            };
                            return self.reset(state, why);
                        }
                    }
                    let fills = &mut state.fills;
                    if let Some((number, from)) = fills.running {
                        if from <= after {
                            *awaited = Some(number);
                        }
                        return Step::Wait;
                    }
                    fills.started += 1;
                    let read = Read {
                        number: fills.started,
                        after,
                        upto: first - 1,
                        room,
                    };
                    fills.running = Some((read.number, after));
                    *awaited = Some(read.number);
                    return Step::Read(read);
                }
                Start::Ahead { seq, until, last } => {
                    let (seq, until) = (*seq, *until);
                    let asked = *lock(last);
                    if seq <= state.last {
                        state.ahead -= 1;
                        self.start = Start::Behind {
                            after: seq,
                            awaited: None,
                        };
                        continue;
                    }
                    let why = match asked {
                        Asked::Last(last) if seq > last => FOREIGN,
                        // The log cannot be read: its follower cannot
                        // catch up either, so no use waiting.
                        Asked::Failed => UNREADABLE,
                        _ if Instant::now() < until => return Step::Wait,
                        Asked::Last(_) => LAGGING,
                        Asked::Waiting => UNREADABLE,
                    };
                    state.ahead -= 1;
                    return self.reset(state, why);
                }
            }
        }
    }

    /// Starts after a `reset` event saying `why`.
    fn reset(&mut self, state: &State, why: &'static str) -> Step {
        event::reset(&mut self.preface, self.hub.epoch, state.last, why);
        self.next = state.last + 1;
        self.start = Start::Ready;
        Step::Ready
    }
}

impl Start {
    /// Where a subscriber asking for `seq`, past the last event, starts:
    /// counted as waiting; the caller then asks the log for its last
    /// number, without the hub's lock ([`Hub::ask_last`]).
    pub(super) fn ahead(state: &mut State, seq: u64) -> Start {
        state.ahead += 1;
        Start::Ahead {
            seq,
            until: Instant::now() + AHEAD_WAIT,
            last: Arc::new(Mutex::new(Asked::Waiting)),
        }
    }
}

impl Hub {
    /// Asks the log for its last number for `subscriber`, which is woken
    /// with the answer.
    pub(super) fn ask_last(&self, log: &dyn ChangeLog, subscriber: &Subscriber) {
        let Start::Ahead { last, .. } = &subscriber.start else {
            return;
        };
        let (last, waker) = (Arc::clone(last), subscriber.waker.clone());
        log.last(Box::new(move |answer: Result<u64, NotDone>| {
            *lock(&last) = answer.map_or(Asked::Failed, Asked::Last);
            waker.wake();
        }));
    }

    /// Asks the log for `read`; its answer fills the history.
    pub(super) fn read_back(self: &Arc<Hub>, log: &dyn ChangeLog, read: Read) {
        let hub = Arc::clone(self);
        log.read(
            read.after,
            read.upto,
            read.room,
            Box::new(move |changes| hub.filled(read, changes)),
        );
    }

    /// Puts what `read` brought before the history, newest first while it
    /// fits and if the history still starts right after it, then wakes the
    /// streams.
    fn filled(&self, read: Read, changes: Result<Vec<PlantChange>, NotDone>) {
        // Encoded before the lock is taken: writers do not wait for it.
        let mut events = Vec::new();
        let mut cost = 0;
        for change in changes.iter().flatten().rev() {
            let event = Event::new(self.epoch, change);
            let expected = read.upto.checked_sub(events.len() as u64);
            if cost + event.cost() > read.room || Some(change.seq) != expected {
                break;
            }
            cost += event.cost();
            events.push(event);
        }
        let mut state = lock(&self.state);
        if state.first() == read.upto + 1 {
            for event in events {
                if state.bytes + event.cost() > HISTORY_BYTES {
                    break;
                }
                state.bytes += event.cost();
                state.events.push_front(event);
            }
        }
        let fills = &mut state.fills;
        fills.running = None;
        fills.finished = read.number;
        fills.why = if changes.is_ok() { TOO_FAR } else { UNREADABLE };
        state.due = true;
        self.due.notify_one();
    }
}
