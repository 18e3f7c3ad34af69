//! The change feed behind `GET /plants/changes`: every acknowledged
//! change as a Server-Sent Event, in commit order, to every subscriber.
//!
//! One [`Hub`] per server. The door's change hook hands it each change
//! once it is durable (after the journal's write, and its `fdatasync` with
//! `--sync always`; after the database's COMMIT); the hub encodes it once,
//! as the bytes of one event, and appends it to its history. The history
//! is bounded in bytes ([`HISTORY_BYTES`]), oldest event dropped first.
//! A subscriber ([`Subscriber`], the engine's `Stream`) is a position in
//! that history: it copies the events after its position as its client
//! takes them. So a subscriber costs its position and the engine's one
//! piece of output, a writer never waits for a subscriber, and one that
//! stops reading is dropped (its connection cut short) once the event it
//! needs next has left the history: the history is the bounded buffer of
//! every subscriber at once.
//!
//! Ids are `<epoch>-<seq>`: `seq` is the door's number. In memory it
//! counts from 1 in each process and `epoch` is when this hub started, in
//! milliseconds since 1970, so ids increase across restarts too. With the
//! database both are the cluster's (the change log's), so an id means the
//! same on every instance and across restarts. `Last-Event-ID` resumes after that
//! event when it is of this epoch and still in the history. With the
//! database, an id older than the history, or past the last event this
//! instance was handed, is looked up in the database's change log
//! (`resume`). Otherwise (a restart, too old, not an id of ours) the
//! stream starts with one `reset` event: re-list, then go on from its id.
//!
//! The history starts with the first stream: until one is opened, nobody
//! can hold an id of this process to resume from (in memory), or the
//! change log has them (the database), so changes are only counted, and a
//! writer pays one lock for the feed.
//!
//! Delivery is in rounds. A writer only appends (and signals the first
//! event since the last round); the feed's own thread then wakes every
//! stream that waits for an event, and waits [`ROUND`] before the next
//! round, so that under many changes a stream is woken at most once a
//! round and takes every event since in one write. One change alone is
//! delivered at once; the writers never wake a stream themselves.
//!
//! A new stream first sends `id: <the last id>` alone: an `EventSource`
//! takes it as its last event id without firing an event, so even a
//! client that has seen no change can resume. No stream stays silent for
//! [`HEARTBEAT`] (proxies close a silent connection): rounds run at least
//! every [`IDLE_ROUND`], and a stream silent for `HEARTBEAT - IDLE_ROUND`
//! at a round sends a comment. The engine's idle timeout does not apply to a stream (it
//! answers `Fill::Idle`), its write timeout does.
//!
//! `?tag=` keeps the creates and replaces that leave a plant with that tag,
//! and every delete (a delete does not say which tag the plant had).

mod event;
mod resume;
#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use log::info;

use crate::http::{Fill, Stream, StreamWaker};
use crate::lock::lock;
use crate::metrics::{Exposition, Kind};
use crate::model::{ChangeHook, ChangeLog, PlantChange, plural};

pub use event::Resume;

use event::{FOREIGN, TOO_FAR};
use resume::{Fills, Start, Step};

/// The most bytes of events the history keeps (and so the furthest a
/// subscriber may fall behind before it is dropped).
pub const HISTORY_BYTES: usize = 1 << 20;
/// The longest a stream stays silent: a comment comes before.
pub const HEARTBEAT: Duration = Duration::from_secs(15);
/// The shortest time between two delivery rounds.
pub const ROUND: Duration = Duration::from_millis(5);
/// The longest time between two delivery rounds (for the heartbeats).
pub const IDLE_ROUND: Duration = Duration::from_secs(5);

/// The feed: the history and who is waiting for its next event.
pub struct Hub {
    epoch: u64,
    state: Mutex<State>,
    /// Signalled by the first event after a round.
    due: Condvar,
    /// The delivery thread, started with the first subscriber.
    delivery: OnceLock<()>,
    /// A stream has been opened: until then changes are only counted, not
    /// encoded and kept (the writers' cost of the feed is then one lock).
    /// In memory nobody can hold an id to resume from before; with a
    /// shared change log, the history is filled from it (`resume`).
    followed: AtomicBool,
    /// The change log every instance shares, if any (`resume`).
    log: Option<Arc<dyn ChangeLog>>,
}

