//! The Plant Store API, on each store.

mod auth;
pub(crate) mod changes;
mod cors;
mod export;
mod metrics;
mod numbers;
mod plants;
mod query;
mod resource;
mod routes;
mod throttle;
mod ui;
mod webhook;
