//! The failure table: failed authentications counted per client key, in
//! a fixed space.
//!
//! Bounds: at most [`ENTRIES`] (4,096) keys, in [`BYTES`] (131,072 bytes,
//! 128 KiB) allocated at the first failure and never grown or freed, so
//! failures from any number of addresses (100,000 in the unit test) cost
//! no more. The keys are spread over 512 buckets of 8 slots by a keyed
//! hash (SipHash, a random key each start, so that no one can aim at
//! another's bucket); one lock guards the table, taken only while it
//! counts something.
//!
//! A count leaks: each key may fail `per_minute` times at once, then one
//! failure more each `60 / per_minute` seconds; while it may not, it is
//! refused for the whole seconds until it may (a 429 with `Retry-After`).
//! A refused request compares no token, so it fails nothing: a count never
//! passes `per_minute`, and it has leaked to nothing a minute after its
//! last failure. IPv6 is counted by /64 and by /48, where a failure counts
//! a quarter, so that a guesser's neighbours in its /48 are not refused
//! for it alone, and spreading guesses over more than four /64s of one
//! /48 gains nothing. Every count leaks at the same pace.
//!
//! Eviction never lowers a count: a new key in a full bucket takes over
//! the slot of the least-failed key in it, count and all, and a key not in
//! the table is judged by the count it would take over (none while its
//! bucket has room). A flooder pushed out comes back to at least its own
//! count (the least of its bucket cannot leak below it), so filling its
//! bucket gains nothing; the price is that a key new to a bucket full of
//! refused keys is refused with them. Past a global count of every failure
//! (`global_per_minute`), every key is refused until it leaks back: the
//! last fallback against guesses spread over more addresses than the table
//! holds.
//!
//! The cost of an admitted request: one atomic load while the table is
//! empty; else the clock, the lock and one bucket's lookup (two for IPv6).
//! The table empties itself: the first look after every count leaked to
//! nothing frees their slots.

use std::hash::{BuildHasher, RandomState};
use std::net::IpAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use crate::lock::lock;

/// Slots in a bucket.
const WAYS: usize = 8;
/// Buckets.
const BUCKETS: usize = 512;
/// Keys the table holds at most.
pub(super) const ENTRIES: usize = WAYS * BUCKETS;
/// The table's bytes once allocated.
#[cfg(test)]
pub(super) const BYTES: usize = 131_072;
/// A /48 may fail this many times what one /64 may: each of its failures
/// counts a quarter.
const WIDE: u64 = 4;
/// The low 64 bits of a /48's key (a /64's are zero, an IPv4 address's
/// hold `ffff`).
const WIDE_MARK: u64 = 1;
/// Counts are in thousandths of a failure, so that they leak smoothly.
const ONE: u64 = 1000;
const MINUTE_MS: u64 = 60_000;

/// Which limit refuses an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Limit {
    /// Its own (or its /48's).
    Address,
    /// Only the server-wide one.
    Everyone,
}

/// One key's count: `level` thousandths of a failure at `at` (ms); a
/// free slot has level 0.
#[derive(Clone, Copy, Default)]
struct Slot {
    key: u128,
    level: u64,
    at: u64,
}

/// What the lock guards.
#[derive(Default)]
struct Counts {
    /// `BUCKETS` runs of `WAYS` slots; empty until the first failure.
    slots: Vec<Slot>,
    /// The count of every failure (its key unused).
    global: Slot,
    /// By then (ms) every count, the global one included, has leaked to
    /// nothing.
    quiet_after: u64,
}

/// The table of one server.
pub(super) struct Table {
    /// Failures a minute one key may make (at least 1).
    per_minute: u64,
    /// Failures a minute from every address together.
    global_per_minute: u64,
    /// Picks a key's bucket.
    hasher: RandomState,
    /// Slots in use (kept under the lock); 0 lets a request through
    /// without taking it.
    busy: AtomicUsize,
    counts: Mutex<Counts>,
}

/// `slot`'s count leaked at `per_minute` until `now` (ms). A count is at
/// most `per_minute` failures, so after a minute it is gone.
fn leaked(slot: &Slot, now: u64, per_minute: u64) -> u64 {
    let elapsed = now.saturating_sub(slot.at).min(MINUTE_MS);
    slot.level.saturating_sub(elapsed * per_minute / 60)
}

/// How long (ms) a count at `level` must leak at `per_minute` before a
/// failure counting `step` more fits; `None` if it fits now.
fn wait_ms(level: u64, step: u64, per_minute: u64) -> Option<u64> {
    let excess = (level + step).saturating_sub(per_minute * ONE);
    (excess > 0).then(|| (excess * 60).div_ceil(per_minute))
}

/// Counts a failure of `step` in `slot` at `now`; when it will have
/// leaked to nothing.
fn bump(slot: &mut Slot, now: u64, step: u64, per_minute: u64) -> u64 {
    slot.level = (leaked(slot, now, per_minute) + step).min(per_minute * ONE);
    slot.at = now;
    now + (slot.level * 60).div_ceil(per_minute)
}

/// What one failure of `key` counts.
fn step(key: u128) -> u64 {
    if key as u64 == WIDE_MARK {
        ONE / WIDE
    } else {
        ONE
    }
}

/// The keys `ip` is counted under: IPv4 by address (an IPv4-mapped IPv6
/// address is its IPv4 address), IPv6 by /64, and its /48.
pub(super) fn keys(ip: IpAddr) -> (u128, Option<u128>) {
    match ip.to_canonical() {
        IpAddr::V4(v4) => (u128::from(v4.to_ipv6_mapped()), None),
        IpAddr::V6(v6) => {
            let bits = u128::from(v6);
            let wide = (bits & (u128::MAX << 80)) | u128::from(WIDE_MARK);
            (bits & (u128::MAX << 64), Some(wide))
        }
    }
}

