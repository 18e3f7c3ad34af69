//! The `acme` thread: serves the kept certificate at start when it is for
//! the name and still valid, orders a new one when there is none or it is
//! past two thirds of its life, and again at two thirds of the new one's;
//! after a failed order it waits a minute, then twice as long each time up
//! to a day, the certificate in use kept and the log saying why. SIGHUP
//! ([`RenewNow`]) cuts a wait short.
//!
//! The renewal date is on the wall clock, a wait on the monotonic one: a
//! wait lasts an hour at most, then the date is looked at again, so that
//! a board that booted with its clock years behind and was set right by
//! NTP meanwhile does not sleep those years. A clock far ahead makes a
//! certificate just obtained look due already: the next order then waits
//! out the backoff (not cut short by SIGHUP) rather than following at
//! once, and the log asks whether the clock is right.
//!
//! Beside the certificate and key that `store.rs` keeps, `cert.directory`
//! names the directory URL that issued them: a certificate is kept only
//! for the directory that issued it, so that one from a staging CA is not
//! served after a switch to production. The record is removed before a
//! new pair is kept and written after, so a crash between leaves none (a
//! new order) rather than a wrong one.
//!
//! A certificate the CA hands in that is already expired, or not valid
//! yet, by this clock, is refused as one that is not for the name is: not
//! served, not kept, the order failed (counted, logged, tried again after
//! the backoff), the certificate in use kept.
//!
//! An order runs under `catch_unwind`: a panic in the protocol library is
//! a failed order, not a dead thread.

use std::fs;
use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use log::{error, info, warn};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};

use super::http::Client;
use super::{AcmeStatus, Settings, executor, now, order};
use crate::transport::{Served, Validity, from_pem};

/// The first wait after a failed order; doubled after each, up to
/// `LAST_BACKOFF`.
const FIRST_BACKOFF: Duration = Duration::from_secs(60);
const LAST_BACKOFF: Duration = Duration::from_secs(24 * 3600);
/// The record of the directory that issued the kept certificate.
const ISSUER: &str = "cert.directory";
/// The longest wait for the renewal date before the clock is read again.
const LONGEST_WAIT: Duration = Duration::from_secs(3600);

/// Hands a certificate to what serves it (the HTTPS listener).
pub type Deliver = Box<dyn Fn(&Served) + Send>;

enum Wake {
    Now,
    Stop,
}

/// The running `acme` thread.
pub struct Renewer {
    wake: Sender<Wake>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Renewer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Renewer").finish_non_exhaustive()
    }
}

impl Renewer {
    /// Starts the thread; `deliver` is called with each certificate to
    /// serve (the kept one, then each new one).
    pub fn start(
        settings: Settings,
        status: AcmeStatus,
        deliver: Deliver,
    ) -> std::io::Result<Renewer> {
        let roots = crate::transport::roots(true, settings.ca.as_deref())
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        let client = Client::new(roots).map_err(std::io::Error::other)?;
        Renewer::start_with(settings, client, status, deliver)
    }

    /// Starts the thread with `client` (the tests' has short limits).
    fn start_with(
        settings: Settings,
        client: Client,
        status: AcmeStatus,
        deliver: Deliver,
    ) -> std::io::Result<Renewer> {
        let (wake, woken) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("acme".into())
            .spawn(move || run(&settings, &client, &status, &deliver, &woken))?;
        Ok(Renewer {
            wake,
            thread: Some(thread),
        })
    }

    /// A handle that wakes the thread (SIGHUP).
    pub fn waker(&self) -> RenewNow {
        RenewNow(self.wake.clone())
    }
}

/// Wakes the `acme` thread: a wait after a failure ends now (the next
/// order is tried), a wait for the renewal date looks at the date again.
#[derive(Clone)]
pub struct RenewNow(Sender<Wake>);

impl std::fmt::Debug for RenewNow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RenewNow")
    }
}

impl RenewNow {
    pub fn wake(&self) {
        let _ = self.0.send(Wake::Now);
    }
}

impl Drop for Renewer {
    /// Stops the thread; an order in progress is left to end on its own
    /// (its exchanges are bounded), not waited for.
    fn drop(&mut self) {
        let _ = self.wake.send(Wake::Stop);
        if let Some(thread) = self.thread.take()
            && thread.is_finished()
        {
            let _ = thread.join();
        }
    }
}

