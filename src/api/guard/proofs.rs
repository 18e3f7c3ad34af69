//! Tokens proven right: which token each client address has used
//! successfully of late, so that the server-wide failure limit (a flood of
//! wrong tokens from many addresses) does not lock out the clients that
//! already hold a right one.
//!
//! A proof is a keyed hash (SipHash, a random key each start) of the
//! address's key (IPv4 address, IPv6 /64) and the token's bytes, and when
//! it was made: no token is kept. It passes only the same token from the
//! same address, so holding a read token does not let an address guess
//! write tokens past the limit, and a stolen proof is worth nothing
//! elsewhere.
//!
//! Bounds: [`ENTRIES`] (1,024) proofs in 64 buckets of 16, 16 KiB made at
//! the first proof and never grown or freed; a new proof takes the place of
//! its bucket's oldest. A proof lasts [`LIFETIME_MS`] (an hour) from its
//! last refresh. One lock guards the table, taken to refresh a proof
//! (once per connection, and on each right token while failures are being
//! counted) and to look one up (only while the server-wide limit refuses).

use std::hash::{BuildHasher, Hash, Hasher, RandomState};
use std::sync::Mutex;

use crate::lock::lock;

/// Slots in a bucket.
const WAYS: usize = 16;
/// Buckets.
const BUCKETS: usize = 64;
/// Proofs kept at most.
pub(super) const ENTRIES: usize = WAYS * BUCKETS;
/// How long (ms) a proof lasts from its last refresh.
pub(super) const LIFETIME_MS: u64 = 60 * 60 * 1000;

/// One proof: the hash (0: a free slot) and when it was last made (ms).
#[derive(Clone, Copy, Default)]
struct Slot {
    tag: u64,
    at: u64,
}

/// The proofs of one server.
#[derive(Default)]
pub(super) struct Proofs {
    hasher: RandomState,
    slots: Mutex<Vec<Slot>>,
}

impl Proofs {
    /// The proof of `token` from the address `key` (never 0).
    pub(super) fn tag(&self, key: u128, token: &[u8]) -> u64 {
        let mut hasher = self.hasher.build_hasher();
        key.hash(&mut hasher);
        token.hash(&mut hasher);
        hasher.finish().max(1)
    }

    /// The slots of `tag`'s bucket.
    fn bucket(tag: u64) -> std::ops::Range<usize> {
        let b = (tag as usize % BUCKETS) * WAYS;
        b..b + WAYS
    }

    /// Records (or refreshes) `tag` at `now` (ms).
    pub(super) fn prove(&self, tag: u64, now: u64) {
        let slots = &mut *lock(&self.slots);
        if slots.is_empty() {
            slots.resize(ENTRIES, Slot::default());
        }
        let Some(bucket) = slots.get_mut(Self::bucket(tag)) else {
            return;
        };
        let same = bucket.iter().position(|s| s.tag == tag);
        let at = same.unwrap_or_else(|| {
            // The oldest (a free slot is older than any).
            (0..bucket.len())
                .min_by_key(|&i| (bucket[i].tag != 0, bucket[i].at))
                .unwrap_or(0)
        });
        bucket[at] = Slot { tag, at: now };
    }

    /// Whether `tag` was proven within [`LIFETIME_MS`] before `now`.
    pub(super) fn proven(&self, tag: u64, now: u64) -> bool {
        let slots = lock(&self.slots);
        slots.get(Self::bucket(tag)).is_some_and(|bucket| {
            bucket
                .iter()
                .any(|s| s.tag == tag && now.saturating_sub(s.at) < LIFETIME_MS)
        })
    }

    /// The table's bytes, once allocated.
    #[cfg(test)]
    pub(super) fn bytes(&self) -> usize {
        std::mem::size_of_val(&lock(&self.slots)[..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proof_passes_its_own_token_from_its_own_address_for_an_hour() {
        let proofs = Proofs::default();
        let tag = proofs.tag(7, b"right");
        assert!(!proofs.proven(tag, 0));
        proofs.prove(tag, 1000);
        assert!(proofs.proven(tag, 1000 + LIFETIME_MS - 1));
        assert!(!proofs.proven(tag, 1000 + LIFETIME_MS));
        // Another token, or the same from another address, is not proven.
        assert!(!proofs.proven(proofs.tag(7, b"wrong"), 1000));
        assert!(!proofs.proven(proofs.tag(8, b"right"), 1000));
        // A refresh extends it.
        proofs.prove(tag, 2 * LIFETIME_MS);
        assert!(proofs.proven(tag, 3 * LIFETIME_MS - 1));
    }

    #[test]
    fn proofs_from_many_addresses_stay_in_16_kib_and_the_oldest_go() {
        let proofs = Proofs::default();
        let tags: Vec<u64> = (0..100_000u128).map(|k| proofs.tag(k, b"t")).collect();
        for (now, &tag) in tags.iter().enumerate() {
            proofs.prove(tag, now as u64);
        }
        assert_eq!(proofs.bytes(), 16 * 1024);
        let now = tags.len() as u64;
        // The newest are all there; of the oldest, none.
        assert!(
            tags[tags.len() - 64..]
                .iter()
                .all(|&t| proofs.proven(t, now))
        );
        assert!(tags[..1000].iter().all(|&t| !proofs.proven(t, now)));
        let kept = tags.iter().filter(|&&t| proofs.proven(t, now)).count();
        assert!(kept <= ENTRIES, "{kept}");
    }
}
