//! The `plantstore` binary: flags in, exit code out. Everything else is in
//! the library.

use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread;
use std::time::{Duration, SystemTime};

use log::{error, info, warn};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use plantstore::config::flags::Flags;
use plantstore::config::{Config, TokenSource};
use plantstore::http::Stopper;
use plantstore::logging::{self, Logger};
use plantstore::store::OpenError;
use plantstore::{Reloader, StartError};

/// Time allowed to requests in flight at shutdown.
const GRACE: Duration = Duration::from_secs(5);

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    let flags = match Flags::gather(&argv, std::env::vars_os()) {
        Ok(flags) => flags,
        Err(exit) if exit.status.is_ok() => {
            println!("{}", exit.output);
            return ExitCode::SUCCESS;
        }
        Err(exit) => {
            eprintln!("{}", exit.output);
            return ExitCode::from(2);
        }
    };
    if flags.args.version {
        println!("plantstore {}", env!("CARGO_PKG_VERSION"));
        return ExitCode::SUCCESS;
    }
    let mut config = match Config::from_args(flags.args, flags.env_token) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("plantstore: {e}");
            return ExitCode::from(2);
        }
    };
    config.warnings.extend(flags.warnings);
    if let Err(e) = Logger::init(config.log_level, config.log_format) {
        eprintln!("plantstore: cannot set up logging: {e}");
        return ExitCode::FAILURE;
    }
    if config.token_source == TokenSource::Generated {
        // Written to stderr in the log's format, but never through the
        // logger: a token is never a log record.
        let notice = format_args!("bearer token for this run: {}", config.tokens[0]);
        let record = log::Record::builder()
            .level(log::Level::Warn)
            .target("plantstore")
            .args(notice)
            .build();
        let mut line = Vec::new();
        logging::write_line(
            &mut line,
            config.log_format,
            SystemTime::now(),
            &record,
            None,
        );
        let _ = std::io::stderr().write_all(&line);
    }
    // Handled from before start-up: a SIGHUP sent as soon as the start-up
    // line appears must reload, never kill. SIGTERM or SIGINT before the
    // server runs ends the process at once, as their default would.
    // A SIGHUP before then is held in `held` and acted on once ready
    // (whichever side sees both takes it).
    let ready: Arc<OnceLock<(Stopper, Reloader)>> = Arc::default();
    let held = Arc::new(AtomicBool::new(false));
    let mut signals = match Signals::new([SIGINT, SIGTERM, SIGHUP]) {
        Ok(signals) => signals,
        Err(e) => {
            eprintln!("plantstore: cannot install signal handlers: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (handles, hup) = (Arc::clone(&ready), Arc::clone(&held));
    thread::spawn(move || {
        for signal in signals.forever() {
            match (signal, handles.get()) {
                (SIGHUP, Some((_, reloader))) => {
                    info!("SIGHUP received; re-reading the token and webhook secret files");
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
                    info!("signal {signal} received; stopping");
                    stopper.stop();
                    break;
                }
                (_, None) => std::process::exit(128 + signal),
            }
        }
    });
    let server = match plantstore::start(&config) {
        Ok(server) => server,
        Err(e) => {
            error!("{e}");
            // `--data` naming something that cannot be a journal is a bad
            // flag value, like those `Config` refuses.
            return match e {
                StartError::Store(OpenError::NotAFile { .. }) => ExitCode::from(2),
                // So is a seed file that cannot be loaded.
                StartError::Seed(e) if e.is_in_seed() => ExitCode::from(2),
                _ => ExitCode::FAILURE,
            };
        }
    };
    let _ = ready.set((server.stopper(), server.reloader(&config)));
    if let Some((_, reloader)) = ready.get()
        && held.swap(false, Ordering::SeqCst)
    {
        reloader.reload();
    }
    let still_open = server.run(GRACE);
    if still_open > 0 {
        warn!("{still_open} connections still open after {GRACE:?}; closing them");
    }
    info!("stopped");
    ExitCode::SUCCESS
}
