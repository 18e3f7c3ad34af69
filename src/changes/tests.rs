//! The hub resuming from outside its history through a shared change log
//! (a stand-in for the database's, answering reads when told to), and
//! without one (in memory), pulled by hand as the engine pulls a stream.

use std::ops::RangeInclusive;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::event::Event;
use super::resume::{MOST_READ_BACK, Start};
use super::{Hub, Subscriber};
use crate::http::{Fill, Stream, counting_waker};
use crate::lock::lock;
use crate::model::{ChangeKind, ChangeLog, NotDone, Plant, PlantChange, Reply, Unavailable};

/// A read asked of the log, waiting for its answer.
type Asked = (u64, u64, Box<dyn Reply<Vec<PlantChange>>>);

/// A change log holding `changes`, or failing every read. It answers a
/// read when told to ([`Log::answer_reads`]) and keeps what it was asked; it
/// answers its last number at once.
struct Log {
    changes: Vec<PlantChange>,
    failing: bool,
    reads: Mutex<Vec<(u64, u64)>>,
    waiting: Mutex<Vec<Asked>>,
}

impl Log {
    /// What `made` makes, or (failing) why not.
    fn answer<T>(&self, made: impl FnOnce() -> T) -> Result<T, NotDone> {
        if self.failing {
            Err(Unavailable::Down.into())
        } else {
            Ok(made())
        }
    }

    /// Answers the reads asked for so far.
    fn answer_reads(&self) {
        let waiting = std::mem::take(&mut *lock(&self.waiting));
        for (after, upto, answer) in waiting {
            let held = self
                .changes
                .iter()
                .filter(|c| c.seq > after && c.seq <= upto);
            answer.answer(self.answer(|| held.cloned().collect()));
        }
    }
}

impl ChangeLog for Log {
    fn read(&self, after: u64, upto: u64, _bytes: usize, answer: Box<dyn Reply<Vec<PlantChange>>>) {
        lock(&self.reads).push((after, upto));
        lock(&self.waiting).push((after, upto, answer));
    }

    fn last(&self, answer: Box<dyn Reply<u64>>) {
        answer.answer(self.answer(|| self.changes.last().map_or(0, |c| c.seq)));
    }
}

fn change(seq: u64) -> PlantChange {
    PlantChange {
        seq,
        id: seq as i64,
        kind: ChangeKind::Created,
        plant: Some(Plant {
            name: format!("p{seq}"),
            tag: None,
        }),
    }
}

/// A hub of epoch 7 on a log that holds the changes `held`, with the
/// first `handed` handed to it before any stream.
fn hub(held: RangeInclusive<u64>, handed: u64, failing: bool) -> (Arc<Hub>, Arc<Log>) {
    let log = Arc::new(Log {
        changes: held.map(change).collect(),
        failing,
        reads: Mutex::new(Vec::new()),
        waiting: Mutex::new(Vec::new()),
    });
    let hub = Hub::new(Some(7), 0, Some(Arc::clone(&log) as Arc<dyn ChangeLog>));
    for seq in 1..=handed {
        hub.publish(&change(seq));
    }
    (hub, log)
}

/// A credential that stays valid.
fn alive() -> Arc<AtomicBool> {
    Arc::new(AtomicBool::new(true))
}

fn subscribe(hub: &Arc<Hub>, id: &str) -> Subscriber {
    hub.subscribe(Some(id), None, counting_waker().0, alive())
}

/// What a pull sends.
fn pull(subscriber: &mut Subscriber) -> String {
    let mut out = Vec::new();
    assert!(matches!(subscriber.fill(&mut out, 1 << 20), Fill::Idle));
    String::from_utf8(out).unwrap()
}

/// The text of the events of these changes.
fn events(seqs: &[u64]) -> String {
    let bytes: Vec<u8> = seqs
        .iter()
        .flat_map(|&seq| Event::new(7, &change(seq)).bytes().to_vec())
        .collect();
    String::from_utf8(bytes).unwrap()
}

