//! The TLS seam: everything that differs between a build with HTTPS (the
//! `tls` feature, rustls on ring) and the plain build is chosen here, once,
//! so the rest of the crate reads and compiles the same in both.
//!
//! Why a seam: a connection's handling is written and read once, not once
//! per build with a `#[cfg]` on each branch, and what the plain build
//! leaves out is decided in one place.
//!
//! Both builds have the same types: the certificate served ([`Https`],
//! and [`Served`], a certificate ready to serve), where `/metrics` reads
//! its expiry ([`Expiry`]), a connection's TLS state (`ServerTls`, which
//! the engine keeps between a socket and its protocol) and the webhook
//! client's ([`ClientTls`]), and [`WITH_TLS`] for what only asks whether
//! TLS exists (an `https://` URL, a metric's line). With the feature they
//! are rustls': `certificate.rs` (the certificate served, swapped in
//! place), `served.rs` (a chain and key made ready for handshakes, and the
//! configuration serving them), `resolver.rs` (the certificate each
//! handshake gets, swapped by a reload or a renewal), `connection.rs` (a
//! connection's TLS state on the event loop), `trust.rs` (the CA
//! certificates and the client side) and, for the unit tests and the fuzz
//! target only, `replay.rs` (a connection on the TLS port driven by a
//! script). Without it they are `plain.rs`'s stand-ins, enums with no
//! variant: no value of them can be made, so TLS cannot be chosen, and
//! every branch that holds one (`if let Some(tls) = &conn.tls`) is known
//! dead and compiled away, as the `#[cfg]`s were (the plain build does not
//! grow). What both builds share is below and in `validity.rs`.
//!
//! Where a certificate comes from (files, the local CA, ACME) is not
//! here but in `certs/`, which hands what it made to [`Https::serve`].
//! `config/` decides which flags exist (`--tls-cert`, `--tls-key`,
//! `--webhook-ca`); of the rest only `certs/mod.rs`, the seam of the
//! certificates' sources, names the feature.

#[cfg(feature = "tls")]
mod certificate;
#[cfg(feature = "tls")]
mod connection;
#[cfg(not(feature = "tls"))]
mod plain;
#[cfg(all(feature = "tls", any(test, fuzzing)))]
pub mod replay;
#[cfg(feature = "tls")]
mod resolver;
#[cfg(feature = "tls")]
mod served;
mod status;
#[cfg(feature = "tls")]
mod trust;
mod validity;

use std::fmt;
use std::path::{Path, PathBuf};

#[cfg(feature = "tls")]
pub use certificate::{Expiry, Hsts, Https};
#[cfg(feature = "tls")]
pub(crate) use connection::ServerTls;
#[cfg(not(feature = "tls"))]
pub(crate) use plain::ServerTls;
#[cfg(not(feature = "tls"))]
pub use plain::{ClientTls, Expiry, Hsts, Https, Served, StartTlsError};
#[cfg(feature = "tls")]
pub use resolver::{ACME_TLS_ALPN, AlpnChallenge};
#[cfg(feature = "tls")]
pub use served::{Part, Served, from_pem};
pub use status::AcmeStatus;
#[cfg(feature = "tls")]
pub use trust::{ClientTls, client_config, roots};
pub use validity::{Validity, date, now, tlv};

/// Whether this build speaks TLS (`https://` webhooks, `--tls-cert`).
pub const WITH_TLS: bool = cfg!(feature = "tls");

/// The local CA's certificate, as `GET /ca.pem` serves it: PEM, and its
/// SHA-256 fingerprint (`AA:BB:...`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaCert {
    pub pem: String,
    pub fingerprint: String,
}

/// Why HTTPS cannot start (`Https::start`): a [`TlsError`]; in the plain
/// build, which cannot start HTTPS, a type with no value.
#[cfg(feature = "tls")]
pub type StartTlsError = TlsError;

/// Why the certificate files cannot be served: the file at fault (if one
/// is), and why, in words that never quote the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsError {
    pub file: Option<PathBuf>,
    pub why: String,
}

impl fmt::Display for TlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.file {
            Some(file) => write!(f, "{}: {}", file.display(), self.why),
            None => f.write_str(&self.why),
        }
    }
}

impl std::error::Error for TlsError {}

/// Why `file` cannot be served or read, in words that never quote a key.
pub fn in_file(file: &Path, why: impl Into<String>) -> TlsError {
    TlsError {
        file: Some(file.to_path_buf()),
        why: why.into(),
    }
}

/// What a read from a connection's TLS state gave.
pub enum Read {
    /// Plaintext, this many bytes, in the buffer.
    Bytes(usize),
    /// Nothing now: wait for the socket.
    Blocked,
    /// The client closed (cleanly or not).
    Closed,
    /// The client speaks plain HTTP: answer it a 400 with [`PLAIN_HTTP`],
    /// then close.
    PlainHttp,
    /// The connection failed (the handshake, a bad record, the socket).
    Failed,
}

/// The body of the 400 (text/plain) that answers plain HTTP on the TLS
/// port.
pub const PLAIN_HTTP: &[u8] = b"This port speaks HTTPS: use an https:// address.\r\n";
