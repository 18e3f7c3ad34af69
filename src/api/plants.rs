//! Handlers for the plant resource.
//!
//! Each handler is a plain function from request to response; the auth
//! check is its first line. A change is applied at once; its answer waits
//! for the journal, when there is one, without holding the event loop:
//! see `acknowledge`.

use std::sync::Arc;

use super::query::{self, ListQuery};
use super::{ApiError, App, Resource, label};
use crate::http::{Request, Response};
use crate::store::{Ack, NewPlant, Plant, PlantRecord, StoreError};

/// `POST /plants`: stores a NewPlant and answers the Plant (no `id`, as the
/// seed declares).
pub(super) fn create(app: &App, request: &mut Request<'_>) -> Result<Response, ApiError> {
    app.authorize(request)?;
    require_json(request)?;
    let new = NewPlant::parse(request.body()?, app.text_limits)?;
    // Built before the plant moves into the store; sent only on success.
    let response = Response::json(200, &new.plant);
    let event = app
        .webhooks
        .enabled()
        .then(|| serde_json::to_vec(&PlantRecord::new(new.id, &new.plant)).ok())
        .flatten();
    let ack = app.store.create_nowait(new)?;
    acknowledge(app, request, ack, Resource::Plants, response, event)
}

/// Answers `response` once the store may acknowledge the change `ack`
/// (and announces a new plant, `event`, then): at once when nothing is
/// pending, else from the committer thread once the journal record is
/// written, through a deferred response, so the event loop never waits
/// for the disk. The answer is counted in the metrics when it is sent.
fn acknowledge(
    app: &App,
    request: &mut Request<'_>,
    ack: Ack,
    resource: Resource,
    response: Response,
    event: Option<Vec<u8>>,
) -> Result<Response, ApiError> {
    let webhooks = Arc::clone(&app.webhooks);
    let finish = move |result: Result<(), StoreError>| match result {
        Ok(()) => {
            if let Some(body) = event {
                webhooks.publish(body);
            }
            Ok(response)
        }
        Err(e) => Err(ApiError::from(e)),
    };
    let deferred = if ack.is_done() { None } else { request.defer() };
    let Some(later) = deferred else {
        return finish(app.store.wait(ack));
    };
    let metrics = Arc::clone(&app.metrics);
    app.store.when_acked(ack, move |result| {
        let response = finish(result).unwrap_or_else(|e| e.to_response());
        metrics.record(label(Some(resource)), response.status());
        later.complete(response);
    });
    Ok(Response::deferred())
}

/// `GET /plants`: one page of PlantRecords, ascending by id, with a
/// `Link: <...>; rel="next"` header while more exist.
pub(super) fn list(app: &App, request: &mut Request<'_>) -> Result<Response, ApiError> {
    app.authorize(request)?;
    let query = ListQuery::parse(request.query())?;
    let page = app
        .store
        .page(query.after, query.limit, query.tag.as_deref());
    let records: Vec<PlantRecord<'_>> = page
        .items
        .iter()
        .map(|(id, p)| PlantRecord::new(*id, p))
        .collect();
    let response = Response::json(200, &records);
    match page.items.last() {
        Some((last, _)) if page.more => {
            let tag = query
                .tag
                .as_deref()
                .map(|t| format!("&tag={}", query::encode(t)));
            let link = format!(
                "</plants?after={last}&limit={}{}>; rel=\"next\"",
                query.limit,
                tag.unwrap_or_default()
            );
            Ok(response.with_header("Link", link))
        }
        _ => Ok(response),
    }
}

/// `GET /plants/{id}`: the PlantRecord.
pub(super) fn get(
    app: &App,
    request: &mut Request<'_>,
    id: Option<i64>,
) -> Result<Response, ApiError> {
    app.authorize(request)?;
    let id = path_id(id)?;
    let plant = app
        .store
        .get(id)
        .ok_or(crate::store::StoreError::NotFound(id))?;
    Ok(Response::json(200, &PlantRecord::new(id, &plant)))
}

/// `PUT /plants/{id}`: replaces name and tag of an existing plant; answers
/// the new PlantRecord.
pub(super) fn replace(
    app: &App,
    request: &mut Request<'_>,
    id: Option<i64>,
) -> Result<Response, ApiError> {
    app.authorize(request)?;
    require_json(request)?;
    let body = request.body()?;
    let id = path_id(id)?;
    let plant = Plant::parse(body, app.text_limits)?;
    let response = Response::json(200, &PlantRecord::new(id, &plant));
    let ack = app.store.replace_nowait(id, plant)?;
    acknowledge(app, request, ack, Resource::Plant(Some(id)), response, None)
}

/// `DELETE /plants/{id}`: 204 with an empty body.
pub(super) fn delete(
    app: &App,
    request: &mut Request<'_>,
    id: Option<i64>,
) -> Result<Response, ApiError> {
    app.authorize(request)?;
    let id = path_id(id)?;
    let ack = app.store.delete_nowait(id)?;
    acknowledge(
        app,
        request,
        ack,
        Resource::Plant(Some(id)),
        Response::no_content(),
        None,
    )
}

fn path_id(id: Option<i64>) -> Result<i64, ApiError> {
    id.ok_or(ApiError::BadParameter("plant id in the path (an int64)"))
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
