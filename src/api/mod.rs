//! The Plant Store API: routing, authentication, handlers and errors.
//!
//! `App` is the engine's `Handler`. A request passes through one routing
//! `match` on (path, method); the handler then runs the checks in the
//! order the contract fixes: auth, content type, size, parse, validate,
//! apply. Nothing here touches a socket (the engine does) or the map behind
//! the store (the store does).
//!
//! Browsers: `App::handle` answers a CORS preflight before routing (so
//! before auth) and adds the CORS headers to every answer, those completed
//! later by the journal's committer included (`cors`); the built-in page
//! and its files are served from `ui` unless `--no-ui`.

mod auth;
mod changes;
mod cors;
mod error;
mod export;
mod lz;
mod metrics;
mod plants;
mod query;
mod reply;
mod service;
mod ui;

pub use auth::Tokens;
pub use cors::{Cors, CorsHeaders, RefusedOrigins};
pub use error::ApiError;
pub use metrics::Metrics;
pub use plants::PAGE_BYTES;

use std::sync::Arc;
use std::time::Duration;

use crate::changes::Hub;
use crate::http::{Gauge, Handler, Request, Response};
use crate::model::TextLimits;
use crate::plants::Plants;
use crate::webhook::Webhooks;

/// The application: the plants, the accepted tokens, the webhook sender,
/// the counters, and the name and tag limits (the OpenAPI document
/// declares them).
pub struct App {
    plants: Plants,
    tokens: Tokens,
    webhooks: Arc<Webhooks>,
    metrics: Arc<Metrics>,
    text_limits: TextLimits,
    cors: Cors,
    ui: Option<ui::Ui>,
    changes: Arc<Hub>,
    /// Origins refused so far (logged once each).
    refused: RefusedOrigins,
}

impl App {
    /// An application over these plants, accepting these tokens, announcing
    /// new plants through `webhooks`, reporting the connections `gauge`
    /// counts, refusing names and tags longer than `text_limits`, letting
    /// the `cors` origins read its answers, serving the page at `/` if `ui`.
    pub fn new(
        plants: Plants,
        tokens: Tokens,
        webhooks: Webhooks,
        gauge: Gauge,
        text_limits: TextLimits,
        cors: Cors,
        ui: bool,
    ) -> App {
        let (epoch, last) = plants.changes_start();
        let changes = Hub::new(epoch, last, plants.change_log());
        // The door's one change hook is the feed's: set before any change.
        if !plants.set_change_hook(changes.hook()) {
            log::warn!("change feed: the store's change hook was taken; the feed stays silent");
        }
        App {
            plants,
            tokens,
            webhooks: Arc::new(webhooks),
            metrics: Arc::new(Metrics::new(gauge)),
            text_limits,
            cors,
            ui: ui.then(ui::Ui::new),
            changes,
            refused: RefusedOrigins::default(),
        }
    }

    /// After the server stopped: finishes the database's queued requests
    /// (their webhooks included), gives queued webhook deliveries `grace`,
    /// then makes the journal durable (it matters with `--sync never`).
    pub fn shut_down(&self, grace: Duration) {
        self.plants.shut_down();
        self.webhooks.shutdown(grace);
    }

    /// Accepts exactly these tokens from the next request on.
    pub fn set_tokens(&self, tokens: Vec<String>) {
        self.tokens.replace(tokens);
    }

    /// How many tokens are accepted now.
    pub fn token_count(&self) -> usize {
        self.tokens.count()
    }

    /// Signs webhook deliveries with `key` from the next attempt on.
    pub fn set_webhook_secret(&self, key: Vec<u8>) {
        self.webhooks.set_secret(key);
    }

    /// The auth check, first line of every protected handler.
    fn authorize(&self, request: &Request<'_>) -> Result<(), ApiError> {
        self.tokens.check(request.header("authorization"))
    }

    /// The CORS headers every answer to `request` carries, whenever and on
    /// whichever thread it is sent.
    fn cors_headers(&self, request: &Request<'_>) -> CorsHeaders {
        self.cors.headers(request.header("origin"))
    }
}

impl Handler for App {
    fn handle(&self, request: &mut Request<'_>) -> Response {
        let resource =
            resource(request.path()).filter(|r| self.ui.is_some() || !matches!(r, Resource::Ui(_)));
        let cors = self.cors_headers(request);
        if let Some(origin) = request.header("origin")
            && !cors.allowed()
        {
            self.refused.note(origin, request.header("host"));
        }
        let response = match resource {
            // A preflight carries no token: answered before auth.
            Some(known) if cors.allowed() && is_preflight(request) => {
                cors::preflight(known.methods())
            }
            _ => route(self, resource, request).unwrap_or_else(|e| e.to_response()),
        };
        // A call that waits for the body answers nothing; a deferred
        // response is counted when it completes (`reply`).
        if !request.awaits_body() && !request.is_deferred() {
            let elapsed = request.started().elapsed();
            self.metrics.record(
                label(resource),
                metrics::method_label(request.method()),
                response.status(),
                elapsed,
            );
        }
        // A deferred response gets them where it is completed.
        cors.apply(response)
    }

    fn flush(&self) {
        self.plants.flush();
    }
}

