//! The `plantstore` binary: flags in, exit code out. Everything else is in
//! the library.

use std::process::ExitCode;
use std::thread;
use std::time::Duration;

use argh::FromArgs;
use log::{error, info, warn};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use plantstore::StartError;
use plantstore::config::{Args, Config, TokenSource};
use plantstore::logging::Logger;
use plantstore::store::OpenError;

/// Time allowed to requests in flight at shutdown.
const GRACE: Duration = Duration::from_secs(5);

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    let strs: Vec<&str> = argv.iter().map(String::as_str).collect();
    let args = match Args::from_args(&strs[..1], &strs[1..]) {
        Ok(args) => args,
        Err(exit) if exit.status.is_ok() => {
            println!("{}", exit.output);
            return ExitCode::SUCCESS;
        }
        Err(exit) => {
            eprintln!("{}", exit.output);
            return ExitCode::from(2);
        }
    };
    if args.version {
        println!("plantstore {}", env!("CARGO_PKG_VERSION"));
        return ExitCode::SUCCESS;
    }
    let config = match Config::from_args(args, std::env::var("PLANTSTORE_TOKEN").ok()) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("plantstore: {e}");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = Logger::init(config.log_level, config.log_format) {
        eprintln!("plantstore: cannot set up logging: {e}");
        return ExitCode::FAILURE;
    }
    if config.token_source == TokenSource::Generated {
        eprintln!(
            "plantstore: bearer token for this run: {}",
            config.tokens[0]
        );
    }
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
    let mut signals = match Signals::new([SIGINT, SIGTERM]) {
        Ok(signals) => signals,
        Err(e) => {
            error!("cannot install signal handlers: {e}");
            return ExitCode::FAILURE;
        }
    };
    let stopper = server.stopper();
    thread::spawn(move || {
        if let Some(signal) = signals.forever().next() {
            info!("signal {signal} received; stopping");
            stopper.stop();
        }
    });
    let still_open = server.run(GRACE);
    if still_open > 0 {
        warn!("{still_open} connections still open after {GRACE:?}; closing them");
    }
    info!("stopped");
    ExitCode::SUCCESS
}