fn run(
    settings: &Settings,
    client: &Client,
    status: &AcmeStatus,
    deliver: &Deliver,
    woken: &Receiver<Wake>,
) {
    let mut current = kept(settings).map(|(served, validity)| {
        deliver(&served);
        validity
    });
    let mut backoff = FIRST_BACKOFF;
    loop {
        if let Some(wait) = current.and_then(|validity| until_due(validity, now())) {
            if !sleep(woken, wait) {
                return;
            }
            continue;
        }
        info!(target: "plantstore", "ACME: ordering a certificate for {} from {}", settings.domain, settings.directory);
        match order_once(settings, client) {
            Ok((served, validity)) => {
                deliver(&served);
                current = Some(validity);
                if !settle(settings, validity, &mut backoff, woken) {
                    return;
                }
            }
            Err(why) => {
                status.failed(now());
                let kept = match current {
                    Some(v) => format!(
                        "the certificate in use stays (valid until {})",
                        Validity::moment(v.not_after)
                    ),
                    None => "no certificate yet: HTTPS answers 503".to_string(),
                };
                error!(
                    target: "plantstore",
                    "ACME: cannot obtain a certificate for {}: {why}; {kept}; next try in {} s",
                    settings.domain,
                    backoff.as_secs()
                );
                if !sleep(woken, backoff) {
                    return;
                }
                backoff = (backoff * 2).min(LAST_BACKOFF);
            }
        }
    }
}

/// How long to wait before looking at the renewal date again (an hour at
/// most); `None` when it is due.
fn until_due(validity: Validity, now: i64) -> Option<Duration> {
    let wait = renew_at(validity).saturating_sub(now);
    (wait > 0).then(|| Duration::from_secs(wait as u64).min(LONGEST_WAIT))
}

/// After a new certificate: the backoff starts again, unless the
/// certificate looks due (nearly) at once, which only a clock far ahead
/// explains: then the next order waits out the backoff, doubled for the
/// next time, so that a wrong clock cannot make the thread order again
/// and again. `false` when told to stop.
fn settle(
    settings: &Settings,
    validity: Validity,
    backoff: &mut Duration,
    woken: &Receiver<Wake>,
) -> bool {
    let renewal = Validity::moment(renew_at(validity));
    let Some(due_in) = due_too_soon(validity, now()) else {
        *backoff = FIRST_BACKOFF;
        info!(
            target: "plantstore",
            "ACME: new certificate for {} served, valid until {}; renewal from {renewal}",
            settings.domain,
            Validity::moment(validity.not_after),
        );
        return true;
    };
    let when = match due_in {
        ..=0 => "is already due for renewal".to_string(),
        _ => format!("is due for renewal in {due_in} s, less than a third of its life away"),
    };
    warn!(
        target: "plantstore",
        "ACME: new certificate for {} served, valid from {} until {}, but the certificate just \
         obtained {when} (from {renewal}; the clock says {}): is the clock right? next order in {} s \
         at the earliest",
        settings.domain,
        Validity::moment(validity.not_before),
        Validity::moment(validity.not_after),
        Validity::moment(now()),
        backoff.as_secs()
    );
    let wait = *backoff;
    *backoff = (*backoff * 2).min(LAST_BACKOFF);
    pause(woken, wait)
}

/// For a certificate just obtained: the seconds to its renewal date when
/// that is less than a third of its life away (it should be two thirds).
fn due_too_soon(validity: Validity, now: i64) -> Option<i64> {
    let third = validity
        .not_after
        .saturating_sub(validity.not_before)
        .max(0)
        / 3;
    let due_in = renew_at(validity).saturating_sub(now);
    (due_in < third).then_some(due_in)
}

/// Waits `wait` whatever wakes it; `false` when told to stop.
fn pause(woken: &Receiver<Wake>, wait: Duration) -> bool {
    let until = Instant::now() + wait;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        match woken.recv_timeout(left) {
            Ok(Wake::Now) if !left.is_zero() => {}
            Ok(Wake::Now) | Err(RecvTimeoutError::Timeout) => return true,
            Ok(Wake::Stop) | Err(RecvTimeoutError::Disconnected) => return false,
        }
    }
}

/// Waits `wait`, or until woken; `false` when told to stop.
fn sleep(woken: &Receiver<Wake>, wait: Duration) -> bool {
    match woken.recv_timeout(wait) {
        Ok(Wake::Now) | Err(RecvTimeoutError::Timeout) => true,
        Ok(Wake::Stop) | Err(RecvTimeoutError::Disconnected) => false,
    }
}

/// When a certificate is due for renewal: two thirds into its life.
fn renew_at(validity: Validity) -> i64 {
    let life = validity
        .not_after
        .saturating_sub(validity.not_before)
        .max(0);
    validity.not_before.saturating_add(life / 3 * 2)
}

