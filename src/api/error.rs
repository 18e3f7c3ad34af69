//! `ApiError`: every way a request can fail, and its status and Error body.
//!
//! `status()` is the one place a failure becomes a status code. Messages
//! name the offending field, parameter or limit; they never carry a token,
//! a file path or internal detail (that is logged, not sent).

use std::fmt;

use crate::http::{BodyError, Response};
use crate::model::{InvalidBody, NotDone, Refusal, Unavailable};

/// A request that cannot be answered with success.
#[derive(Debug)]
pub enum ApiError {
    /// No such route.
    NoRoute,
    /// Known path, wrong method; the value lists the allowed methods.
    MethodNotAllowed(String),
    /// Missing or wrong credentials; `presented` when a bearer token was
    /// sent but is not valid.
    Unauthorized {
        /// Whether a bearer token was presented.
        presented: bool,
    },
    /// An `Authorization` header whose scheme is not `Bearer`
    /// (`Authorization: change-me`, `Basic ...`): no bearer token was
    /// presented, and the answer says how to send one.
    NotBearer,
    /// A feed ticket that is not valid (malformed, altered, expired, of
    /// another key, or its token removed): which, is not said.
    Ticket,
    /// A valid token (or ticket) that may not do this: what it lacks, in
    /// words (`a read token cannot change plants`, `the server is
    /// read-only`).
    Forbidden(&'static str),
    /// The client's address failed to authenticate too often: 429, with
    /// `Retry-After` in seconds.
    Throttled {
        /// Seconds until it may try again.
        retry_after: u64,
        /// Refused by the server-wide limit, not its own.
        everyone: bool,
    },
    /// A body with a content type other than JSON.
    UnsupportedMediaType,
    /// A path id or query parameter that does not parse (its name).
    BadParameter(&'static str),
    /// A query parameter repeated, or whose value does not decode (its
    /// name).
    BadQuery(&'static str),
    /// A query parameter the route does not take (its name as sent, at
    /// most 64 bytes of it), and those it takes.
    UnknownParameter(String, &'static [&'static str]),
    /// The body could not be read.
    Body(BodyError),
    /// The body is not a valid NewPlant or Plant.
    Invalid(InvalidBody),
    /// The store refused the change.
    Store(Refusal),
    /// The store cannot be used now (503 with `Retry-After`).
    Unavailable(Unavailable),
}

impl ApiError {
    /// The HTTP status for this error.
    pub fn status(&self) -> u16 {
        match self {
            ApiError::NoRoute => 404,
            ApiError::MethodNotAllowed(_) => 405,
            ApiError::Unauthorized { .. } | ApiError::NotBearer | ApiError::Ticket => 401,
            ApiError::Forbidden(_) => 403,
            ApiError::Throttled { .. } => 429,
            ApiError::UnsupportedMediaType => 415,
            ApiError::BadParameter(_) | ApiError::BadQuery(_) | ApiError::UnknownParameter(..) => {
                400
            }
            ApiError::Body(BodyError::TooLarge(_)) => 413,
            ApiError::Body(BodyError::Timeout) => 408,
            ApiError::Body(BodyError::Malformed(_) | BodyError::Closed) => 400,
            // Never sent: `routes::route` reads the body before the handler
            // runs, and answers one still arriving itself (the engine drops
            // that answer and calls again once the body is in).
            ApiError::Body(BodyError::NotYet) => 400,
            ApiError::Invalid(_) => 400,
            ApiError::Store(Refusal::Exists(_)) => 409,
            ApiError::Store(Refusal::NotFound(_)) => 404,
            ApiError::Store(Refusal::Full(_) | Refusal::DataFull(_)) => 507,
            ApiError::Store(Refusal::Storage(_)) => 500,
            // No one waits for it: never sent (`Response::gone`).
            ApiError::Unavailable(Unavailable::Gone) => 499,
            ApiError::Unavailable(_) => 503,
        }
    }

    /// The Error response, with the headers the status calls for.
    pub fn to_response(&self) -> Response {
        if let ApiError::Unavailable(Unavailable::Gone) = self {
            return Response::gone();
        }
        let response = Response::error(self.status(), &self.to_string());
        match self {
            ApiError::MethodNotAllowed(allow) => response.with_header("Allow", allow),
            ApiError::Unauthorized { presented: false } | ApiError::NotBearer => {
                response.with_header("WWW-Authenticate", r#"Bearer realm="plantstore""#)
            }
            ApiError::Unauthorized { presented: true } | ApiError::Ticket => response.with_header(
                "WWW-Authenticate",
                r#"Bearer realm="plantstore", error="invalid_token""#,
            ),
            ApiError::Unavailable(_) => response.with_header("Retry-After", "1"),
            ApiError::Throttled { retry_after, .. } => {
                response.with_header("Retry-After", retry_after.to_string())
            }
            _ => response,
        }
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApiError::NoRoute => f.write_str("no such resource"),
            ApiError::MethodNotAllowed(allow) => {
                write!(f, "method not allowed here; allowed: {allow}")
            }
            ApiError::Unauthorized { presented: false } => {
                f.write_str("missing bearer token in the Authorization header")
            }
            ApiError::Unauthorized { presented: true } => f.write_str("invalid bearer token"),
            ApiError::NotBearer => f.write_str(
                "the Authorization header's scheme must be Bearer: send Authorization: Bearer <token>",
            ),
            ApiError::Ticket => f.write_str("the ticket is not valid; mint a new one"),
            ApiError::Forbidden(why) => f.write_str(why),
            ApiError::Throttled {
                retry_after,
                everyone: false,
            } => write!(
                f,
                "too many failed authentications from this address; try again in {retry_after} s"
            ),
            ApiError::Throttled {
                retry_after,
                everyone: true,
            } => write!(
                f,
                "too many failed authentications server-wide, from many addresses; \
                 only a token already used from this address passes; try again in {retry_after} s"
            ),
            ApiError::UnsupportedMediaType => f.write_str("Content-Type must be application/json"),
            ApiError::BadParameter(name) => write!(f, "malformed {name}"),
            ApiError::BadQuery(name) => write!(f, "malformed query parameter {name}"),
            ApiError::UnknownParameter(name, accepted) => {
                let accepted = match accepted.join(", ") {
                    none if none.is_empty() => "none".to_owned(),
                    names => names,
                };
                write!(
                    f,
                    "unknown query parameter {name:?}; accepted here: {accepted}"
                )
            }
            ApiError::Body(e) => e.fmt(f),
            ApiError::Invalid(e) => e.fmt(f),
            ApiError::Store(e) => e.fmt(f),
            ApiError::Unavailable(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for ApiError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ApiError::Body(e) => Some(e),
            ApiError::Invalid(e) => Some(e),
            ApiError::Store(e) => Some(e),
            _ => None,
        }
    }
}

impl From<BodyError> for ApiError {
    fn from(e: BodyError) -> ApiError {
        ApiError::Body(e)
    }
}

impl From<InvalidBody> for ApiError {
    fn from(e: InvalidBody) -> ApiError {
        ApiError::Invalid(e)
    }
}

impl From<NotDone> for ApiError {
    fn from(e: NotDone) -> ApiError {
        match e {
            NotDone::Refused(e) => ApiError::Store(e),
            NotDone::Unavailable(e) => ApiError::Unavailable(e),
        }
    }
}

impl From<Refusal> for ApiError {
    fn from(e: Refusal) -> ApiError {
        ApiError::Store(e)
    }
}