#[derive(Default)]
struct State {
    /// The events kept, oldest first, numbered `first..=last`.
    events: VecDeque<event::Event>,
    /// Bytes of `events`.
    bytes: usize,
    /// The number of the last event (0: none yet).
    last: u64,
    /// Events came since the last round.
    due: bool,
    /// Subscribers that answered `Fill::Idle` since the last round, each
    /// once (by number), with their wakers: woken
    /// by the next event or heartbeat. A subscriber leaves it when dropped.
    sleeping: Vec<(u64, StreamWaker)>,
    /// As `sleeping`, for the subscribers waiting for an id past `last`
    /// (`resume`): they alone are woken by the short rounds that bound
    /// their wait.
    sleeping_ahead: Vec<(u64, StreamWaker)>,
    /// When the last round that woke `sleeping` ran (`None`: none yet).
    woke_all: Option<Instant>,
    /// Rounds so far: a subscriber that registered in this one is in
    /// `sleeping` (or `sleeping_ahead`) already.
    rounds: u64,
    /// Reads of the change log that fill the history (`resume`).
    fills: Fills,
    /// Subscribers waiting for an id past `last` (`resume`).
    ahead: usize,
    /// Subscribers now, numbers handed out, events published, and
    /// subscribers dropped for falling behind (for the metrics).
    subscribers: u64,
    numbered: u64,
    published: u64,
    dropped: u64,
}

impl State {
    /// The number of the oldest event kept (`last + 1` when none is).
    fn first(&self) -> u64 {
        self.last + 1 - self.events.len() as u64
    }
}

