//! The `plantstore` binary: flags in, exit code out (the only place an error
//! becomes an exit status); everything else is in the library.

use std::{process::ExitCode, time::Duration};

use log::{error, info, warn};

use plantstore::config::{Config, FEATURES, TokenSource, flags::Flags};
use plantstore::logging::{self, Logger};
use plantstore::model::plural;
use plantstore::signals::Signals;

/// Time allowed to requests in flight at shutdown.
const GRACE: Duration = Duration::from_secs(5);

/// An early end: the status, and what to print (status 0: to stdout).
type Exit = (u8, String);

fn main() -> ExitCode {
    let (status, text) = run().err().unwrap_or_default();
    match status {
        _ if text.is_empty() => {}
        0 => println!("{text}"),
        _ => eprintln!("{text}"),
    }
    ExitCode::from(status)
}

fn run() -> Result<(), Exit> {
    let argv: Vec<String> = std::env::args().collect();
    let flags = Flags::gather(&argv, std::env::vars_os())
        .map_err(|exit| (u8::from(exit.status.is_err()) * 2, exit.output))?;
    if flags.args.version {
        let version = env!("CARGO_PKG_VERSION");
        return Err((0, format!("plantstore {version} {FEATURES}")));
    }
    let mut config = Config::from_args(flags.args, flags.env_token)
        .map_err(|e| (2, format!("plantstore: {e}")))?;
    config.warnings.extend(flags.warnings);
    Logger::init(config.log_level, config.log_format)
        .map_err(|e| (1, format!("plantstore: cannot set up logging: {e}")))?;
    if config.token_source == TokenSource::Generated {
        logging::print_generated_token(config.log_format, &config.tokens[0].token);
    }
    let signals = Signals::install().map_err(|e| {
        (
            1,
            format!("plantstore: cannot install signal handlers: {e}"),
        )
    })?;
    let instance = plantstore::start(&config).map_err(|e| {
        error!("{e}");
        (e.exit_code(), String::new())
    })?;
    signals.ready(instance.stopper(), instance.reloader(&config));
    let still_open = instance.run(GRACE);
    if still_open > 0 {
        // Whole seconds, as `{GRACE:?}` would show them, without the
        // `Duration` formatter (1 KB of the binary).
        warn!(
            "{still_open} connection{} still open after {}s; closing them",
            plural(still_open as u64),
            GRACE.as_secs()
        );
    }
    info!("stopped");
    Ok(())
}
