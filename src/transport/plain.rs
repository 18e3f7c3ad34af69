//! The plain build's stand-ins for the TLS types: the same names and
//! methods as with the `tls` feature, as enums with no variant. No value of
//! them exists, so each method's body is an empty `match` and each caller's
//! branch that holds one is dead: the compiler removes it, and the plain
//! build carries no TLS code and no byte for it in a connection (an
//! `Option` of one is empty). [`Expiry`], which a gauge holds whatever the
//! build, is a unit that reads nothing.

use std::io;
use std::sync::atomic::AtomicU64;
use std::time::Instant;

use mio::net::TcpStream;

use super::{CaCert, Read, Validity};
use crate::outbound::{Handshake, Timed};

/// What certificate files made: never, in this build.
#[derive(Debug, Clone)]
pub enum Served {}

impl Served {
    pub fn validity(&self) -> Option<Validity> {
        match *self {}
    }
}

/// Why HTTPS cannot start: never, in this build (so the caller's error
/// for it, and its words, are compiled away).
#[derive(Debug)]
pub enum StartTlsError {}

impl std::fmt::Display for StartTlsError {
    fn fmt(&self, _: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {}
    }
}

impl std::error::Error for StartTlsError {}

/// The certificate served: never, in this build.
#[derive(Debug, Clone)]
pub enum Https {}

impl Https {
    pub fn set_hsts(&self, _: u64) {
        match *self {}
    }

    pub fn hsts(&self) -> Option<&str> {
        match *self {}
    }

    pub fn ca_cert(&self) -> Option<CaCert> {
        match *self {}
    }

    pub fn serve(&self, _: &Served) {
        match *self {}
    }

    pub fn expires(&self) -> Option<i64> {
        match *self {}
    }

    pub(crate) fn accept(&self) -> Option<ServerTls> {
        match *self {}
    }
}

/// `--hsts`: never, in this build (it has no such flag).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hsts {}

impl Hsts {
    pub fn seconds(&self) -> u64 {
        match *self {}
    }
}

/// Where `/metrics` would read a served certificate's expiry: there is
/// none to read.
#[derive(Clone, Copy, Default, Debug)]
pub struct Expiry;

impl Expiry {
    pub fn watch(&self, https: &Https) {
        match *https {}
    }

    pub fn get(&self) -> Option<i64> {
        None
    }
}

/// How https webhooks would be verified: never, in this build (an
/// `https://` URL is refused when the flags are read).
#[derive(Debug, Clone)]
pub enum ClientTls {}

impl Handshake for ClientTls {
    type Stream = ClientTls;

    fn connect(&self, _: &str, _: Timed) -> io::Result<ClientTls> {
        match *self {}
    }

    fn socket(stream: &mut ClientTls) -> &mut Timed {
        match *stream {}
    }
}

impl io::Read for ClientTls {
    fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
        match *self {}
    }
}

impl io::Write for ClientTls {
    fn write(&mut self, _: &[u8]) -> io::Result<usize> {
        match *self {}
    }

    fn flush(&mut self) -> io::Result<()> {
        match *self {}
    }
}

/// A connection's TLS state: never, in this build.
pub(crate) enum ServerTls {}

impl ServerTls {
    pub(crate) fn drain_by(&mut self, _: Instant) -> Instant {
        match *self {}
    }

    pub(crate) fn drained(&mut self) {
        match *self {}
    }

    pub(crate) fn drain_deadline(&self) -> Option<Instant> {
        match *self {}
    }

    pub(crate) fn read(
        &mut self,
        _: &mut TcpStream,
        _: &mut [u8],
        _: &dyn std::fmt::Display,
        _: &AtomicU64,
    ) -> Read {
        match *self {}
    }

    pub(crate) fn write(&mut self, _: &mut TcpStream, _: &[u8]) -> io::Result<usize> {
        match *self {}
    }

    pub(crate) fn flush(&mut self, _: &mut TcpStream) -> io::Result<()> {
        match *self {}
    }

    pub(crate) fn has_output(&self) -> bool {
        match *self {}
    }

    pub(crate) fn close(&mut self) {
        match *self {}
    }

    pub(crate) fn abandoned(&self, _: &dyn std::fmt::Display, _: &AtomicU64) {
        match *self {}
    }
}
