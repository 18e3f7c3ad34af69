//! When a certificate is due, how long a wait lasts, what a clock ahead
//! looks like, and whose certificate is kept.

use super::*;

#[test]
fn renewal_is_due_two_thirds_into_the_life() {
    let v = Validity {
        not_before: 1_000,
        not_after: 1_000 + 90 * 86_400,
    };
    assert_eq!(renew_at(v), 1_000 + 60 * 86_400);
    let backwards = Validity {
        not_before: 5_000,
        not_after: 1_000,
    };
    assert_eq!(renew_at(backwards), 5_000);
}

const DAY: i64 = 86_400;
const NINETY_DAYS: Validity = Validity {
    not_before: 1_000,
    not_after: 1_000 + 90 * DAY,
};

#[test]
fn a_wait_for_the_renewal_date_lasts_an_hour_at_most() {
    // A clock years behind (a board before NTP): an hour, then again.
    assert_eq!(
        until_due(NINETY_DAYS, 1_000 - 10 * 365 * DAY),
        Some(LONGEST_WAIT)
    );
    let ten = until_due(NINETY_DAYS, 1_000 + 60 * DAY - 10);
    assert_eq!(ten, Some(Duration::from_secs(10)));
    assert_eq!(until_due(NINETY_DAYS, 1_000 + 60 * DAY), None);
}

#[test]
fn a_certificate_due_as_soon_as_obtained_means_a_clock_ahead() {
    assert_eq!(due_too_soon(NINETY_DAYS, 1_000), None);
    assert_eq!(due_too_soon(NINETY_DAYS, 1_000 + 20 * DAY), None);
    assert_eq!(due_too_soon(NINETY_DAYS, 1_000 + 40 * DAY), Some(20 * DAY));
    assert_eq!(due_too_soon(NINETY_DAYS, 1_000 + 70 * DAY), Some(-10 * DAY));
    // Pebble's certificates of 30 s, just obtained: not suspect.
    let short = Validity {
        not_before: 1_000,
        not_after: 1_030,
    };
    assert_eq!(due_too_soon(short, 1_001), None);
}

#[test]
fn a_certificate_is_kept_only_for_the_directory_that_issued_it() {
    let path = std::env::temp_dir().join(format!(
        "plantstore-acme-issuer-{}-{}",
        std::process::id(),
        crate::os::random_hex(4).unwrap()
    ));
    let dir = crate::transport::acme::StateDir::open(&path).unwrap();
    let staging = "https://acme-staging.test/dir";
    assert!(!issued_by(dir.path(), staging), "no record");
    record_issuer(dir.path(), staging).unwrap();
    assert!(issued_by(dir.path(), staging));
    assert!(!issued_by(dir.path(), "https://acme.test/dir"));
    record_issuer(dir.path(), "https://acme.test/dir").unwrap();
    assert!(issued_by(dir.path(), "https://acme.test/dir"));
    assert!(!issued_by(dir.path(), staging));
    let _ = fs::remove_dir_all(&path);
}

#[test]
fn a_pause_outlasts_a_wake_but_not_a_stop() {
    let (wake, woken) = mpsc::channel();
    wake.send(Wake::Now).unwrap();
    let started = Instant::now();
    assert!(pause(&woken, Duration::from_millis(200)));
    assert!(started.elapsed() >= Duration::from_millis(200));
    wake.send(Wake::Stop).unwrap();
    assert!(!pause(&woken, Duration::from_secs(60)));
}
