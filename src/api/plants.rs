//! Handlers for the plant resource.
//!
//! Each handler is a plain function from request to response; the auth
//! check is its first line.

use super::{ApiError, App};
use crate::http::{Request, Response};
use crate::store::NewPlant;

/// `POST /plants`: stores a NewPlant and answers the Plant (no `id`, as the
/// seed declares).
pub(super) fn create(app: &App, request: &mut Request<'_>) -> Result<Response, ApiError> {
    app.authorize(request)?;
    require_json(request)?;
    let new = NewPlant::parse(request.body()?)?;
    // Built before the plant moves into the store; sent only on success.
    let response = Response::json(200, &new.plant);
    app.store.create(new)?;
    Ok(response)
}

/// 415 unless a request that carries a body says it is JSON (parameters
/// such as `charset=utf-8` are fine).
fn require_json(request: &Request<'_>) -> Result<(), ApiError> {
    if !request.has_body() {
        return Ok(());
    }
    let essence = request
        .header("content-type")
        .map(|v| v.split(|&b| b == b';').next().unwrap_or(v).trim_ascii());
    match essence {
        Some(v) if v.eq_ignore_ascii_case(b"application/json") => Ok(()),
        _ => Err(ApiError::UnsupportedMediaType),
    }
}
