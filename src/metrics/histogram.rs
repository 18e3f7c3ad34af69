//! A duration histogram (one route's requests, one pool's queries):
//! fixed buckets from 100 µs to 10 s, each an atomic, so observing costs
//! no lock.
//!
//! Durations are kept in whole microseconds and written as decimal seconds
//! with integers only: float formatting would add about 10 KiB to the
//! binary. Bucket counts are stored apart and summed when rendered, so the
//! exposition's buckets are cumulative and `_count` equals `+Inf`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::Exposition;

/// Upper bounds of the buckets, in microseconds (`le` is inclusive).
const BOUNDS: [u64; 16] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000,
];

/// Observed durations: per bucket (the last past every bound) and summed.
pub struct Histogram {
    counts: [AtomicU64; BOUNDS.len() + 1],
    sum_micros: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Histogram {
        Histogram {
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
            sum_micros: AtomicU64::new(0),
        }
    }
}

impl Histogram {
    /// Counts one request that took `elapsed`.
    pub fn observe(&self, elapsed: Duration) {
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        let bucket = BOUNDS.partition_point(|&bound| bound < micros);
        self.counts[bucket].fetch_add(1, Ordering::Relaxed);
        self.sum_micros.fetch_add(micros, Ordering::Relaxed);
    }

    /// Requests observed.
    pub fn count(&self) -> u64 {
        self.counts.iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }

    /// The `_bucket`, `_sum` and `_count` samples of family `name` with
    /// the label `(label, value)` (as `("route", "/plants")`).
    pub fn render(&self, out: &mut Exposition, name: &str, label: (&str, &str)) {
        let (bucket, sum, count) = (
            format!("{name}_bucket"),
            format!("{name}_sum"),
            format!("{name}_count"),
        );
        let mut cumulative = 0;
        for (bound, count) in BOUNDS.iter().zip(&self.counts) {
            cumulative += count.load(Ordering::Relaxed);
            out.sample(&bucket, &[label, ("le", &seconds(*bound))], cumulative);
        }
        cumulative += self.counts[BOUNDS.len()].load(Ordering::Relaxed);
        out.sample(&bucket, &[label, ("le", "+Inf")], cumulative);
        out.sample(
            &sum,
            &[label],
            seconds(self.sum_micros.load(Ordering::Relaxed)),
        );
        out.sample(&count, &[label], cumulative);
    }
}

/// Microseconds as decimal seconds, without trailing zeros: `2500000` is
/// `2.5`, `100` is `0.0001`, `1000000` is `1`.
pub fn seconds(micros: u64) -> String {
    let (whole, fraction) = (micros / 1_000_000, micros % 1_000_000);
    if fraction == 0 {
        return whole.to_string();
    }
    let digits = format!("{fraction:06}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_are_written_exactly() {
        for (micros, text) in [
            (0, "0"),
            (100, "0.0001"),
            (250, "0.00025"),
            (1_000_000, "1"),
            (2_500_000, "2.5"),
            (10_000_000, "10"),
            (12_345_678, "12.345678"),
        ] {
            assert_eq!(seconds(micros), text);
        }
    }

    #[test]
    fn a_duration_on_a_bound_is_in_that_bucket_and_the_buckets_are_cumulative() {
        let latency = Histogram::default();
        latency.observe(Duration::from_micros(100)); // le="0.0001"
        latency.observe(Duration::from_micros(101)); // le="0.00025"
        latency.observe(Duration::from_millis(300)); // le="0.5"
        latency.observe(Duration::from_secs(11)); // past every bound
        let mut out = Exposition::new();
        latency.render(&mut out, "d", ("route", "/x"));
        let out = out.into_text();
        for line in [
            "d_bucket{route=\"/x\",le=\"0.0001\"} 1\n",
            "d_bucket{route=\"/x\",le=\"0.00025\"} 2\n",
            "d_bucket{route=\"/x\",le=\"0.25\"} 2\n",
            "d_bucket{route=\"/x\",le=\"0.5\"} 3\n",
            "d_bucket{route=\"/x\",le=\"10\"} 3\n",
            "d_bucket{route=\"/x\",le=\"+Inf\"} 4\n",
            "d_sum{route=\"/x\"} 11.300201\n",
            "d_count{route=\"/x\"} 4\n",
        ] {
            assert!(out.contains(line), "{line:?} missing from:\n{out}");
        }
        assert_eq!(out.lines().count(), BOUNDS.len() + 3);
        assert_eq!(latency.count(), 4);
    }

    #[test]
    fn bounds_ascend() {
        assert!(BOUNDS.windows(2).all(|w| w[0] < w[1]));
    }
}
