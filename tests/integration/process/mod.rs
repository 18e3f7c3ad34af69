//! The built binary as a process: flags, logs, signals, start-up.

pub mod binary;
pub mod files;
mod flags;
mod held;
#[cfg(feature = "tls")]
mod https;
mod logs;
pub mod reload;
mod startup;