/// One order, kept in the state directory; what it serves.
fn order_once(settings: &Settings, client: &Client) -> Result<(Served, Validity), String> {
    let issued = std::panic::catch_unwind(AssertUnwindSafe(|| {
        executor::block_on(order::obtain(settings, client))
    }))
    .map_err(|_| "the ACME client failed (a panic)".to_string())?
    .map_err(|stalled| stalled.to_string())??;
    let (served, validity) = usable(settings, &issued.chain, &issued.key)
        .and_then(|(served, validity)| match out_of_date(validity, now()) {
            Some(why) => Err(why),
            None => Ok((served, validity)),
        })
        .map_err(|why| format!("the CA issued a certificate that cannot be served: {why}"))?;
    let dir = settings.dir.path();
    let _ = fs::remove_file(dir.join(ISSUER));
    settings.dir.save_certificate(&issued.chain, &issued.key)?;
    if let Err(e) = record_issuer(dir, &settings.directory) {
        warn!(target: "plantstore", "ACME: cannot write {}: {e}; the next start orders a new certificate", dir.join(ISSUER).display());
    }
    Ok((served, validity))
}

/// Why a certificate just obtained cannot be served at `now`: it has
/// expired, or is not valid yet. Either would make clients refuse the
/// server, so it neither replaces the certificate in use nor is kept; the
/// order counts as failed and is tried again after the backoff.
fn out_of_date(validity: Validity, now: i64) -> Option<String> {
    let clock = Validity::moment(now);
    if now >= validity.not_after {
        Some(format!(
            "it expired at {} (the clock says {clock}; is it right?)",
            Validity::moment(validity.not_after)
        ))
    } else if now < validity.not_before {
        Some(format!(
            "it is not valid until {} (the clock says {clock}; is it right?)",
            Validity::moment(validity.not_before)
        ))
    } else {
        None
    }
}

/// The kept certificate, when it is for the name and not expired.
fn kept(settings: &Settings) -> Option<(Served, Validity)> {
    let (chain, key) = match settings.dir.certificate() {
        Ok(Some(pair)) => pair,
        Ok(None) => return None,
        Err(why) => {
            warn!(target: "plantstore", "ACME: cannot read the kept certificate ({why}); ordering a new one");
            return None;
        }
    };
    if !issued_by(settings.dir.path(), &settings.directory) {
        return None;
    }
    let shown = settings.dir.path().display();
    match usable(settings, &chain, &key) {
        Ok((_, validity)) if validity.not_after <= now() => {
            info!(target: "plantstore", "ACME: the certificate kept in {shown} has expired; ordering a new one");
            None
        }
        Ok((served, validity)) => {
            info!(
                target: "plantstore",
                "ACME: serving the certificate kept in {shown} for {}, valid until {}; renewal from {}",
                settings.domain,
                Validity::moment(validity.not_after),
                Validity::moment(renew_at(validity))
            );
            Some((served, validity))
        }
        Err(why) => {
            warn!(target: "plantstore", "ACME: the certificate kept in {shown} is not used: {why}; ordering a new one");
            None
        }
    }
}

/// Records `directory` as the issuer of the certificate kept in `dir`,
/// whole or not at all.
fn record_issuer(dir: &Path, directory: &str) -> std::io::Result<()> {
    crate::certs::state_dir::write_file(
        &dir.join(ISSUER),
        format!("{directory}\n").as_bytes(),
        0o600,
    )
}

/// Whether the certificate kept in `dir` was issued by `directory`; the
/// log says why not.
fn issued_by(dir: &Path, directory: &str) -> bool {
    let path = dir.join(ISSUER);
    let why = match crate::os::read_text(&path) {
        Ok(text) if text.trim() == directory => return true,
        Ok(text) => format!("was issued by {:.200}", text.trim()),
        Err(e) => format!("has no record of its issuer ({}: {e})", path.display()),
    };
    info!(
        target: "plantstore",
        "ACME: the certificate kept in {} {why}, not by {directory}: not served; ordering a new one",
        dir.display()
    );
    false
}

/// The configuration serving `chain` with `key`, if it is for the name.
fn usable(settings: &Settings, chain: &str, key: &str) -> Result<(Served, Validity), String> {
    let served = from_pem(chain, key).map_err(|(_, why)| why)?;
    let validity = served.validity().ok_or("its validity cannot be read")?;
    let leaf = CertificateDer::pem_slice_iter(chain.as_bytes())
        .next()
        .and_then(Result::ok)
        .ok_or("it holds no certificate")?;
    let name =
        ServerName::try_from(settings.domain.as_str()).map_err(|_| "the name is not a DNS name")?;
    let parsed = rustls::server::ParsedCertificate::try_from(&leaf).map_err(|e| e.to_string())?;
    rustls::client::verify_server_name(&parsed, &name)
        .map_err(|_| format!("it is not for {}", settings.domain))?;
    Ok((served, validity))
}

#[cfg(test)]
#[path = "renew_tests.rs"]
mod tests;