#[test]
fn a_stream_from_before_the_history_is_filled_from_the_log_and_shares_the_read() {
    let (hub, log) = hub(1..=5, 5, false);
    let mut first = subscribe(&hub, "7-2");
    let mut second = subscribe(&hub, "7-3");
    let mut older = subscribe(&hub, "7-1");
    assert_eq!(pull(&mut first), "", "waits for the read");
    assert_eq!(pull(&mut second), "", "waits for the same read");
    assert_eq!(pull(&mut older), "", "waits for that read to end");
    assert_eq!(*lock(&log.reads), [(2, 5)]);
    log.answer_reads();
    assert_eq!(pull(&mut first), events(&[3, 4, 5]));
    assert_eq!(pull(&mut second), events(&[4, 5]));
    assert_eq!(pull(&mut older), "", "reads what it still lacks");
    assert_eq!(*lock(&log.reads), [(2, 5), (1, 2)]);
    log.answer_reads();
    assert_eq!(pull(&mut older), events(&[2, 3, 4, 5]));
    hub.publish(&change(6));
    assert_eq!(pull(&mut first), events(&[6]));
}

#[test]
fn a_read_that_cannot_reach_the_id_is_a_reset_from_the_last_event() {
    // The log no longer holds 1 and 2 (pruned): resuming after 1 needs 2.
    let (hub, log) = hub(3..=5, 5, false);
    let mut late = subscribe(&hub, "7-1");
    assert_eq!(pull(&mut late), "");
    log.answer_reads();
    let reset = pull(&mut late);
    assert!(reset.starts_with("id: 7-5\nevent: reset\n"), "{reset}");
    assert!(reset.contains("too far behind"), "{reset}");
    // More than the history could ever hold: no read at all.
    let (far, far_log) = self::hub(1..=MOST_READ_BACK + 2, MOST_READ_BACK + 2, false);
    let mut too_far = subscribe(&far, "7-1");
    assert!(pull(&mut too_far).contains("too far behind"));
    assert!(lock(&far_log.reads).is_empty());
}

#[test]
fn a_log_that_cannot_be_read_is_said_so() {
    let (hub, log) = hub(1..=5, 5, true);
    let mut behind = subscribe(&hub, "7-2");
    assert_eq!(pull(&mut behind), "");
    log.answer_reads();
    assert!(pull(&mut behind).contains("the change log could not be read"));
    // Past the last event: said at once, not after the wait.
    let mut ahead = subscribe(&hub, "7-6");
    assert!(pull(&mut ahead).contains("the change log could not be read"));
}

/// The short rounds that bound a wait past the last event wake only the
/// streams that wait so: every other stream is woken by an event or a
/// heartbeat round, as before.
#[test]
fn a_short_round_wakes_only_the_streams_waiting_ahead() {
    use std::sync::atomic::Ordering;
    let (hub, _) = hub(1..=8, 5, false);
    // The test turns the rounds itself: the feed's delivery thread, which
    // the first stream would start, must not take one of them.
    hub.delivery
        .set(())
        .expect("no stream yet, so no delivery thread");
    let (waker, idle_wakes) = counting_waker();
    let mut idle = hub.subscribe(Some("7-5"), None, waker, alive());
    let (waker, ahead_wakes) = counting_waker();
    let mut ahead = hub.subscribe(Some("7-7"), None, waker, alive());
    // It waits for the follower for a second at most; a loaded machine
    // must not turn this test into one of that deadline.
    let Start::Ahead { until, .. } = &mut ahead.start else {
        panic!("7-7 is past the last event: the stream waits ahead");
    };
    *until = Instant::now() + Duration::from_secs(3600);
    // The wakes each gets from one round (the log's answer wakes too).
    let mut woken = Vec::new();
    let mut round = || {
        let before = (
            idle_wakes.load(Ordering::Relaxed),
            ahead_wakes.load(Ordering::Relaxed),
        );
        hub.round(&mut woken);
        (
            idle_wakes.load(Ordering::Relaxed) - before.0,
            ahead_wakes.load(Ordering::Relaxed) - before.1,
        )
    };
    assert_eq!(
        (pull(&mut idle), pull(&mut ahead)),
        (String::new(), String::new())
    );
    assert_eq!(round(), (1, 1), "the first round wakes all");
    assert_eq!(
        (pull(&mut idle), pull(&mut ahead)),
        (String::new(), String::new())
    );
    assert_eq!(round(), (0, 1), "a short round: only the one waiting ahead");
    pull(&mut ahead);
    hub.publish(&change(6));
    assert_eq!(round(), (1, 1), "an event wakes all");
}

