//! The Plant Store API, on each store.

pub(crate) mod access;
mod auth;
pub(crate) mod changes;
mod cors;
mod delay;
mod export;
mod metrics;
mod numbers;
mod pages;
mod plants;
mod query;
pub(crate) mod reset;
mod resource;
mod routes;
mod throttle;
pub(crate) mod tickets;
mod ui;
mod webhook;
