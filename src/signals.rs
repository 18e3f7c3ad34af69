//! Signals: SIGHUP reloads, SIGTERM and SIGINT stop, handled on a thread
//! of their own from before start-up.
//!
//! A SIGHUP sent as soon as the start-up line appears must reload, never
//! kill; so the handlers are installed before the server starts. Until it
//! is [`ready`](Signals::ready), SIGTERM or SIGINT ends the process at
//! once (as their default would) and a SIGHUP is held, then acted on once
//! ready (whichever side sees both takes it). Top layer: it drives an
//! `Instance`'s handles and is driven by `main`.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread;

use log::info;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals as Incoming;

use crate::http::Stopper;
use crate::instance::Reloader;

/// The signal thread's view of the server.
pub struct Signals {
    ready: Arc<OnceLock<(Stopper, Reloader)>>,
    held: Arc<AtomicBool>,
}

impl Signals {
    /// Installs the handlers and starts the thread that acts on them.
    pub fn install() -> io::Result<Signals> {
        let mut incoming = Incoming::new([SIGINT, SIGTERM, SIGHUP])?;
        let signals = Signals {
            ready: Arc::default(),
            held: Arc::default(),
        };
        let (handles, hup) = (Arc::clone(&signals.ready), Arc::clone(&signals.held));
        thread::spawn(move || {
            for signal in incoming.forever() {
                match (signal, handles.get()) {
                    (SIGHUP, Some((_, reloader))) => {
                        info!(target: "plantstore", "SIGHUP received; re-reading the token and webhook secret files");
                        reloader.reload();
                    }
                    (SIGHUP, None) => {
                        hup.store(true, Ordering::SeqCst);
                        if let Some((_, reloader)) = handles.get()
                            && hup.swap(false, Ordering::SeqCst)
                        {
                            reloader.reload();
                        }
                    }
                    (_, Some((stopper, _))) => {
                        info!(target: "plantstore", "signal {signal} received; stopping");
                        stopper.stop();
                        break;
                    }
                    (_, None) => std::process::exit(128 + signal),
                }
            }
        });
        Ok(signals)
    }

    /// The server runs: signals act on it from now on (a SIGHUP held
    /// meanwhile reloads now).
    pub fn ready(&self, stopper: Stopper, reloader: Reloader) {
        let _ = self.ready.set((stopper, reloader));
        if let Some((_, reloader)) = self.ready.get()
            && self.held.swap(false, Ordering::SeqCst)
        {
            reloader.reload();
        }
    }
}
