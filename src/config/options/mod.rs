//! The flags of the build options, read from `Args` (`args.rs` decides
//! which exist in a build): `tls.rs` (`--tls-*`, `--hsts`,
//! `--webhook-ca`), `database.rs` (`--database*`, the `postgres` feature)
//! and `acme.rs` (`--acme-*`), each with the errors of its flags.
//!
//! `config/`'s seam, as `transport/mod.rs` is TLS's: the functions below
//! exist in every build, so `config/mod.rs` and `error.rs` read the same
//! in each. In a build without an option they give what no flag asked
//! for, typed with the other seams' stand-ins (a `DatabaseConfig`, a
//! `certs::Setup`, ACME's `Settings`, that cannot be made), and its errors
//! are enums with no variant: nothing of the option, its words included,
//! is compiled into that build.

#[cfg(feature = "acme")]
mod acme;
#[cfg(feature = "postgres")]
mod database;
#[cfg(feature = "tls")]
mod tls;

#[cfg(feature = "acme")]
pub use acme::AcmeError;
#[cfg(feature = "acme")]
pub(super) use acme::acme;
#[cfg(feature = "postgres")]
pub use database::DatabaseError;
#[cfg(feature = "postgres")]
pub(super) use database::database;
#[cfg(feature = "tls")]
pub use tls::HttpsError;
#[cfg(feature = "tls")]
pub(super) use tls::{HttpsFlags, hsts, https, webhook_tls};

/// Declares `$error` an error no value of which exists, for a build
/// without the option whose flags it is about.
#[allow(unused_macros)]
macro_rules! never {
    ($(#[$doc:meta])* $error:ident) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub enum $error {}

        impl std::fmt::Display for $error {
            fn fmt(&self, _: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                match *self {}
            }
        }
    };
}

#[cfg(not(feature = "tls"))]
never!(
    /// An HTTPS flag that cannot be used: never, in this build.
    HttpsError
);

/// The HTTPS flags: none in this build.
#[cfg(not(feature = "tls"))]
pub(super) struct HttpsFlags;

#[cfg(not(feature = "tls"))]
impl HttpsFlags {
    pub(super) fn take(_: &mut super::Args) -> HttpsFlags {
        HttpsFlags
    }

    pub(super) fn certificate_flags(&self) -> (bool, bool) {
        (false, false)
    }
}

/// HTTPS, with no flag to ask for it in this build.
#[cfg(not(feature = "tls"))]
pub(super) fn https(_: &mut HttpsFlags) -> Result<Option<crate::certs::Setup>, HttpsError> {
    Ok(None)
}

/// `--hsts`, with no flag for it in this build.
#[cfg(not(feature = "tls"))]
pub(super) fn hsts(_: &HttpsFlags, _: bool) -> Result<Option<crate::transport::Hsts>, HttpsError> {
    Ok(None)
}

/// https webhooks: none in this build (an `https://` URL is refused).
#[cfg(not(feature = "tls"))]
pub(super) fn webhook_tls(
    _: &HttpsFlags,
    _: &mut crate::webhook::WebhookConfig,
    _: &mut Vec<String>,
) -> Result<(), HttpsError> {
    Ok(())
}

#[cfg(not(feature = "postgres"))]
never!(
    /// A database flag that cannot be used: never, in this build.
    DatabaseError
);

/// `--database`, with no flag for it in this build.
#[cfg(not(feature = "postgres"))]
pub(super) fn database(
    _: &super::Args,
) -> Result<(Option<crate::dbconfig::DatabaseConfig>, Option<String>), DatabaseError> {
    Ok((None, None))
}

#[cfg(not(feature = "acme"))]
never!(
    /// An `--acme-*` flag that cannot be used: never, in this build.
    AcmeError
);

/// `--acme-domain`, with no flag for it in this build.
#[cfg(not(feature = "acme"))]
pub(super) fn acme(
    _: &super::Args,
    _: (bool, bool),
) -> Result<Option<crate::certs::acme::Settings>, AcmeError> {
    Ok(None)
}
