//! Tickets: short-lived credentials for the change feed, for a browser's
//! `EventSource`, which cannot send an `Authorization` header.
//!
//! `POST /plants/changes/tickets` (with a token) mints one; the feed takes
//! it as `?ticket=`, on that route only. A ticket is stateless: nothing is
//! stored per ticket, so any number may be minted, and any instance that
//! holds the key (on PostgreSQL every instance: the door shares it) checks
//! one another minted. It is the base64url (no padding) of
//!
//! ```text
//! version (1 byte, 1) | expiry (8, ms since 1970, big-endian) | scope (1: 0 read, 1 write)
//!   | token reference (16) | HMAC-SHA256(key, LABEL | the 26 bytes before) (32)
//! ```
//!
//! 58 bytes, 78 characters. `LABEL` names the route: a ticket is good for
//! the feed and nothing else, whatever route later takes one. The token
//! reference is the first 16 bytes of HMAC-SHA256(key, `REFERENCE` |
//! token): a keyed MAC, never the token nor a plain hash of it, so a seen
//! ticket gives nothing to guess a short token with offline. A ticket is
//! accepted while unexpired and only if the token it names is in the
//! current set (a reload that removes the token revokes its tickets), with
//! the narrower of its scope and the token's scope now. The MAC is
//! compared in constant time (`Mac::verify_slice`). A ticket is never
//! logged (the access log has no query) and never in an error body.

use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as BASE64URL;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::auth::{Granted, Scope, Set, Tokens};
use crate::lock::{read, write};
use crate::plants::TicketKey;

/// Binds a ticket's MAC to the route that takes it.
const LABEL: &[u8] = b"plantstore ticket 1 GET /plants/changes\0";
/// Keeps a token reference apart from a ticket's MAC.
const REFERENCE: &[u8] = b"plantstore token reference 1\0";
const VERSION: u8 = 1;
/// Bytes of a token reference.
const REF: usize = 16;
/// Bytes before the MAC: version, expiry, scope, reference.
const PAYLOAD: usize = 1 + 8 + 1 + REF;
/// Bytes of a ticket, decoded.
const TICKET: usize = PAYLOAD + 32;
/// Characters of a ticket: longer text is refused before decoding.
const TEXT: usize = TICKET.div_ceil(3) * 4;

/// The key and the lifetime of the tickets minted.
pub struct Tickets {
    key: RwLock<TicketKey>,
    ttl: Duration,
    /// Every token's reference under the key, for one set of tokens:
    /// made once per reload or rotation (`refresh`), not per ticket
    /// checked, which would cost a MAC per token on an event loop.
    references: RwLock<Option<References>>,
}

/// The references of one set of tokens under one key, in the set's order.
#[derive(Clone)]
struct References {
    set: Set,
    key: TicketKey,
    refs: Arc<[[u8; REF]]>,
}

impl Tickets {
    /// Tickets signed with `key`, each valid for `ttl`.
    pub fn new(key: TicketKey, ttl: Duration) -> Tickets {
        Tickets {
            key: RwLock::new(key),
            ttl,
            references: RwLock::new(None),
        }
    }

    /// Signs with `key` from now on (the tickets of the old one are
    /// refused); whether it differs from the one in use.
    pub fn set_key(&self, key: TicketKey) -> bool {
        let mut held = write(&self.key);
        let changed = *held != key;
        *held = key;
        changed
    }

    /// How long a ticket minted now is valid.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// A ticket for `token`, granting `scope`, valid for the lifetime.
    pub fn mint(&self, token: &[u8], scope: Scope) -> String {
        let expiry = now_ms().saturating_add(self.ttl.as_millis() as u64);
        self.mint_until(token, scope, expiry)
    }

