//! The Plant Store API: routing, authentication, handlers and errors.
//!
//! `App` is the engine's `Handler`. Every endpoint is a row of one table
//! (`routes::ROUTES`): a request finds its row by path, and `routes::route`
//! answers 404 or 405, runs the checks the row asks for in the order the
//! contract fixes (auth, query, content type, body), and calls the row's
//! handler, which parses, validates and applies. Nothing here touches a
//! socket (the engine does) or the map behind the store (the store does).
//!
//! Browsers: `App::handle` answers a CORS preflight before routing (so
//! before auth) and adds the CORS headers to every answer, those completed
//! later by the journal's committer included (`cors`); the built-in page
//! and its files are served from `ui` unless `--no-ui`.

mod auth;
mod changes;
mod cors;
mod cursor;
mod error;
mod export;
mod guard;
mod hold;
mod listing;
mod metrics;
mod plants;
mod query;
mod reply;
mod routes;
mod service;
mod ticket;
mod ui;

pub use auth::{Grant, Granted, Scope, Tokens};
pub use cors::{Cors, CorsHeaders, RefusedOrigins};
pub use error::ApiError;
pub use guard::Guard;

use guard::Refused;
pub use listing::PAGE_BYTES;
pub use metrics::Metrics;
pub use query::longest_next_target;
pub use routes::{Method, Params, ROUTES, Route};

use std::sync::Arc;
use std::time::Duration;

use crate::changes::Hub;
use crate::http::{Gauge, Handler, Request, Response};
use crate::model::TextLimits;
use crate::plants::{Plants, TicketKey};
use crate::transport::Https;
use crate::webhook::Webhooks;

/// Who may do what: the tokens and their scopes, `--read-only`, and the
/// throttling of failed authentications.
pub struct Access {
    /// The accepted tokens.
    pub tokens: Tokens,
    /// `--read-only`.
    pub read_only: bool,
    /// `--auth-failures`, `--trusted-proxy`.
    pub guard: Guard,
    /// The key that signs the feed's tickets (`Plants::ticket_key`).
    pub ticket_key: TicketKey,
    /// `--ticket-ttl`: how long a ticket is valid.
    pub ticket_ttl: Duration,
    /// `--delay`: API answers are held between these (least, most).
    pub delay: Option<(Duration, Duration)>,
}

/// What a handler is given besides the request.
#[derive(Debug)]
struct Call {
    /// The request's row in `routes::ROUTES`, its metrics label.
    pub row: usize,
    /// The id in the path (`None` when not an int64: a 400, after the auth check).
    pub id: Option<i64>,
    /// The query's values, by the names the row takes.
    pub query: query::Values,
    /// What the request's token or ticket grants (`None` on a route
    /// without auth, and when a body arrived late: the gate passed).
    pub granted: Option<Granted>,
}

/// The application: the plants, the accepted tokens, the webhook sender,
/// the counters, and the name and tag limits (the OpenAPI document
/// declares them).
pub struct App {
    plants: Plants,
    tokens: Tokens,
    /// The feed's tickets: their key and lifetime.
    tickets: ticket::Tickets,
    /// `--read-only`: every change refused.
    read_only: bool,
    /// Failed authentications by client address.
    throttle: guard::Throttle,
    webhooks: Arc<Webhooks>,
    metrics: Arc<Metrics>,
    text_limits: TextLimits,
    cors: Cors,
    ui: Option<ui::Ui>,
    changes: Arc<Hub>,
    /// Origins refused so far (logged once each).
    refused: RefusedOrigins,
    /// `--delay`.
    hold: Option<hold::Hold>,
    /// With `--tls-auto`, the certificate served, whose local CA
    /// `/ca.pem` serves (`App::serving_ca`).
    local_ca: Option<Https>,
}

impl App {
    /// An application over these plants, accepting these tokens, announcing
    /// new plants through `webhooks`, reporting the connections `gauge`
    /// counts, refusing names and tags longer than `text_limits`, letting
    /// the `cors` origins read its answers, serving the page at `/` if `ui`.
    pub fn new(
        plants: Plants,
        access: Access,
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
        let tickets = ticket::Tickets::new(access.ticket_key, access.ticket_ttl);
        tickets.refresh(&access.tokens);
        App {
            plants,
            tokens: access.tokens,
            tickets,
            read_only: access.read_only,
            throttle: guard::Throttle::new(access.guard),
            webhooks: Arc::new(webhooks),
            metrics: Arc::new(Metrics::new(gauge, routes::labels())),
            text_limits,
            cors,
            ui: ui.then(ui::Ui::new),
            changes,
            refused: RefusedOrigins::default(),
            hold: access.delay.map(hold::Hold::new),
            local_ca: None,
        }
    }

    /// Serves the local CA of `https` (`--tls-auto`) at `GET /ca.pem`,
    /// over TLS, and its fingerprint on `/healthz`; the document describes
    /// `/ca.pem`. Without a local CA (no HTTPS, or certificate files, or
    /// ACME) nothing changes: `/ca.pem` is a 404.
    pub fn serving_ca(mut self, https: Option<&Https>) -> App {
        self.local_ca = https.filter(|https| https.ca_cert().is_some()).cloned();
        self
    }

    /// After the server stopped: finishes the database's queued requests
    /// (their webhooks included), gives queued webhook deliveries `grace`,
    /// then makes the journal durable (it matters with `--sync never`).
    pub fn shut_down(&self, grace: Duration) {
        self.plants.shut_down();
        self.webhooks.shutdown(grace);
    }

    /// Accepts exactly these tokens from the next request on; the feed
    /// streams opened with a token that left end now, and its tickets are
    /// refused.
    pub fn set_tokens(&self, tokens: Vec<Grant>) {
        self.tokens.replace(tokens);
        self.tickets.refresh(&self.tokens);
        self.changes.wake_all();
    }