/// The resources the server knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Resource {
    Plants,
    /// One plant; `None` when the path id is not an int64 (400 after auth).
    Plant(Option<i64>),
    /// The change feed.
    Changes,
    Export,
    OpenApi,
    Health,
    Metrics,
    /// The built-in page or one of its files.
    Ui(ui::Part),
}

impl Resource {
    /// Index into `metrics::ROUTES`.
    fn label(self) -> usize {
        match self {
            Resource::Plants => 0,
            Resource::Plant(_) => 1,
            Resource::OpenApi => 2,
            Resource::Health => 3,
            Resource::Metrics => 4,
            Resource::Export => 5,
            Resource::Changes => 6,
            Resource::Ui(part) => 7 + part.index(),
        }
    }

    /// The methods it answers (`Allow`, `Access-Control-Allow-Methods`).
    fn methods(self) -> &'static str {
        match self {
            Resource::Plants => "GET, HEAD, POST",
            Resource::Plant(_) => "GET, HEAD, PUT, DELETE",
            Resource::Changes
            | Resource::Export
            | Resource::OpenApi
            | Resource::Health
            | Resource::Metrics
            | Resource::Ui(_) => "GET, HEAD",
        }
    }
}

/// A CORS preflight: `OPTIONS` asking whether a method may be used.
fn is_preflight(request: &Request<'_>) -> bool {
    request.method() == "OPTIONS" && request.header("access-control-request-method").is_some()
}

/// The `metrics::ROUTES` index of a resource (the last: no route).
fn label(resource: Option<Resource>) -> usize {
    resource.map_or(metrics::ROUTES.len() - 1, Resource::label)
}

/// Maps a path to a resource; `None` is 404.
fn resource(path: &str) -> Option<Resource> {
    match path {
        "/plants" => Some(Resource::Plants),
        "/plants/changes" => Some(Resource::Changes),
        "/export" => Some(Resource::Export),
        "/openapi.json" => Some(Resource::OpenApi),
        "/healthz" => Some(Resource::Health),
        "/metrics" => Some(Resource::Metrics),
        _ => {
            if let Some(part) = ui::Part::at(path) {
                return Some(Resource::Ui(part));
            }
            let id = path.strip_prefix("/plants/")?;
            (!id.is_empty() && !id.contains('/')).then(|| Resource::Plant(query::integer(id)))
        }
    }
}

/// The one routing table: first match wins, 405 lists what is allowed.
fn route(
    app: &App,
    resource: Option<Resource>,
    request: &mut Request<'_>,
) -> Result<Response, ApiError> {
    let resource = resource.ok_or(ApiError::NoRoute)?;
    match (resource, request.method()) {
        (Resource::Plants, "GET" | "HEAD") => plants::list(app, request),
        (Resource::Plants, "POST") => plants::create(app, request),
        (Resource::Plant(id), "GET" | "HEAD") => plants::get(app, request, id),
        (Resource::Plant(id), "PUT") => plants::replace(app, request, id),
        (Resource::Plant(id), "DELETE") => plants::delete(app, request, id),
        (Resource::Changes, "GET" | "HEAD") => changes::changes(app, request),
        (Resource::Export, "GET" | "HEAD") => export::export(app, request),
        (Resource::OpenApi, "GET" | "HEAD") => Ok(service::openapi(app)),
        (Resource::Health, "GET" | "HEAD") => Ok(service::health(app)),
        (Resource::Metrics, "GET" | "HEAD") => service::metrics(app, request),
        (Resource::Ui(part), "GET" | "HEAD") => match &app.ui {
            Some(ui) => Ok(ui.serve(part, request)),
            None => Err(ApiError::NoRoute),
        },
        (resource, _) => Err(ApiError::MethodNotAllowed(resource.methods())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_path_maps_to_its_resource() {
        let table = [
            ("/plants", Some(Resource::Plants)),
            ("/plants/7", Some(Resource::Plant(Some(7)))),
            (
                "/plants/-9223372036854775808",
                Some(Resource::Plant(Some(i64::MIN))),
            ),
            ("/plants/9223372036854775808", Some(Resource::Plant(None))),
            ("/plants/2.0000000000000001", Some(Resource::Plant(None))),
            ("/plants/x", Some(Resource::Plant(None))),
            ("/plants/+7", Some(Resource::Plant(None))),
            ("/plants/-79022.0", Some(Resource::Plant(Some(-79022)))),
            ("/plants/7.5", Some(Resource::Plant(None))),
            ("/plants/7/leaves", None),
            ("/plants/changes", Some(Resource::Changes)),
            ("/plants/changes/", None),
            ("/openapi.json", Some(Resource::OpenApi)),
            ("/healthz", Some(Resource::Health)),
            ("/metrics", Some(Resource::Metrics)),
            ("/export", Some(Resource::Export)),
            ("/plants/", None),
            ("/Plants", None),
            ("/", Some(Resource::Ui(ui::Part::Page))),
            ("/ui.css", Some(Resource::Ui(ui::Part::Style))),
            ("/ui.js", Some(Resource::Ui(ui::Part::Script))),
            ("/ui.svg", Some(Resource::Ui(ui::Part::Icon))),
            ("/ui.html", None),
            ("//", None),
            ("", None),
        ];
        for (path, want) in table {
            assert_eq!(resource(path), want, "{path}");
        }
    }
}