    fn mint_until(&self, token: &[u8], scope: Scope, expiry: u64) -> String {
        let key = *read(&self.key);
        let mut ticket = [0u8; TICKET];
        ticket[0] = VERSION;
        ticket[1..9].copy_from_slice(&expiry.to_be_bytes());
        ticket[9] = u8::from(scope == Scope::Write);
        ticket[10..PAYLOAD].copy_from_slice(&reference(&key, token));
        let mac = signer(&key, LABEL).chain_update(&ticket[..PAYLOAD]);
        ticket[PAYLOAD..].copy_from_slice(&mac.finalize().into_bytes());
        BASE64URL.encode(ticket)
    }

    /// What `ticket` grants now, against the tokens accepted now; `None`
    /// for any ticket that is not valid (malformed, altered, of another
    /// key, expired, or its token gone).
    pub fn check(&self, ticket: &str, tokens: &Tokens) -> Option<Granted> {
        self.check_at(ticket, tokens, now_ms())
    }

    fn check_at(&self, ticket: &str, tokens: &Tokens, now: u64) -> Option<Granted> {
        if ticket.len() > TEXT {
            return None;
        }
        let mut bytes = [0u8; TICKET];
        match BASE64URL.decode_slice(ticket, &mut bytes) {
            Ok(TICKET) => {}
            _ => return None,
        }
        let key = *read(&self.key);
        let (payload, mac) = bytes.split_at(PAYLOAD);
        signer(&key, LABEL)
            .chain_update(payload)
            .verify_slice(mac)
            .ok()?;
        let expiry = u64::from_be_bytes(payload[1..9].try_into().ok()?);
        let scope = match payload[9] {
            0 => Scope::Read,
            1 => Scope::Write,
            _ => return None,
        };
        if payload[0] != VERSION || now >= expiry {
            return None;
        }
        let named = &payload[10..PAYLOAD];
        let known = self.references(tokens, key);
        let mut found = None;
        // Every reference is compared in full, whatever matched.
        for (entry, mine) in known.set.iter().zip(known.refs.iter()) {
            let diff = mine
                .iter()
                .zip(named)
                .fold(0u8, |acc, (a, b)| acc | (a ^ b));
            if std::hint::black_box(diff) == 0 {
                found = Some(entry);
            }
        }
        let granted = found?.granted();
        Some(Granted {
            scope: granted.scope.min(scope),
            ..granted
        })
    }

    /// Makes the references of the tokens in use under the key in use
    /// now, so that no ticket checked later pays for them (after a reload
    /// or a rotation, on the thread that made it).
    pub fn refresh(&self, tokens: &Tokens) {
        let key = *read(&self.key);
        self.references(tokens, key);
    }

    /// The references of the set in use under `key`, made now if those
    /// kept are of another set or key.
    fn references(&self, tokens: &Tokens, key: TicketKey) -> References {
        let set = tokens.current();
        if let Some(known) = read(&self.references).as_ref()
            && Arc::ptr_eq(&known.set, &set)
            && known.key == key
        {
            return known.clone();
        }
        let refs = set.iter().map(|e| reference(&key, &e.token)).collect();
        let known = References { set, key, refs };
        *write(&self.references) = Some(known.clone());
        known
    }
}

/// A MAC keyed with `key` over `label` and what follows.
fn signer(key: &TicketKey, label: &[u8]) -> Hmac<Sha256> {
    <Hmac<Sha256> as Mac>::new_from_slice(key)
        .expect("HMAC takes a key of any length")
        .chain_update(label)
}

/// The reference a ticket names its token by: a keyed MAC of it.
fn reference(key: &TicketKey, token: &[u8]) -> [u8; REF] {
    let full = signer(key, REFERENCE).chain_update(token).finalize();
    let mut out = [0u8; REF];
    out.copy_from_slice(&full.into_bytes()[..REF]);
    out
}

