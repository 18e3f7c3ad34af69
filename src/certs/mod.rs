//! Where the certificate served comes from: `--tls-cert` and `--tls-key`
//! (`files.rs`), `--tls-auto`'s local CA (`local_ca/`, renewed by
//! `auto.rs`'s `tls-renew` thread) or ACME (`acme/`, the `acme`
//! feature); the directory the last two keep their keys in
//! (`state_dir.rs`); and what the flags chose and the certificate made
//! from it (`source.rs`: [`Setup`], [`Certificate`]). What is served, and
//! how, is `transport`'s: this module hands it each certificate it makes
//! (`transport::Https::serve`) and knows no connection.
//!
//! The seam of the certificates' sources, as `transport/mod.rs` is of TLS:
//! the only file here that names a feature. Without `tls`, `plain.rs`'s
//! stand-ins ([`Setup`], [`Certificate`]), enums with no variant, so
//! nothing of this is compiled into the plain build; without `acme`,
//! `no_acme.rs`'s stand-ins take `acme/`'s place under its name, so that
//! `certs::acme` reads the same in every build.

#[cfg(feature = "acme")]
pub mod acme;
#[cfg(not(feature = "acme"))]
#[path = "no_acme.rs"]
pub mod acme;
#[cfg(feature = "tls")]
mod auto;
#[cfg(feature = "tls")]
mod files;
#[cfg(feature = "tls")]
mod local_ca;
#[cfg(not(feature = "tls"))]
mod plain;
#[cfg(feature = "tls")]
mod source;
#[cfg(feature = "tls")]
mod state_dir;

use std::path::PathBuf;

#[cfg(feature = "tls")]
pub use files::load;
#[cfg(feature = "tls")]
pub use local_ca::{LocalCa, check_dir};
#[cfg(not(feature = "tls"))]
pub use plain::{Certificate, Setup};
#[cfg(feature = "tls")]
pub use source::{Certificate, Setup, Source};
#[cfg(feature = "tls")]
pub use state_dir::Claim;

/// The two files that make the served certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// `--tls-cert`: the chain, PEM.
    pub cert: PathBuf,
    /// `--tls-key`: its private key, PEM.
    pub key: PathBuf,
}

/// What the server advertises, for the certificate of `--tls-auto`: the
/// host's name and its addresses (the caller finds them; this module
/// imports no other that would).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Names {
    pub host: Option<String>,
    pub addresses: Vec<std::net::IpAddr>,
}
