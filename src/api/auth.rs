//! Bearer-token authentication (RFC 6750).
//!
//! Holds the accepted tokens (several, for rotation) and checks an
//! `Authorization` header against all of them in constant time: every
//! token is compared in full, whatever matched, so the time taken does not
//! reveal how much of a guess was right. Tokens are never logged.
//!
//! The set can be replaced while the server runs (a reload on SIGHUP): a
//! request is checked against one whole set, the old or the new, never a
//! mix, and the next request sees the new one. Each token has an alive
//! flag, kept across reloads while the token stays and cleared when it
//! leaves: what was opened with it (a feed stream) ends when it turns
//! false.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use super::ApiError;
use crate::lock::{read, write};

/// What a token (or a ticket made with it) may do: every route's methods
/// say which they need (`routes::ROUTES`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    /// Read plants, list, query, export, follow the feed.
    Read,
    /// Everything `Read` may, and change plants.
    Write,
}

impl Scope {
    /// As the token file and the API write it: `read`, `write`.
    pub fn name(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Write => "write",
        }
    }
}

/// One accepted token and its scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The token as a client sends it.
    pub token: String,
    /// What it may do.
    pub scope: Scope,
}

impl Grant {
    /// A token that may do everything (`--token`, `PLANTSTORE_TOKEN`, a
    /// line of the token file without a scope).
    pub fn write(token: String) -> Grant {
        Grant {
            token,
            scope: Scope::Write,
        }
    }
}

/// One token of the set.
pub(super) struct Entry {
    pub(super) token: Vec<u8>,
    scope: Scope,
    /// Cleared when a reload removes the token.
    alive: Arc<AtomicBool>,
}

impl Entry {
    /// What the token grants.
    pub(super) fn granted(&self) -> Granted {
        Granted {
            scope: self.scope,
            alive: Arc::clone(&self.alive),
        }
    }
}

/// A whole set of tokens with their scopes, shared by the requests
/// checked against it; sorted by token, so a reload finds the tokens that
/// stay by bisection.
pub(super) type Set = Arc<[Entry]>;

/// What a request's credentials (a token, or a ticket made with one)
/// grant: a scope, for as long as the token stays in the set.
#[derive(Debug, Clone)]
pub struct Granted {
    /// What it may do.
    pub scope: Scope,
    /// False once a reload removed the token.
    pub alive: Arc<AtomicBool>,
}

/// The accepted bearer tokens, each with its scope.
pub struct Tokens {
    accepted: RwLock<Set>,
}

impl Tokens {
    /// Accepts exactly these tokens.
    pub fn new(tokens: Vec<Grant>) -> Tokens {
        Tokens {
            accepted: RwLock::new(set(tokens, &[])),
        }
    }

    /// From now on accepts exactly these tokens instead: a token that
    /// stays keeps its alive flag, one that leaves has it cleared.
    pub fn replace(&self, tokens: Vec<Grant>) {
        let old = self.current();
        let new = set(tokens, &old);
        *write(&self.accepted) = Arc::clone(&new);
        for entry in old.iter().filter(|e| position(&new, &e.token).is_none()) {
            entry.alive.store(false, Ordering::Release);
        }
    }

    /// How many tokens are accepted.
    pub fn count(&self) -> usize {
        self.current().len()
    }

    /// The set in use now.
    pub(super) fn current(&self) -> Set {
        Arc::clone(&read(&self.accepted))
    }

    /// Checks an `Authorization` header value: what the token it carries
    /// grants.
    pub fn check(&self, header: Option<&[u8]>) -> Result<Granted, ApiError> {
        let Some(presented) = header.and_then(bearer) else {
            return Err(missing(header));
        };
        // Every token is compared in full, whatever matched (a token is
        // kept once, so at most one does).
        let set = self.current();
        let mut found = None;
        for entry in set.iter() {
            if same(&entry.token, presented) {
                found = Some(entry);
            }
        }
        found
            .map(Entry::granted)
            .ok_or(ApiError::Unauthorized { presented: true })
    }
}

/// The set of `tokens`, each keeping its flag in `old` if it is there.
fn set(tokens: Vec<Grant>, old: &[Entry]) -> Set {
    let mut entries: Vec<Entry> = tokens
        .into_iter()
        .map(|g| {
            let token = g.token.into_bytes();
            let alive = match position(old, &token) {
                Some(at) => Arc::clone(&old[at].alive),
                None => Arc::new(AtomicBool::new(true)),
            };
            Entry {
                token,
                scope: g.scope,
                alive,
            }
        })
        .collect();
    entries.sort_unstable_by(|a, b| a.token.cmp(&b.token));
    entries.into()
}