impl Hub {
    /// An empty feed of `epoch` (`None`: now) whose first change will be
    /// numbered `last + 1`, and the change log it shares with other
    /// instances, if any.
    pub fn new(epoch: Option<u64>, last: u64, log: Option<Arc<dyn ChangeLog>>) -> Arc<Hub> {
        let epoch = epoch.unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        });
        Arc::new(Hub {
            epoch,
            state: Mutex::new(State {
                last,
                ..State::default()
            }),
            due: Condvar::new(),
            delivery: OnceLock::new(),
            followed: AtomicBool::new(false),
            log,
        })
    }

    /// The change hook that feeds this hub (for `Plants::set_change_hook`).
    pub fn hook(self: &Arc<Hub>) -> ChangeHook {
        let hub = Arc::clone(self);
        Box::new(move |change| hub.publish(change))
    }

    /// Appends `change` (the next in commit order) for the next round. A
    /// change numbered past the next (the database's log no longer held
    /// the ones between) starts the history again: a stream that needed
    /// those is dropped, and resuming it gets a `reset`.
    fn publish(&self, change: &PlantChange) {
        if !self.followed.load(Ordering::Acquire) {
            let mut state = lock(&self.state);
            // Checked again under the lock, which `subscribe` sets it under.
            if !self.followed.load(Ordering::Relaxed) {
                state.last = change.seq;
                state.published += 1;
                return;
            }
        }
        let event = event::Event::new(self.epoch, change);
        let mut state = lock(&self.state);
        if change.seq <= state.last {
            return;
        }
        if change.seq != state.last + 1 {
            state.events.clear();
            state.bytes = 0;
        }
        state.last = change.seq;
        state.bytes += event.cost();
        state.events.push_back(event);
        while state.bytes > HISTORY_BYTES {
            let Some(old) = state.events.pop_front() else {
                break;
            };
            state.bytes -= old.cost();
        }
        state.published += 1;
        if !state.due {
            state.due = true;
            self.due.notify_one();
        }
    }

    /// A new subscriber, resuming as `last_event_id` asks, keeping only
    /// the changes that `tag` selects; `waker` makes its stream pulled
    /// again; it ends (cleanly) once `alive` is false (its credentials
    /// were revoked: [`wake_all`](Self::wake_all) makes it notice).
    pub fn subscribe(
        self: &Arc<Hub>,
        last_event_id: Option<&str>,
        tag: Option<String>,
        waker: StreamWaker,
        alive: Arc<AtomicBool>,
    ) -> Subscriber {
        self.start_delivery();
        let mut state = lock(&self.state);
        self.followed.store(true, Ordering::Release);
        state.subscribers += 1;
        state.numbered += 1;
        let number = state.numbered;
        let resume = Resume::from_header(last_event_id, self.epoch, state.first(), state.last);
        let mut preface = Vec::new();
        let (mut next, mut start) = (state.last + 1, Start::Ready);
        match (resume, self.log.is_some()) {
            (Resume::After(seq), _) => next = seq + 1,
            (Resume::Fresh, _) => {
                event::id_line(&mut preface, self.epoch, state.last);
                preface.push(b'\n');
            }
            (Resume::Behind(after), true) => {
                start = Start::Behind {
                    after,
                    awaited: None,
                }
            }
            (Resume::Ahead(seq), true) => start = Start::ahead(&mut state, seq),
            (Resume::Behind(_), false) => {
                event::reset(&mut preface, self.epoch, state.last, TOO_FAR)
            }
            (Resume::Ahead(_), false) => {
                event::reset(&mut preface, self.epoch, state.last, FOREIGN)
            }
            (Resume::Reset(why), _) => event::reset(&mut preface, self.epoch, state.last, why),
        }
        drop(state);
        let subscriber = Subscriber {
            hub: Arc::clone(self),
            number,
            next,
            tag,
            waker,
            alive,
            preface,
            sent: Instant::now(),
            registered: None,
            start,
        };
        if let Some(log) = &self.log {
            self.ask_last(&**log, &subscriber);
        }
        subscriber
    }

    /// Wakes every stream at the next round, events or not: those whose
    /// `alive` turned false end.
    pub fn wake_all(&self) {
        let mut state = lock(&self.state);
        state.due = true;
        self.due.notify_one();
    }

    /// Runs the delivery rounds, while the hub lives.
    fn start_delivery(self: &Arc<Hub>) {
        self.delivery.get_or_init(|| {
            let hub: Weak<Hub> = Arc::downgrade(self);
            let spawned = std::thread::Builder::new()
                .name("feed".into())
                .spawn(move || {
                    let mut woken = Vec::new();
                    while let Some(hub) = hub.upgrade() {
                        hub.round(&mut woken);
                        drop(hub);
                        std::thread::sleep(ROUND);
                    }
                });
            if let Err(e) = spawned {
                log::warn!("change feed: no delivery thread ({e}): streams get no events");
            }
        });
    }

    /// Waits for an event (at most `IDLE_ROUND`), then wakes every stream
    /// waiting for one. While a stream waits for an id past the last
    /// event, the wait is at most `AHEAD_ROUND`, and a round that comes of
    /// that alone wakes only such streams. `woken` is an empty list to
    /// swap in (two lists take turns, so a round allocates nothing).
    fn round(&self, woken: &mut Vec<(u64, StreamWaker)>) {
        let mut state = lock(&self.state);
        if !state.due {
            let wait = if state.ahead > 0 {
                resume::AHEAD_ROUND
            } else {
                IDLE_ROUND
            };
            state = match self.due.wait_timeout(state, wait) {
                Ok((state, _)) => state,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
        let now = Instant::now();
        let all = state.due
            || state
                .woke_all
                .is_none_or(|at| now.duration_since(at) >= IDLE_ROUND);
        state.due = false;
        if all {
            std::mem::swap(&mut state.sleeping, woken);
            state.woke_all = Some(now);
        }
        let ahead = std::mem::take(&mut state.sleeping_ahead);
        woken.extend(ahead);
        state.rounds += 1;
        drop(state);
        for (_, waker) in woken.iter() {
            waker.wake();
        }
        woken.clear();
    }

    /// The feed's metrics.
    pub fn render(&self, out: &mut Exposition) {
        let state = lock(&self.state);
        out.single(
            "plantstore_feed_subscribers",
            Kind::Gauge,
            "Open change feed streams.",
            state.subscribers,
        );
        out.single(
            "plantstore_feed_events_total",
            Kind::Counter,
            "Changes published to the change feed.",
            state.published,
        );
        out.single(
            "plantstore_feed_dropped_total",
            Kind::Counter,
            "Change feed streams dropped for falling behind the history.",
            state.dropped,
        );
        out.single(
            "plantstore_feed_history_bytes",
            Kind::Gauge,
            "Bytes of events the change feed keeps for resuming streams.",
            state.bytes,
        );
    }
}

/// One open stream of the feed: the events after its position, as the
/// client takes them.
pub struct Subscriber {
    hub: Arc<Hub>,
    number: u64,
    /// The number of the next event to consider.
    next: u64,
    tag: Option<String>,
    waker: StreamWaker,
    /// False once its credentials were revoked: it ends.
    alive: Arc<AtomicBool>,
    /// Sent before any event: the id line, or the reset event.
    preface: Vec<u8>,
    /// When it last sent something.
    sent: Instant,
    /// The round in which it last joined `sleeping`.
    registered: Option<u64>,
    /// Until `Ready`, its position is still to be found (`resume`).
    start: Start,
}

impl Stream for Subscriber {
    fn fill(&mut self, out: &mut Vec<u8>, want: usize) -> Fill {
        if !self.alive.load(Ordering::Acquire) {
            return Fill::Done;
        }
        let before = out.len();
        // Its own handle: the lock is held while the subscriber changes.
        let hub = Arc::clone(&self.hub);
        let mut state = lock(&hub.state);
        match self.resolve(&mut state) {
            Step::Ready => {}
            step => {
                self.sleep(&mut state);
                drop(state);
                if let (Step::Read(read), Some(log)) = (step, &hub.log) {
                    hub.read_back(&**log, read);
                }
                self.heartbeat(out, before);
                return Fill::Idle;
            }
        }
        out.append(&mut self.preface);
        let first = state.first();
        if self.next < first {
            state.dropped += 1;
            drop(state);
            info!(
                "change feed: a subscriber fell {} event{} behind and was dropped",
                first - self.next,
                plural(first - self.next)
            );
            return Fill::Failed;
        }
        let skip = usize::try_from(self.next - first)
            .map_or(state.events.len(), |n| n.min(state.events.len()));
        for event in state.events.range(skip..) {
            if out.len() - before >= want {
                self.sent = Instant::now();
                return Fill::More;
            }
            self.next = event.seq + 1;
            if event.selected_by(self.tag.as_deref()) {
                out.extend_from_slice(event.bytes());
            }
        }
        self.sleep(&mut state);
        drop(state);
        self.heartbeat(out, before);
        Fill::Idle
    }
}

impl Subscriber {
    /// Joins `sleeping`, once a round: woken by the next round.
    fn sleep(&mut self, state: &mut State) {
        if self.registered != Some(state.rounds) {
            self.registered = Some(state.rounds);
            let list = match self.start {
                Start::Ahead { .. } => &mut state.sleeping_ahead,
                _ => &mut state.sleeping,
            };
            list.push((self.number, self.waker.clone()));
        }
    }

    /// After a pull that appended from `before` on: a comment if the
    /// stream would otherwise stay silent too long.
    fn heartbeat(&mut self, out: &mut Vec<u8>, before: usize) {
        let now = Instant::now();
        if out.len() == before && now.duration_since(self.sent) >= HEARTBEAT - IDLE_ROUND {
            out.extend_from_slice(b":\n\n");
        }
        if out.len() > before {
            self.sent = now;
        }
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        let mut state = lock(&self.hub.state);
        let number = self.number;
        state.sleeping.retain(|(n, _)| *n != number);
        state.sleeping_ahead.retain(|(n, _)| *n != number);
        state.subscribers -= 1;
        if matches!(self.start, Start::Ahead { .. }) {
            state.ahead -= 1;
        }
    }
}
