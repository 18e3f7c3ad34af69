//! Handlers for the plant resource: one plain function per operation,
//! called once its row's checks passed (`routes`: auth, query, content
//! type, the body read), then parse and validate, and the operation
//! through the door (`crate::plants`), whose outcome
//! `reply` turns into the response, now or later.

use std::sync::Arc;

use super::Call;
use super::reply::reply;
use super::{ApiError, App};
use crate::http::{Request, Response};
use crate::model::Refusal;
use crate::model::{NewPlant, Plant, PlantRecord};

/// `POST /plants`: stores a NewPlant and answers the Plant (no `id`, as the
/// seed declares); a new plant is announced to the webhooks once stored.
pub(super) fn create(
    app: &App,
    request: &mut Request<'_>,
    call: Call,
) -> Result<Response, ApiError> {
    let new = NewPlant::parse(request.body()?, app.text_limits)?;
    // The body is made before the plant moves into the store; the rest of
    // the response when it is sent, only on success. With `--sync always`
    // that is after the batch's sync, and what is made then is freed at
    // once (by the write), where what waits through the sync is more the
    // allocator's fast path cannot hold (`bench/run.sh durable`).
    let (json, id) = (new.plant.to_json(), new.id);
    let event = app
        .webhooks
        .enabled()
        .then(|| serde_json::to_vec(&PlantRecord::new(new.id, &new.plant)).ok())
        .flatten();
    let webhooks = Arc::clone(&app.webhooks);
    let outcome = app.plants.create(new);
    reply(app, request, call.row, outcome, move |()| {
        if let Some(body) = event {
            webhooks.publish(body);
        }
        let response = Response::bytes(200, "application/json", json);
        Ok(response.with_header("Location", location(id)))
    })
}

/// `/plants/{id}`, made in one allocation of its final size: `format!`
/// (its formatting machinery and a string grown twice) cost a create
/// about 900 of its 23,000 instructions in user space (callgrind).
fn location(id: i64) -> String {
    const PATH: &str = "/plants/";
    let mut digits = itoa::Buffer::new();
    let digits = digits.format(id);
    let mut location = String::with_capacity(PATH.len() + digits.len());
    location.push_str(PATH);
    location.push_str(digits);
    location
}

/// `POST /plants/reset` (`--allow-reset`): every plant replaced by the
/// seed's, answered once durable with how many there are. Not announced
/// to the webhooks: the seed's plants are not new.
pub(super) fn reset(
    app: &App,
    request: &mut Request<'_>,
    call: Call,
) -> Result<Response, ApiError> {
    let outcome = app.plants.reset();
    reply(app, request, call.row, outcome, |plants| {
        // Written by hand: a `json!` value would bring in float formatting.
        let body = format!("{{\"plants\":{plants}}}").into_bytes();
        Ok(Response::bytes(200, "application/json", body))
    })
}

/// `GET /plants/{id}`: the PlantRecord.
pub(super) fn get(app: &App, request: &mut Request<'_>, call: Call) -> Result<Response, ApiError> {
    let id = path_id(call.id)?;
    let outcome = app.plants.get(id);
    reply(app, request, call.row, outcome, move |plant| {
        let plant = plant.ok_or(Refusal::NotFound(id))?;
        Ok(Response::json(200, &PlantRecord::new(id, &plant)))
    })
}

/// `PUT /plants/{id}`: replaces name and tag of an existing plant; answers
/// the new PlantRecord.
pub(super) fn replace(
    app: &App,
    request: &mut Request<'_>,
    call: Call,
) -> Result<Response, ApiError> {
    let body = request.body()?;
    let id = path_id(call.id)?;
    let plant = Plant::parse(body, app.text_limits)?;
    let response = Response::json(200, &PlantRecord::new(id, &plant));
    let outcome = app.plants.replace(id, plant);
    reply(app, request, call.row, outcome, |()| Ok(response))
}

/// `DELETE /plants/{id}`: 204 with an empty body.
pub(super) fn delete(
    app: &App,
    request: &mut Request<'_>,
    call: Call,
) -> Result<Response, ApiError> {
    let id = path_id(call.id)?;
    let outcome = app.plants.delete(id);
    reply(app, request, call.row, outcome, |()| {
        Ok(Response::no_content())
    })
}

fn path_id(id: Option<i64>) -> Result<i64, ApiError> {
    id.ok_or(ApiError::BadParameter("plant id in the path (an int64)"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_location_is_the_plants_path() {
        for id in [0, 7, -12, i64::MAX, i64::MIN] {
            assert_eq!(super::location(id), format!("/plants/{id}"));
        }
    }
}
