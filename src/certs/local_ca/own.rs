//! Whether a CA found in `DIR` is the server's own: one this code made
//! with `ca.key`, not merely one whose key matches or whose name reads
//! like ours (a foreign CA without name constraints, named so, would
//! otherwise sign `server.pem` and be served at `/ca.pem`).
//!
//! The CA is made again (`issue::self_signed`) with `ca.key`, its serial,
//! validity and common name, and the constraints for the host that name
//! gives; what it signs must be the same, byte for byte, as what `ca.pem`
//! signs (its tbsCertificate: everything but the signature, which ECDSA
//! makes anew each time). So every extension, the constraints included,
//! is as this code makes them, without parsing X.509 here.
//!
//! A CA that an earlier version made for a single-label host (its
//! constraints permit that name and every name under it, which this
//! version no longer makes) is the server's own still: it is kept, so
//! that the devices that trust it need not trust a new one, with a
//! warning that says how to start over. One made for a host name like an
//! address is refused, saying so: a DNS constraint such as `8.8.8.8` is
//! malformed to webpki (rustls' verifier), so no certificate it signed
//! ever verified and that version stopped at every start; no device can
//! have come to rely on it.

use rcgen::{KeyPair, SerialNumber};

use super::issue;
use crate::transport::{Validity, tlv};

/// A CA that is the server's own, as this version makes them, or as an
/// earlier one did (with why it would not be made so now).
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Own {
    Now,
    Earlier(String),
}

/// What to do about a CA that is not the server's own.
const START_OVER: &str = "remove ca.key, ca.pem and server.pem to have a new CA made \
                          (clients must then trust it anew)";

/// Whether `der`, a CA certificate of `key` named `common_name` for
/// `host`, is one this code made; if not, why (of `ca.pem`, with what to
/// do).
pub(super) fn check(
    key: &KeyPair,
    der: &[u8],
    common_name: &str,
    host: Option<&str>,
) -> Result<Own, String> {
    let foreign = || {
        format!(
            "is not a CA this server made, though its key is ca.key (its extensions or name \
             constraints are not as this server makes them); put back the CA this server \
             made, or {START_OVER}"
        )
    };
    let (tbs, serial) = signed_part(der).ok_or_else(foreign)?;
    let validity = Validity::of(der).ok_or_else(foreign)?;
    let serial = SerialNumber::from_slice(serial);
    let made = issue::self_signed(
        key,
        common_name,
        host,
        (validity.not_before, validity.not_after),
        serial,
    )
    .map_err(|_| foreign())?;
    if signed_part(&made).map(|(tbs, _)| tbs) != Some(tbs) {
        return Err(foreign());
    }
    match host {
        Some(host) if issue::like_address(host) => Err(format!(
            "was made by an earlier version for the host name {host:?}, like an IP address: \
             its name constraints are malformed to clients, so no certificate it signs can \
             be trusted (that version could not start with it); {START_OVER}"
        )),
        Some(host) if issue::ca_host_for(host).as_deref() != Some(host) => {
            Ok(Own::Earlier(earlier(host)))
        }
        _ => Ok(Own::Now),
    }
}

/// What to say of a CA an earlier version made for `host`, a single-label
/// name.
fn earlier(host: &str) -> String {
    format!(
        "was made by an earlier version for the host name {host:?} (a single-label name), and its name \
         constraints permit {host:?} and every name under it, so it could vouch for sites \
         that are not this server (this version leaves such a name out); kept, so that the \
         devices that trust it need not trust a new CA. To start over with a CA that \
         cannot: stop the server, delete ca.key, ca.pem and server.pem in its directory, \
         start it, and have each device trust the new CA (GET /ca.pem)"
    )
}

/// The contents of a certificate's tbsCertificate, and its serial
/// number's bytes.
fn signed_part(der: &[u8]) -> Option<(&[u8], &[u8])> {
    let (_, certificate, _) = tlv(der)?;
    let (_, tbs, _) = tlv(certificate)?;
    let (tag, _, rest) = tlv(tbs)?;
    let after_version = if tag == 0xA0 { rest } else { tbs };
    let (tag, serial, _) = tlv(after_version)?;
    (tag == 0x02).then_some((tbs, serial))
}
