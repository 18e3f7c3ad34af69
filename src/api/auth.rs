//! Bearer-token authentication (RFC 6750).
//!
//! Holds the accepted tokens (several, for rotation) and checks an
//! `Authorization` header against all of them in constant time: every
//! token is compared in full, whatever matched, so the time taken does not
//! reveal how much of a guess was right. Tokens are never logged.
//!
//! The set can be replaced while the server runs (a reload on SIGHUP): a
//! request is checked against one whole set, the old or the new, never a
//! mix, and the next request sees the new one.

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

/// A whole set of tokens with their scopes, shared by the requests
/// checked against it.
type Set = Arc<[(Vec<u8>, Scope)]>;

/// The accepted bearer tokens, each with its scope.
pub struct Tokens {
    accepted: RwLock<Set>,
}

impl Tokens {
    /// Accepts exactly these tokens.
    pub fn new(tokens: Vec<Grant>) -> Tokens {
        Tokens {
            accepted: RwLock::new(set(tokens)),
        }
    }

    /// From now on accepts exactly these tokens instead.
    pub fn replace(&self, tokens: Vec<Grant>) {
        *write(&self.accepted) = set(tokens);
    }

    /// How many tokens are accepted.
    pub fn count(&self) -> usize {
        self.current().len()
    }

    fn current(&self) -> Set {
        Arc::clone(&read(&self.accepted))
    }

    /// Checks an `Authorization` header value: the scope of the token it
    /// carries.
    pub fn check(&self, header: Option<&[u8]>) -> Result<Scope, ApiError> {
        let Some(presented) = header.and_then(bearer) else {
            return Err(ApiError::Unauthorized { presented: false });
        };
        // Every token is compared; the widest scope among those that match
        // (a token is kept once, so there is at most one).
        let mut matched = None;
        for (token, scope) in self.current().iter() {
            if same(token, presented) {
                matched = matched.max(Some(*scope));
            }
        }
        matched.ok_or(ApiError::Unauthorized { presented: true })
    }
}

fn set(tokens: Vec<Grant>) -> Set {
    tokens
        .into_iter()
        .map(|g| (g.token.into_bytes(), g.scope))
        .collect()
}

/// The token of a `Bearer <token>` credential (scheme case-insensitive).
fn bearer(value: &[u8]) -> Option<&[u8]> {
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
        assert_eq!(
            tokens().check(Some(b"Bearer alpha")).ok(),
            Some(Scope::Write)
        );
        assert_eq!(
            tokens().check(Some(b"bearer beta")).ok(),
            Some(Scope::Write)
        );
        assert_eq!(
            tokens().check(Some(b"Bearer gamma")).ok(),
            Some(Scope::Read)
        );
    }

    #[test]
    fn refuses_missing_wrong_scheme_and_wrong_token() {
        let missing = tokens().check(None);
        assert!(matches!(
            missing,
            Err(ApiError::Unauthorized { presented: false })
        ));
        let basic = tokens().check(Some(b"Basic alpha"));
        assert!(matches!(
            basic,
            Err(ApiError::Unauthorized { presented: false })
        ));
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