/// Milliseconds since 1970 (0 before it).
fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Grant;

    const NOW: u64 = 1_700_000_000_000;

    fn tokens() -> Tokens {
        let reader = Grant {
            token: "reader".into(),
            scope: Scope::Read,
        };
        Tokens::new(vec![Grant::write("writer".into()), reader])
    }

    fn tickets() -> Tickets {
        Tickets::new([7; 32], Duration::from_secs(60))
    }

    fn scope(tickets: &Tickets, ticket: &str, tokens: &Tokens, now: u64) -> Option<Scope> {
        tickets.check_at(ticket, tokens, now).map(|g| g.scope)
    }

    #[test]
    fn a_ticket_grants_its_scope_until_it_expires() {
        let (tickets, tokens) = (tickets(), tokens());
        let write = tickets.mint_until(b"writer", Scope::Write, NOW + 1000);
        assert_eq!(write.len(), TEXT - 2, "58 bytes, unpadded");
        assert_eq!(scope(&tickets, &write, &tokens, NOW), Some(Scope::Write));
        assert_eq!(
            scope(&tickets, &write, &tokens, NOW + 999),
            Some(Scope::Write)
        );
        assert_eq!(
            scope(&tickets, &write, &tokens, NOW + 1000),
            None,
            "expired"
        );
        let read = tickets.mint_until(b"reader", Scope::Read, NOW + 1000);
        assert_eq!(scope(&tickets, &read, &tokens, NOW), Some(Scope::Read));
        // A ticket never grants more than its token has now.
        let wide = tickets.mint_until(b"reader", Scope::Write, NOW + 1000);
        assert_eq!(scope(&tickets, &wide, &tokens, NOW), Some(Scope::Read));
    }

    #[test]
    fn an_altered_forged_or_foreign_ticket_is_refused() {
        let (tickets, tokens) = (tickets(), tokens());
        let good = tickets.mint_until(b"writer", Scope::Read, NOW + 1000);
        let bytes = BASE64URL.decode(&good).unwrap();
        for at in 0..TICKET {
            let mut altered = bytes.clone();
            altered[at] ^= 1;
            let text = BASE64URL.encode(&altered);
            assert_eq!(scope(&tickets, &text, &tokens, NOW), None, "byte {at}");
        }
        let other = Tickets::new([8; 32], Duration::from_secs(60));
        let foreign = other.mint_until(b"writer", Scope::Read, NOW + 1000);
        assert_eq!(scope(&tickets, &foreign, &tokens, NOW), None, "another key");
        for text in [
            "",
            "x",
            &good[1..],
            &format!("{good}A"),
            &format!("{good}="),
            "writer",
        ] {
            assert_eq!(scope(&tickets, text, &tokens, NOW), None, "{text:?}");
        }
        // Nor does the token itself appear in it, or its plain hash.
        assert!(!bytes.windows(6).any(|w| w == b"writer"));
        let hashed = <Sha256 as sha2::Digest>::digest(b"writer");
        assert!(!bytes.windows(REF).any(|w| w == &hashed[..REF]));
    }

    #[test]
    fn a_ticket_of_a_removed_token_or_an_old_key_is_refused() {
        let (tickets, tokens) = (tickets(), tokens());
        let ticket = tickets.mint_until(b"reader", Scope::Read, NOW + 1000);
        // The references are made once and kept for the set...
        tickets.refresh(&tokens);
        assert_eq!(scope(&tickets, &ticket, &tokens, NOW), Some(Scope::Read));
        // ... and made again for the next one, whether refreshed or not.
        tokens.replace(vec![Grant::write("writer".into())]);
        assert_eq!(scope(&tickets, &ticket, &tokens, NOW), None, "token gone");
        tokens.replace(vec![
            Grant::write("writer".into()),
            Grant::write("reader".into()),
        ]);
        tickets.refresh(&tokens);
        assert_eq!(
            scope(&tickets, &ticket, &tokens, NOW),
            Some(Scope::Read),
            "back, as a write token: the ticket's own scope bounds it"
        );
        let kept = tickets.mint_until(b"writer", Scope::Read, NOW + 1000);
        assert!(!tickets.set_key([7; 32]), "the same key");
        assert!(tickets.set_key([9; 32]), "a new key");
        assert_eq!(scope(&tickets, &kept, &tokens, NOW), None, "key rotated");
    }
}
