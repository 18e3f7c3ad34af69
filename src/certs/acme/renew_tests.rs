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
    let dir = crate::certs::acme::StateDir::open(&path).unwrap();
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

// Against servers on loopback: a fake CA that hands in a certificate the
// test chooses, and one that drips its TLS handshake.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use super::super::http::LIMITS;
use super::super::{Challenge, Challenges, StateDir, hostile, hostile_ca};
use crate::outbound::Bounds;
use crate::outbound::hostile::drip_handshake;

const DOMAIN: &str = "plants.test";

fn temp_dir(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "plantstore-acme-{tag}-{}-{}",
        std::process::id(),
        crate::os::random_hex(4).unwrap()
    ))
}

/// A certificate kept for `DOMAIN` from `directory`, valid but due for
/// renewal (80 days into 90); its chain.
fn keep_due(dir: &StateDir, directory: &str) -> String {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec![DOMAIN.to_string()]).unwrap();
    let at = |unix| time::OffsetDateTime::from_unix_timestamp(unix).unwrap();
    params.not_before = at(now() - 80 * DAY);
    params.not_after = at(now() + 10 * DAY);
    let chain = params.self_signed(&key).unwrap().pem();
    dir.save_certificate(&chain, &key.serialize_pem()).unwrap();
    record_issuer(dir.path(), directory).unwrap();
    chain
}

/// The `acme` thread at work, and what it served.
struct Watched {
    status: AcmeStatus,
    served: Arc<Mutex<Vec<Option<Validity>>>>,
    _renewer: Renewer,
}

fn renew(dir: &StateDir, directory: &str, client: Client) -> Watched {
    let settings = Settings {
        domain: DOMAIN.to_string(),
        directory: directory.to_string(),
        email: None,
        dir: dir.clone(),
        ca: None,
        challenge: Challenge::Http01,
        challenges: Challenges::default(),
        http_addr: None,
    };
    let status = AcmeStatus::default();
    let served = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&served);
    let deliver: Deliver = Box::new(move |s: &Served| seen.lock().unwrap().push(s.validity()));
    let renewer = Renewer::start_with(settings, client, status.clone(), deliver).unwrap();
    Watched {
        status,
        served,
        _renewer: renewer,
    }
}

/// Waits until `done` holds, `within` at most; whether it does.
fn wait_for(within: Duration, done: impl Fn() -> bool) -> bool {
    let until = Instant::now() + within;
    while !done() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    done()
}

/// A renewal from a fake CA issuing `issue`: the kept chain, the files'
/// directory, and the thread once it has failed or served a second
/// certificate.
fn renewal(tag: &str, issue: hostile_ca::Issue) -> (String, PathBuf, Watched) {
    let identity = hostile::identity();
    let directory = hostile_ca::start(&identity, DOMAIN, issue);
    let path = temp_dir(tag);
    let dir = StateDir::open(&path).unwrap();
    let kept = keep_due(&dir, &directory);
    let client = Client::with_limits(identity.roots, LIMITS).unwrap();
    let watched = renew(&dir, &directory, client);
    let over = || watched.status.failures() > 0 || watched.served.lock().unwrap().len() > 1;
    assert!(wait_for(Duration::from_secs(30), over), "no order ended");
    (kept, path, watched)
}

/// The certificate from the CA was refused: the kept one alone served,
/// still on disk, the order counted as failed.
fn assert_refused(kept: &str, path: &Path, watched: &Watched) {
    let served = watched.served.lock().unwrap().clone();
    assert_eq!(served.len(), 1, "served: {served:?}");
    assert!(served[0].is_some_and(|v| v.not_after > now()));
    assert_eq!(watched.status.failures(), 1);
    assert_eq!(fs::read_to_string(path.join("cert.pem")).unwrap(), kept);
    let _ = fs::remove_dir_all(path);
}

#[test]
fn a_valid_certificate_from_the_ca_replaces_the_one_in_use() {
    // The fake CA's control: what it issues is served and kept.
    let issue = hostile_ca::Issue {
        not_before: now() - 3600,
        not_after: now() + 90 * DAY,
    };
    let (kept, path, watched) = renewal("valid", issue);
    let served = watched.served.lock().unwrap().clone();
    assert_eq!(watched.status.failures(), 0);
    assert_eq!(served.len(), 2, "served: {served:?}");
    assert_eq!(served[1].map(|v| v.not_after), Some(issue.not_after));
    assert_ne!(fs::read_to_string(path.join("cert.pem")).unwrap(), kept);
    let _ = fs::remove_dir_all(&path);
}

#[test]
fn an_expired_certificate_from_the_ca_is_neither_served_nor_kept() {
    let issue = hostile_ca::Issue {
        not_before: now() - 90 * DAY,
        not_after: now() - DAY,
    };
    let (kept, path, watched) = renewal("expired", issue);
    assert_refused(&kept, &path, &watched);
}

#[test]
fn a_certificate_not_valid_yet_from_the_ca_is_neither_served_nor_kept() {
    let issue = hostile_ca::Issue {
        not_before: now() + DAY,
        not_after: now() + 91 * DAY,
    };
    let (kept, path, watched) = renewal("not-yet", issue);
    assert_refused(&kept, &path, &watched);
}

#[test]
fn a_ca_that_drips_its_tls_handshake_fails_the_order_at_the_deadline() {
    // A byte every 200 ms for 8 s, within the 10 s a read may wait.
    let every = Duration::from_millis(200);
    let base = hostile::serve(move |socket| drip_handshake(socket, every, 40));
    let limits = Bounds {
        connect: Duration::from_secs(2),
        io: Duration::from_secs(10),
        exchange: Duration::from_millis(500),
        ..LIMITS
    };
    let client = Client::with_limits(hostile::identity().roots, limits).unwrap();
    let path = temp_dir("drip");
    let dir = StateDir::open(&path).unwrap();
    let watched = renew(&dir, &format!("{base}/dir"), client);
    let failed = wait_for(Duration::from_secs(4), || watched.status.failures() > 0);
    assert!(failed, "the order has not failed after 4 s");
    assert!(watched.status.last_failure().is_some());
    assert!(watched.served.lock().unwrap().is_empty());
    let _ = fs::remove_dir_all(&path);
}