impl Table {
    /// A table for `per_minute` failures a minute per key (at least 1) and
    /// `global_per_minute` from everyone.
    pub(super) fn new(per_minute: u32, global_per_minute: u64) -> Table {
        let per_minute = u64::from(per_minute.max(1));
        Table {
            per_minute,
            global_per_minute: global_per_minute.max(per_minute),
            hasher: RandomState::new(),
            busy: AtomicUsize::new(0),
            counts: Mutex::default(),
        }
    }

    /// Slots in use.
    pub(super) fn entries(&self) -> usize {
        self.busy.load(Relaxed)
    }

    /// Whether nothing is counted: a request needs no look.
    pub(super) fn is_empty(&self) -> bool {
        self.entries() == 0
    }

    /// The table's bytes, once allocated.
    #[cfg(test)]
    pub(super) fn bytes(&self) -> usize {
        std::mem::size_of_val(&lock(&self.counts).slots[..])
    }

    /// The first slot of `ip`'s bucket.
    #[cfg(test)]
    pub(super) fn bucket_of(&self, ip: IpAddr) -> usize {
        self.bucket(keys(ip).0).start
    }

    /// The range of `key`'s bucket in the slots.
    fn bucket(&self, key: u128) -> std::ops::Range<usize> {
        // Folded to the 64 bits the hash is already built for: no two
        // keys of one kind fold alike.
        let folded = (key as u64 ^ (key >> 64) as u64) as i64;
        // By reference: the binary has that hash already.
        #[allow(clippy::needless_borrows_for_generic_args)]
        let b = (self.hasher.hash_one(&folded) as usize % BUCKETS) * WAYS;
        b..b + WAYS
    }

    /// `key`'s count at `now`: its own, or the one it would take over.
    fn estimate(&self, slots: &[Slot], key: u128, now: u64) -> u64 {
        // Never empty (the slots are made before a key is counted): `get`
        // only spares the binary a panic.
        let bucket = slots.get(self.bucket(key)).unwrap_or_default();
        match bucket.iter().find(|s| s.level > 0 && s.key == key) {
            Some(slot) => leaked(slot, now, self.per_minute),
            None => bucket
                .iter()
                .map(|s| leaked(s, now, self.per_minute))
                .min()
                .unwrap_or(0),
        }
    }

    /// Whole seconds `ip` must wait at `now` (ms) before it may try a
    /// token, and which limit refuses it (its own, when both do); `None`:
    /// it may now.
    pub(super) fn retry_after(&self, ip: IpAddr, now: u64) -> Option<(u64, Limit)> {
        if self.is_empty() {
            return None;
        }
        let counts = &mut *lock(&self.counts);
        if self.settle(counts, now) {
            return None;
        }
        let (key, wide) = keys(ip);
        let global = leaked(&counts.global, now, self.global_per_minute);
        let everyone = wait_ms(global, ONE, self.global_per_minute);
        let mut own = None;
        for key in [Some(key), wide].into_iter().flatten() {
            let level = self.estimate(&counts.slots, key, now);
            own = own.max(wait_ms(level, step(key), self.per_minute));
        }
        let limit = if own.is_some() {
            Limit::Address
        } else {
            Limit::Everyone
        };
        own.max(everyone).map(|ms| (ms.div_ceil(1000), limit))
    }

    /// A failed authentication from `ip` at `now` (ms).
    pub(super) fn failed(&self, ip: IpAddr, now: u64) {
        let counts = &mut *lock(&self.counts);
        if counts.slots.is_empty() {
            counts.slots.resize(ENTRIES, Slot::default());
        }
        let (key, wide) = keys(ip);
        let mut quiet = bump(&mut counts.global, now, ONE, self.global_per_minute);
        for key in [Some(key), wide].into_iter().flatten() {
            quiet = quiet.max(self.count(&mut counts.slots, key, now));
        }
        counts.quiet_after = counts.quiet_after.max(quiet);
    }

    /// Counts one failure of `key` at `now`; when its count will have
    /// leaked to nothing.
    fn count(&self, slots: &mut [Slot], key: u128, now: u64) -> u64 {
        let Some(bucket) = slots.get_mut(self.bucket(key)) else {
            return now;
        };
        let slot = match bucket.iter().position(|s| s.level > 0 && s.key == key) {
            Some(i) => &mut bucket[i],
            // The least-failed slot, count and all; a free one has none.
            None => {
                let least = bucket
                    .iter_mut()
                    .min_by_key(|s| leaked(s, now, self.per_minute));
                let Some(slot) = least else {
                    return now;
                };
                if slot.level == 0 {
                    self.busy.fetch_add(1, Relaxed);
                }
                slot.key = key;
                slot
            }
        };
        bump(slot, now, step(key), self.per_minute)
    }

    /// Whether every count has leaked to nothing by `now`; if so, their
    /// slots are freed.
    pub(super) fn quiet(&self, now: u64) -> bool {
        self.settle(&mut lock(&self.counts), now)
    }

    fn settle(&self, counts: &mut Counts, now: u64) -> bool {
        let quiet = now >= counts.quiet_after;
        if quiet && !self.is_empty() {
            counts.slots.iter_mut().for_each(|s| s.level = 0);
            self.busy.store(0, Relaxed);
        }
        quiet
    }
}
