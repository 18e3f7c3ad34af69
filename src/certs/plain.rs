//! The plain build's stand-ins for the certificates' sources: the same
//! names and methods as with the `tls` feature, as enums with no variant.
//! No value of them exists, so each method's body is an empty `match` and
//! each caller's branch that holds one is dead: the compiler removes it.

use super::{Names, TlsFiles};
use crate::transport::{Https, StartTlsError, TlsError, Validity};

/// What the flags chose to serve: never, in this build.
#[derive(Debug, Clone)]
pub enum Setup {}

impl Setup {
    pub fn validity(&self) -> Option<Validity> {
        match *self {}
    }
}

/// The certificate served: never, in this build.
#[derive(Debug, Clone)]
pub enum Certificate {}

impl Certificate {
    pub fn start(setup: &Setup, _: &Names) -> Result<Certificate, StartTlsError> {
        match *setup {}
    }

    pub fn https(&self) -> &Https {
        match *self {}
    }

    pub fn files(&self) -> Option<&TlsFiles> {
        match *self {}
    }

    pub fn reload(&self) -> Result<Option<Validity>, TlsError> {
        match *self {}
    }

    pub fn renew(&self, _: &Names, _: bool) -> Option<i64> {
        match *self {}
    }

    pub fn start_renewals(&self, _: fn() -> Names) -> std::io::Result<()> {
        match *self {}
    }
}