    /// Reads the tickets' key again where instances share it (a deleted
    /// key is a rotation); `Some` with what happened, to log.
    pub fn reload_ticket_key(&self) -> Option<Result<bool, String>> {
        let key = self.plants.reread_ticket_key()?;
        Some(key.map(|key| {
            let changed = self.tickets.set_key(key);
            self.tickets.refresh(&self.tokens);
            changed
        }))
    }

    /// How many tokens are accepted now.
    pub fn token_count(&self) -> usize {
        self.tokens.count()
    }

    /// Signs webhook deliveries with `key` from the next attempt on.
    pub fn set_webhook_secret(&self, key: Vec<u8>) {
        self.webhooks.set_secret(key);
    }

    /// The gate of every route that needs a token, for `method`: the
    /// client's address is refused while it is throttled (before any
    /// token or ticket is compared), a failed comparison is counted
    /// against it, and the credentials must allow the method's scope (a
    /// change is refused to every token with `--read-only`). A method that
    /// takes a `ticket` parameter takes it instead of a token when no
    /// bearer token is sent (a browser may send other credentials of its
    /// own). A refused ticket is counted, but not as a guess against the
    /// client's address: a ticket is a 256-bit MAC, nothing to guess, and
    /// expired ones are the normal course of a page that stays open (a
    /// restart, a key rotation, a reconnect after the expiry). A right
    /// bearer token is recorded as proven from its client's address (see
    /// `guard.rs` for how seldom), which passes the server-wide limit
    /// later. Every refusal is counted by reason.
    fn authorize(&self, request: &mut Request<'_>, method: &Method) -> Result<Granted, ApiError> {
        let client = self.throttle.client(request);
        let header = request.header("authorization");
        let bearer = header.and_then(auth::bearer);
        self.throttle.admit(client, bearer, request.started())?;
        let ticket = match (bearer, method.params) {
            (None, Params::Only(names)) if names.contains(&"ticket") => {
                query::ticket(request.query())
            }
            _ => None,
        };
        let checked = match ticket {
            Some(ticket) => self
                .tickets
                .check(&ticket, &self.tokens)
                .ok_or(ApiError::Ticket),
            None => self.tokens.check(header),
        };
        let granted = checked.inspect_err(|e| {
            let reason = match e {
                // A header of another scheme carries no bearer token to
                // guess with: missing, not a failure that counts.
                ApiError::Unauthorized { presented: false } | ApiError::NotBearer => {
                    Refused::Missing
                }
                ApiError::Ticket => Refused::Ticket,
                _ => Refused::Invalid,
            };
            if reason == Refused::Invalid {
                self.throttle.failed(client);
            }
            self.throttle.refused(reason);
        })?;
        // A bearer token is never sent with a ticket (taken only without).
        if let Some(token) = bearer {
            let note = self
                .throttle
                .proven(client, token, request.note(), request.started());
            request.set_note(note);
        }
        if method.scope == Scope::Write && self.read_only {
            self.throttle.refused(Refused::ReadOnly);
            return Err(ApiError::Forbidden(
                "the server is read-only: no token may change plants",
            ));
        }
        if granted.scope < method.scope {
            self.throttle.refused(Refused::Scope);
            return Err(ApiError::Forbidden(
                "this token's scope is read: it cannot change plants",
            ));
        }
        Ok(granted)
    }

    /// The CORS headers every answer to `request` carries, whenever and on
    /// whichever thread it is sent.
    fn cors_headers(&self, request: &Request<'_>) -> CorsHeaders {
        self.cors.headers(request.header("origin"))
    }
}

impl Handler for App {
    fn handle(&self, request: &mut Request<'_>) -> Response {
        // With `--no-ui` the page's rows are not there, nor the reset's
        // without `--allow-reset`, nor the CA's without `--tls-auto` or
        // over plain HTTP.
        let found = routes::find(request.path()).filter(|f| {
            let route = &ROUTES[f.row];
            (self.ui.is_some() || route.part().is_none())
                && (route.path != routes::RESET || self.plants.resettable())
                && (route.path != routes::CA_PEM
                    || (self.local_ca.is_some() && request.scheme() == "https"))
        });
        // Looked up once: every request pays for each header it asks for.
        let origin = request.header("origin");
        let cors = self.cors.headers(origin);
        if let Some(origin) = origin
            && !cors.allowed()
        {
            self.refused.note(origin, request.header("host"));
        }
        let (response, held) = match found {
            // A preflight carries no token: answered before auth.
            Some(known) if cors.allowed() && is_preflight(request) => {
                (cors::preflight(ROUTES[known.row].allow()), false)
            }
            _ => (
                routes::route(self, found, request).unwrap_or_else(|e| e.to_response()),
                found.is_some_and(|f| ROUTES[f.row].held()),
            ),
        };
        // A call that waits for the body answers nothing; a deferred
        // response is counted when it completes (`reply`).
        if !request.awaits_body() && !request.is_deferred() {
            let elapsed = request.started().elapsed();
            self.metrics.record(
                found.map_or(routes::OTHER, |f| f.row),
                metrics::method_label(request.method()),
                response.status(),
                elapsed,
            );
        }
        // A deferred response gets them where it is completed.
        let response = cors.apply(response);
        match &self.hold {
            // On a deferred response's placeholder, the hold is the real one's.
            Some(hold) if held => response.held_for(hold.draw()),
            _ => response,
        }
    }

    fn flush(&self) {
        self.plants.flush();
    }
}

/// A CORS preflight: `OPTIONS` asking whether a method may be used.
fn is_preflight(request: &Request<'_>) -> bool {
    request.method() == "OPTIONS" && request.header("access-control-request-method").is_some()
}
