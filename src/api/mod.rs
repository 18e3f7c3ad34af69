//! The Plant Store API: routing, authentication, handlers and errors.
//!
//! `App` is the engine's `Handler`. A request passes through one routing
//! `match` on (path, method); the handler then runs the checks in the
//! order the contract fixes: auth, content type, size, parse, validate,
//! apply. Nothing here touches a socket (the engine does) or the map behind
//! the store (the store does).

mod auth;
mod error;
mod plants;

pub use auth::Tokens;
pub use error::ApiError;

use crate::http::{Handler, Request, Response};
use crate::store::Store;

/// The application: the store and the accepted tokens.
pub struct App {
    store: Store,
    tokens: Tokens,
}

impl App {
    /// An application over this store, accepting these tokens.
    pub fn new(store: Store, tokens: Tokens) -> App {
        App { store, tokens }
    }

    /// The store, for start-up reporting.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The auth check, first line of every protected handler.
    fn authorize(&self, request: &Request<'_>) -> Result<(), ApiError> {
        self.tokens.check(request.header("authorization"))
    }
}

impl Handler for App {
    fn handle(&self, request: &mut Request<'_>) -> Response {
        route(self, request).unwrap_or_else(|e| e.to_response())
    }
}

/// The resources the server knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Resource {
    Plants,
}

/// Maps a path to a resource; `None` is 404.
fn resource(path: &str) -> Option<Resource> {
    match path {
        "/plants" => Some(Resource::Plants),
        _ => None,
    }
}

/// The one routing table: first match wins, 405 lists what is allowed.
fn route(app: &App, request: &mut Request<'_>) -> Result<Response, ApiError> {
    let resource = resource(request.path()).ok_or(ApiError::NoRoute)?;
    match (resource, request.method()) {
        (Resource::Plants, "POST") => plants::create(app, request),
        (Resource::Plants, _) => Err(ApiError::MethodNotAllowed("POST")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_path_maps_to_its_resource() {
        let table = [
            ("/plants", Some(Resource::Plants)),
            ("/plants/", None),
            ("/Plants", None),
            ("/", None),
            ("", None),
        ];
        for (path, want) in table {
            assert_eq!(resource(path), want, "{path}");
        }
    }
}
