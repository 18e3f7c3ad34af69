//! Handlers for the plant resource: one plain function per operation,
//! the auth check its first line, then content type, parse and validate,
//! and the operation through the door (`crate::plants`), whose outcome
//! `reply` turns into the response, now or later.

use std::sync::Arc;

use super::query::{self, ListQuery};
use super::reply::reply;
use super::{ApiError, App, Resource};
use crate::http::{Request, Response};
use crate::plant::{NewPlant, Plant, PlantRecord};
use crate::store::StoreError;

/// `POST /plants`: stores a NewPlant and answers the Plant (no `id`, as the
/// seed declares); a new plant is announced to the webhooks once stored.
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
    let webhooks = Arc::clone(&app.webhooks);
    let outcome = app.plants.create(new);
    reply(app, request, Resource::Plants, outcome, move |()| {
        if let Some(body) = event {
            webhooks.publish(body);
        }
        Ok(response)
    })
}

/// Largest body of a listing page, in bytes: a page ends before the
/// record that would take its JSON past this, so fewer than `limit` plants
/// may come back (with `Link` to the rest). The first record always goes
/// in, however large, so paging always advances. 256 KiB holds a default
/// page (100 plants) of the longest names and tags the default limits
/// allow, even when every character is escaped as `\u00XX` (about 1.9 KiB
/// a plant), and bounds what a client that does not read holds per
/// connection, beside the engine's 64 KiB of pipelined output.
pub const PAGE_BYTES: usize = 256 * 1024;

/// `GET /plants`: one page of PlantRecords, ascending by id, with a
/// `Link: <...>; rel="next"` header while more exist. The page is at most
/// `limit` plants and at most `PAGE_BYTES` of JSON, written record by
/// record; the store copies out no more plants than that could hold.
pub(super) fn list(app: &App, request: &mut Request<'_>) -> Result<Response, ApiError> {
    app.authorize(request)?;
    let query = ListQuery::parse(request.query())?;
    // Plants past PAGE_BYTES of names and tags could not be sent: their
    // JSON is longer still.
    let outcome = app
        .plants
        .page(query.after, query.limit, query.tag.clone(), PAGE_BYTES);
    reply(app, request, Resource::Plants, outcome, move |page| {
        Ok(page_response(&query, &page.items, page.more))
    })
}

/// The page of `items` (ascending ids, at most `query.limit`), with `Link`
/// to the next one when `more` follow them or not all fit in PAGE_BYTES.
fn page_response(query: &ListQuery, items: &[(i64, Plant)], more: bool) -> Response {
    let (body, included) = json_page(items, PAGE_BYTES);
    let response = Response::bytes(200, "application/json", body);
    let more = included < items.len() || more;
    match items[..included].last() {
        Some((last, _)) if more => {
            let tag = query
                .tag
                .as_deref()
                .map(|t| format!("&tag={}", query::encode(t)));
            let link = format!(
                "</plants?after={last}&limit={}{}>; rel=\"next\"",
                query.limit,
                tag.unwrap_or_default()
            );
            response.with_header("Link", link)
        }
        _ => response,
    }
}

/// The JSON array of as many leading `items` as fit in `cap` bytes (at
/// least one), and how many that is. Each record is written into the body
/// and taken back out if it does not fit.
fn json_page(items: &[(i64, Plant)], cap: usize) -> (Vec<u8>, usize) {
    let mut body = vec![b'['];
    let mut included = 0;
    for (id, plant) in items {
        let mark = body.len();
        if included > 0 {
            body.push(b',');
        }
        // Our own plain record into a Vec: serialising cannot fail; the
        // closing bracket must fit after it.
        let written = serde_json::to_writer(&mut body, &PlantRecord::new(*id, plant));
        if written.is_err() || (included > 0 && body.len() + 1 > cap) {
            body.truncate(mark);
            break;
        }
        included += 1;
    }
    body.push(b']');
    (body, included)
}

/// `GET /plants/{id}`: the PlantRecord.
pub(super) fn get(
    app: &App,
    request: &mut Request<'_>,
    id: Option<i64>,
) -> Result<Response, ApiError> {
    app.authorize(request)?;
    let id = path_id(id)?;
    let outcome = app.plants.get(id);
    reply(
        app,
        request,
        Resource::Plant(Some(id)),
        outcome,
        move |plant| {
            let plant = plant.ok_or(StoreError::NotFound(id))?;
            Ok(Response::json(200, &PlantRecord::new(id, &plant)))
        },
    )
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
    let outcome = app.plants.replace(id, plant);
    reply(app, request, Resource::Plant(Some(id)), outcome, |()| {
        Ok(response)
    })
}

/// `DELETE /plants/{id}`: 204 with an empty body.
pub(super) fn delete(
    app: &App,
    request: &mut Request<'_>,
    id: Option<i64>,
) -> Result<Response, ApiError> {
    app.authorize(request)?;
    let id = path_id(id)?;
    let outcome = app.plants.delete(id);
    reply(app, request, Resource::Plant(Some(id)), outcome, |()| {
        Ok(Response::no_content())
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    fn plants(count: i64) -> Vec<(i64, Plant)> {
        (0..count)
            .map(|id| {
                let name = format!("plant {id}");
                (id, Plant { name, tag: None })
            })
            .collect()
    }

    fn ids(body: &[u8]) -> Vec<i64> {
        let records: Vec<serde_json::Value> = serde_json::from_slice(body).expect("a JSON array");
        records.iter().map(|r| r["id"].as_i64().unwrap()).collect()
    }

    #[test]
    fn a_page_ends_before_the_record_that_would_pass_the_cap() {
        let items = plants(10);
        let (whole, all) = json_page(&items, usize::MAX);
        assert_eq!((ids(&whole), all), ((0..10).collect(), 10));
        assert_eq!(whole, serde_json::to_vec(&records(&items)).unwrap());
        assert_eq!(json_page(&items, whole.len()), (whole.clone(), 10));
        let (cut, nine) = json_page(&items, whole.len() - 1);
        assert_eq!((ids(&cut), nine), ((0..9).collect(), 9));
        assert!(cut.len() < whole.len());
    }

    #[test]
    fn a_page_holds_at_least_one_record_however_large() {
        let (body, one) = json_page(&plants(3), 1);
        assert_eq!((ids(&body), one), (vec![0], 1));
        assert_eq!(json_page(&[], 1), (b"[]".to_vec(), 0));
    }

    #[test]
    fn a_default_page_of_the_largest_plants_fits() {
        // Control characters are the longest in JSON: six bytes each.
        let limits = crate::plant::TextLimits::default();
        let plant = Plant {
            name: "\u{1}".repeat(limits.name),
            tag: Some("\u{1}".repeat(limits.tag)),
        };
        let items: Vec<(i64, Plant)> = (0..100).map(|i| (i64::MIN + i, plant.clone())).collect();
        let (body, all) = json_page(&items, PAGE_BYTES);
        assert_eq!(all, 100, "{} bytes", body.len());
        assert!(body.len() > 100 * 6 * (limits.name + limits.tag));
    }

    fn records(items: &[(i64, Plant)]) -> Vec<PlantRecord<'_>> {
        items
            .iter()
            .map(|(id, p)| PlantRecord::new(*id, p))
            .collect()
    }
}
