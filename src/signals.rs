//! Signals: SIGHUP reloads, SIGTERM and SIGINT stop, handled on a thread
//! of their own from before start-up.
//!
//! The three are blocked in every thread (the mask is set before any other
//! thread starts, and threads inherit it), and the signal thread takes them
//! with `sigwait`: no handler runs in signal context, and nothing but that
//! thread ever sees them.
//!
//! A SIGHUP sent as soon as the start-up line appears must reload, never
//! kill; so the handlers are installed before the server starts. Until it
//! is [`ready`](Signals::ready), SIGTERM or SIGINT ends the process at
//! once (as their default would) and a SIGHUP is held, then acted on once
//! ready.
//!
//! The reload runs on a thread of its own, never on the one that handles
//! SIGTERM: whatever a reload meets (a file that is slow to read), the
//! server can always be stopped. The signal thread only marks a reload as
//! pending and wakes the reload thread; SIGHUPs that arrive while a reload
//! runs are folded into one more reload after it, which reads the files
//! afresh and so sees every change.
//!
//! Top layer: it drives an `Instance`'s handles and is driven by `main`.

use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::{io, mem, ptr, thread};

use libc::{SIGHUP, SIGINT, SIGTERM, c_int, sigset_t};
use log::info;

use crate::http::Stopper;
use crate::instance::Reloader;
use crate::lock::{lock, wait};

/// The signal thread's view of the server.
pub struct Signals {
    stopper: Arc<OnceLock<Stopper>>,
    reload: Arc<Reload>,
}

/// What the reload thread waits for: a SIGHUP, and a server to reload.
#[derive(Default)]
struct Reload {
    /// Whether a SIGHUP came since the last reload started.
    pending: Mutex<bool>,
    /// Signalled when `pending` is set or the reloader arrives.
    wake: Condvar,
    /// Set once, when the server runs.
    reloader: OnceLock<Reloader>,
}

impl Reload {
    /// Marks a reload as pending and wakes the reload thread.
    fn request(&self) {
        *lock(&self.pending) = true;
        self.wake.notify_one();
    }

    /// The reload thread: each pending SIGHUP once the server runs, one
    /// reload for all that came meanwhile.
    fn serve(&self) {
        loop {
            let mut pending = lock(&self.pending);
            while !*pending || self.reloader.get().is_none() {
                pending = wait(&self.wake, pending);
            }
            *pending = false;
            drop(pending);
            if let Some(reloader) = self.reloader.get() {
                info!(target: "plantstore", "SIGHUP received; re-reading the token and webhook secret files");
                reloader.reload();
            }
        }
    }
}

impl Signals {
    /// Blocks the signals and starts the threads that act on them. Called
    /// before any other thread starts: one started earlier would not have
    /// them blocked, and a SIGTERM delivered to it would end the process
    /// at once.
    pub fn install() -> io::Result<Signals> {
        let incoming = block()?;
        let signals = Signals {
            stopper: Arc::default(),
            reload: Arc::default(),
        };
        let reload = Arc::clone(&signals.reload);
        thread::Builder::new()
            .name("reload".into())
            .spawn(move || reload.serve())?;
        let (stopper, reload) = (Arc::clone(&signals.stopper), Arc::clone(&signals.reload));
        thread::Builder::new()
            .name("signals".into())
            .spawn(move || {
                loop {
                    let signal = take(&incoming);
                    match (signal, stopper.get()) {
                        (SIGHUP, _) => reload.request(),
                        (_, Some(stopper)) => {
                            info!(target: "plantstore", "signal {signal} received; stopping");
                            stopper.stop();
                            break;
                        }
                        (_, None) => std::process::exit(128 + signal),
                    }
                }
            })?;
        Ok(signals)
    }

    /// The server runs: signals act on it from now on (a SIGHUP held
    /// meanwhile reloads now, on the reload thread).
    pub fn ready(&self, stopper: Stopper, reloader: Reloader) {
        let _ = self.stopper.set(stopper);
        let _ = self.reload.reloader.set(reloader);
        // Under the lock, so the reload thread is either before its check
        // (and sees the reloader) or waiting (and is woken).
        let _pending = lock(&self.reload.pending);
        self.reload.wake.notify_one();
    }
}

/// Blocks SIGINT, SIGTERM and SIGHUP in the calling thread (and so in every
/// thread it starts from now on); returns that set.
#[allow(unsafe_code)]
fn block() -> io::Result<sigset_t> {
    // SAFETY: sigemptyset initialises the set before sigaddset and
    // pthread_sigmask read it; the old mask is not asked for.
    unsafe {
        let mut set: sigset_t = mem::zeroed();
        libc::sigemptyset(&mut set);
        for signal in [SIGINT, SIGTERM, SIGHUP] {
            libc::sigaddset(&mut set, signal);
        }
        match libc::pthread_sigmask(libc::SIG_BLOCK, &set, ptr::null_mut()) {
            0 => Ok(set),
            error => Err(io::Error::from_raw_os_error(error)),
        }
    }
}

/// Waits for a signal of `set` (blocked) and takes it.
#[allow(unsafe_code)]
fn take(set: &sigset_t) -> c_int {
    let mut signal: c_int = 0;
    // SAFETY: `set` is initialised (`block`); sigwait writes `signal`. It
    // fails only for a set of invalid signals, so retrying cannot spin.
    while unsafe { libc::sigwait(set, &mut signal) } != 0 {}
    signal
}