/// Where `token` is in a sorted set.
fn position(set: &[Entry], token: &[u8]) -> Option<usize> {
    set.binary_search_by(|e| e.token.as_slice().cmp(token)).ok()
}

/// Why `header` holds no bearer token: absent, empty or `Bearer` without
/// a token is a missing token; another scheme, or none at all
/// (`Authorization: change-me`), is `NotBearer`, whose answer says how to
/// send one.
fn missing(header: Option<&[u8]>) -> ApiError {
    let value = header.unwrap_or_default().trim_ascii();
    let bearer = value
        .get(..6)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case(b"bearer"))
        && value.get(6).is_none_or(|b| *b == b' ');
    if value.is_empty() || bearer {
        ApiError::Unauthorized { presented: false }
    } else {
        ApiError::NotBearer
    }
}

/// The token of a `Bearer <token>` credential (scheme case-insensitive).
pub(super) fn bearer(value: &[u8]) -> Option<&[u8]> {
    let (scheme, rest) = value.split_at_checked(7)?;
    if !scheme.eq_ignore_ascii_case(b"bearer ") {
        return None;
    }
    let token = rest.trim_ascii();
    (!token.is_empty()).then_some(token)
}

/// Constant-time equality for equal lengths (a length mismatch returns at
/// once: token lengths are not secret).
fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens() -> Tokens {
        let reader = Grant {
            token: "gamma".into(),
            scope: Scope::Read,
        };
        Tokens::new(vec![
            Grant::write("alpha".into()),
            Grant::write("beta".into()),
            reader,
        ])
    }

    #[test]
    fn accepts_any_configured_token_with_any_scheme_case() {
        let scope = |header: &[u8]| tokens().check(Some(header)).ok().map(|g| g.scope);
        assert_eq!(scope(b"Bearer alpha"), Some(Scope::Write));
        assert_eq!(scope(b"bearer beta"), Some(Scope::Write));
        assert_eq!(scope(b"Bearer gamma"), Some(Scope::Read));
    }

    #[test]
    fn a_reload_clears_the_flag_of_a_token_that_leaves_and_keeps_the_others() {
        let tokens = tokens();
        let alpha = tokens.check(Some(b"Bearer alpha")).unwrap().alive;
        let gamma = tokens.check(Some(b"Bearer gamma")).unwrap().alive;
        tokens.replace(vec![
            Grant::write("gamma".into()),
            Grant::write("delta".into()),
        ]);
        assert!(!alpha.load(Ordering::Acquire), "alpha left");
        assert!(gamma.load(Ordering::Acquire), "gamma stayed");
        let again = tokens.check(Some(b"Bearer gamma")).unwrap();
        assert!(Arc::ptr_eq(&again.alive, &gamma), "the same flag");
        assert_eq!(again.scope, Scope::Write, "its new scope");
        assert!(tokens.check(Some(b"Bearer alpha")).is_err());
    }

    #[test]
    fn refuses_missing_wrong_scheme_and_wrong_token() {
        let missing = tokens().check(None);
        assert!(matches!(
            missing,
            Err(ApiError::Unauthorized { presented: false })
        ));
        for other in [
            &b"Basic alpha"[..],
            b"alpha",
            b"Token alpha",
            b"Bearer\talpha",
        ] {
            let refused = tokens().check(Some(other));
            assert!(matches!(refused, Err(ApiError::NotBearer)), "{other:?}");
        }
        for empty in [&b""[..], b"  ", b"Bearer", b"bearer  "] {
            let refused = tokens().check(Some(empty));
            assert!(
                matches!(refused, Err(ApiError::Unauthorized { presented: false })),
                "{empty:?}"
            );
        }
        let empty = tokens().check(Some(b"Bearer "));
        assert!(matches!(
            empty,
            Err(ApiError::Unauthorized { presented: false })
        ));
        let wrong = tokens().check(Some(b"Bearer alphx"));
        assert!(matches!(
            wrong,
            Err(ApiError::Unauthorized { presented: true })
        ));
        let prefix = tokens().check(Some(b"Bearer alph"));
        assert!(matches!(
            prefix,
            Err(ApiError::Unauthorized { presented: true })
        ));
    }
}
