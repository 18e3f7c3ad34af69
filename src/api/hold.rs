//! `--delay`: the time each API answer is held before it is written,
//! drawn uniformly from `[min, max]` for each answer.
//!
//! The draw is SplitMix64 over one atomic counter, seeded at random per
//! process: every event loop draws from it without a lock, in a few
//! instructions, and no crate is added for it. The hold itself is the
//! engine's (`Response::held_for`): no thread waits.

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// SplitMix64's increment (the golden ratio's fraction).
const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// The range answers are held for, and the generator's state.
pub(super) struct Hold {
    min_ms: u64,
    /// `max - min`, in milliseconds.
    span_ms: u64,
    state: AtomicU64,
}

impl Hold {
    /// Holds between `min` and `max` (whole milliseconds).
    pub(super) fn new((min, max): (Duration, Duration)) -> Hold {
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let seed = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        Hold {
            min_ms: ms(min),
            span_ms: ms(max).saturating_sub(ms(min)),
            state: AtomicU64::new(seed),
        }
    }

    /// The next answer's hold. The modulo's bias is below 2^-47 for any
    /// span `--delay` accepts.
    pub(super) fn draw(&self) -> Duration {
        let mut z = self
            .state
            .fetch_add(GAMMA, Ordering::Relaxed)
            .wrapping_add(GAMMA);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        Duration::from_millis(self.min_ms + z % (self.span_ms + 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_cover_the_range_and_stay_in_it() {
        let ms = Duration::from_millis;
        let hold = Hold::new((ms(100), ms(109)));
        let mut seen = [0u32; 10];
        for _ in 0..10_000 {
            let d = hold.draw();
            assert!((ms(100)..=ms(109)).contains(&d), "{d:?}");
            seen[(d.as_millis() - 100) as usize] += 1;
        }
        // Uniform: each of the 10 values about 1,000 times.
        assert!(seen.iter().all(|&n| (800..1200).contains(&n)), "{seen:?}");
        let fixed = Hold::new((ms(250), ms(250)));
        assert!((0..100).all(|_| fixed.draw() == ms(250)));
    }
}
