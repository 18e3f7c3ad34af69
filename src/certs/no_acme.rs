//! The stand-ins for ACME (`acme/`) in a build without the `acme`
//! feature: the same names and methods, the settings and the thread as
//! enums with no variant. No `--acme-domain` can be chosen, so the wiring
//! that starts ACME (`instance/acme.rs`) is known dead and compiled away,
//! and reads the same in every build. The answers the HTTP-01 listener
//! would serve are an empty set: it is never started.

use std::net::SocketAddr;

use crate::certs::Certificate;
use crate::transport::{AcmeStatus, Https};

/// What the `acme` thread would work with: never, in this build.
#[derive(Debug, Clone)]
pub enum Settings {}

impl Settings {
    pub fn challenges(&self) -> &Challenges {
        match *self {}
    }

    pub fn http_addr(&self) -> Option<SocketAddr> {
        match *self {}
    }

    pub fn start(
        &self,
        _: AcmeStatus,
        _: &Https,
        _: Box<dyn Fn() + Send>,
        _: Box<dyn FnOnce() + Send>,
    ) -> std::io::Result<Running> {
        match *self {}
    }
}

/// The challenges' answers: none, in this build.
#[derive(Debug, Clone, Default)]
pub struct Challenges(());

impl Challenges {
    pub fn http01(&self, _: &str) -> Option<String> {
        None
    }
}

/// The `acme` thread started: never, in this build.
pub enum Running {}

impl Running {
    pub fn waker(&self) -> RenewNow {
        match *self {}
    }

    pub fn stop(self) {
        match self {}
    }
}

/// Wakes the `acme` thread: never, in this build.
#[derive(Clone)]
pub enum RenewNow {}

impl RenewNow {
    pub fn wake(&self) {
        match *self {}
    }
}

/// HTTPS before the first certificate: never, in this build.
pub fn first_certificate(settings: &Settings) -> Result<Certificate, String> {
    match *settings {}
}