#[test]
fn an_id_the_log_holds_past_the_last_event_waits_for_it() {
    let (hub, _) = hub(1..=8, 5, false);
    let mut ahead = subscribe(&hub, "7-6");
    assert_eq!(pull(&mut ahead), "", "6 is the log's: it waits");
    hub.publish(&change(6));
    assert_eq!(pull(&mut ahead), "", "resumed after 6: nothing yet");
    hub.publish(&change(7));
    assert_eq!(pull(&mut ahead), events(&[7]));
    assert_eq!(lock(&hub.state).ahead, 0);
    // Past the log's last: at once, no id of the feed.
    let mut foreign = subscribe(&hub, "7-9");
    let reset = pull(&mut foreign);
    assert!(reset.contains("not an event id of this feed"), "{reset}");
    // Held by the log, but not handed on in time.
    let mut lagging = subscribe(&hub, "7-8");
    assert_eq!(pull(&mut lagging), "");
    assert_eq!(lock(&hub.state).ahead, 1, "rounds come sooner meanwhile");
    if let Start::Ahead { until, .. } = &mut lagging.start {
        *until = Instant::now();
    }
    let reset = pull(&mut lagging);
    assert!(reset.starts_with("id: 7-7\nevent: reset\n"), "{reset}");
    assert!(reset.contains("this instance is behind the change log"));
    let waiting = subscribe(&hub, "7-8");
    assert_eq!(lock(&hub.state).ahead, 1);
    drop(waiting);
    assert_eq!(lock(&hub.state).ahead, 0, "a stream closed while waiting");
}

#[test]
fn without_a_log_an_id_outside_the_history_is_a_reset_at_once() {
    let hub = Hub::new(Some(7), 0, None);
    for seq in 1..=5 {
        hub.publish(&change(seq));
    }
    let mut behind = subscribe(&hub, "7-2");
    assert!(pull(&mut behind).contains("too far behind"));
    let mut ahead = subscribe(&hub, "7-6");
    assert!(pull(&mut ahead).contains("not an event id of this feed"));
    // The history starts with the first stream.
    hub.publish(&change(6));
    let mut after = subscribe(&hub, "7-5");
    assert_eq!(pull(&mut after), events(&[6]));
}

#[test]
fn a_stream_whose_credentials_are_revoked_ends_at_its_next_pull() {
    let hub = Hub::new(Some(7), 0, None);
    let revoked = alive();
    let (waker, woken) = counting_waker();
    let mut stream = hub.subscribe(None, None, waker, Arc::clone(&revoked));
    assert_eq!(pull(&mut stream), "id: 7-0\n\n", "waits, as any stream");
    revoked.store(false, Ordering::Release);
    hub.wake_all();
    // Well before a round would come of itself (`IDLE_ROUND`).
    let deadline = Instant::now() + super::IDLE_ROUND - Duration::from_secs(2);
    while woken.load(Ordering::Acquire) == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(woken.load(Ordering::Acquire) > 0, "the next round wakes it");
    let mut out = Vec::new();
    assert!(matches!(stream.fill(&mut out, 1 << 20), Fill::Done));
    assert!(out.is_empty());
}
