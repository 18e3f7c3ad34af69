//! Compaction: the journal rewritten from the live plants, in short steps
//! under one shard's read lock each, so writers wait for one step at most;
//! and the thread that runs it when the journal has grown, retrying a
//! failed one with growing pauses. The file side (the temporary file, the
//! rename, the records that arrive meanwhile) is `journal/rewrite.rs`.

use std::sync::Weak;
use std::time::{Duration, Instant};

use super::Core;
use super::journal::{self, Change, Signal};
use super::shards::SHARDS;

/// A compaction that fails is tried again after this long at first,
/// doubling up to `RETRY_MAX`.
const RETRY_MIN: Duration = Duration::from_secs(1);
const RETRY_MAX: Duration = Duration::from_secs(300);
/// Records a compaction step encodes under one shard's read lock.
const COMPACT_STEP: usize = 512;

impl Core {
    /// Rewrites the journal from the live plants, read one short step at a
    /// time: each step holds one shard's read lock while it encodes at most
    /// `COMPACT_STEP` records. Whether it ran (`false`: none to do, or one
    /// already running).
    pub(super) fn compact(&self) -> std::io::Result<bool> {
        self.compact_between_steps(|_| {})
    }

    /// As `compact`, calling `between(n)` before the n-th step (0-based)
    /// takes its lock: the seam through which tests change the store while
    /// a compaction runs.
    pub(super) fn compact_between_steps(
        &self,
        mut between: impl FnMut(usize),
    ) -> std::io::Result<bool> {
        let Some(journal) = &self.journal else {
            return Ok(false);
        };
        let started = Instant::now();
        let (mut shard, mut after) = (0, None);
        let mut longest = Duration::ZERO;
        let mut steps = 0;
        let fill = |buf: &mut Vec<u8>| {
            between(steps);
            steps += 1;
            let plants = self.read(shard);
            let held = Instant::now();
            let from = after.map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded);
            let mut taken = 0;
            for (&id, plant) in plants.plants.range((from, std::ops::Bound::Unbounded)) {
                if taken == COMPACT_STEP {
                    break;
                }
                let (name, tag, version) = (plant.name(), plant.tag(), plant.version());
                journal::encode(
                    buf,
                    &Change::Put {
                        id,
                        version,
                        name,
                        tag,
                    },
                );
                after = Some(id);
                taken += 1;
            }
            drop(plants);
            longest = longest.max(held.elapsed());
            if taken < COMPACT_STEP {
                (shard, after) = (shard + 1, None);
            }
            shard < SHARDS
        };
        match journal.rewrite(self.usage.records(), fill)? {
            Some(len) => {
                log::info!(
                    "journal compacted to {len} bytes in {} ms (longest store lock hold {} µs)",
                    // As u64: a u128's formatter is 1 KB of the binary.
                    started.elapsed().as_millis() as u64,
                    longest.as_micros() as u64
                );
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

/// The compaction thread: runs until the store is dropped. A failed
/// compaction is logged once and tried again later, the wait doubling
/// (from `RETRY_MIN` up to `RETRY_MAX`) until one succeeds; requests in
/// between are ignored.
pub(super) fn compact_on_request(signal: &Signal, store: &Weak<Core>) {
    let mut retry: Option<(Instant, Duration)> = None;
    while signal.wait() {
        if retry.is_some_and(|(at, _)| Instant::now() < at) {
            continue;
        }
        let Some(shared) = store.upgrade() else {
            return;
        };
        match shared.compact() {
            Ok(_) => {
                if retry.take().is_some() {
                    log::info!("journal compaction works again");
                }
            }
            Err(e) => {
                let wait = retry.map_or(RETRY_MIN, |(_, wait)| (wait * 2).min(RETRY_MAX));
                if retry.is_none() {
                    log::warn!(
                        "journal compaction failed, the journal stays as it was and keeps \
                         taking changes; retrying with growing pauses (up to {} s): {e}",
                        RETRY_MAX.as_secs()
                    );
                }
                retry = Some((Instant::now() + wait, wait));
            }
        }
    }
}
