//! Handlers for the plant resource.
//!
//! Each handler is a plain function from request to response; the auth
//! check is its first line. A change is applied at once; its answer waits
//! for the journal, when there is one, without holding the event loop:
//! see `acknowledge`.

use std::sync::Arc;

#[cfg(feature = "postgres")]
use super::database;
use super::query::{self, ListQuery};
use super::{ApiError, App, Backend, Resource, label};
use crate::http::{Request, Response};
use crate::plant::{NewPlant, Plant, PlantRecord};
use crate::store::{Ack, Store, StoreError};

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
    match &app.backend {
        Backend::Memory(store) => {
            let ack = store.create_nowait(new)?;
            acknowledge(app, store, request, ack, Resource::Plants, response, event)
        }
        #[cfg(feature = "postgres")]
        Backend::Database(db) => {
            let webhooks = Arc::clone(&app.webhooks);
            database::run(app, db, request, Resource::Plants, move |connection| {
                if !connection.create(new.id, &new.plant)? {
                    return Err(StoreError::Exists(new.id).into());
                }
                if let Some(body) = event {
                    webhooks.publish(body);
                }
                Ok(response)
            })
        }
    }
}

/// Answers `response` once the store may acknowledge the change `ack`
/// (and announces a new plant, `event`, then): at once when nothing is
/// pending, else from the committer thread once the journal record is
/// written, through a deferred response, so the event loop never waits
/// for the disk. The answer is counted in the metrics when it is sent (its
/// duration from the request's head to then), and
/// carries the request's CORS headers (`App::handle` adds them only to an
/// answer it sends itself).
fn acknowledge(
    app: &App,
    store: &Store,
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
        return finish(store.wait(ack));
    };
    let metrics = Arc::clone(&app.metrics);
    let cors = app.cors_headers(request);
    let started = request.started();
    store.when_acked(ack, move |result| {
        let response = finish(result).unwrap_or_else(|e| e.to_response());
        metrics.record(label(Some(resource)), response.status(), started.elapsed());
        later.complete(cors.apply(response));
    });
    Ok(Response::deferred())
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
    match &app.backend {
        Backend::Memory(store) => {
            // Plants past PAGE_BYTES of names and tags could not be sent:
            // their JSON is longer still.
            let page =
                store.page_within(query.after, query.limit, query.tag.as_deref(), PAGE_BYTES);
            Ok(page_response(&query, &page.items, page.more))
        }
        #[cfg(feature = "postgres")]
        Backend::Database(db) => database::run(app, db, request, Resource::Plants, move |c| {
            // One more than the page, to know whether more follow.
            let mut items = c.page(query.after, query.limit + 1, query.tag.as_deref())?;
            let more = items.len() > query.limit;
            items.truncate(query.limit);
            Ok(page_response(&query, &items, more))
        }),
    }
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
    let found = move |plant: Option<Plant>| {
        let plant = plant.ok_or(StoreError::NotFound(id))?;
        Ok(Response::json(200, &PlantRecord::new(id, &plant)))
    };
    match &app.backend {
        Backend::Memory(store) => found(store.get(id)),
        #[cfg(feature = "postgres")]
        Backend::Database(db) => {
            let resource = Resource::Plant(Some(id));
            database::run(app, db, request, resource, move |c| found(c.get(id)?))
        }
    }
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
    let resource = Resource::Plant(Some(id));
    match &app.backend {
        Backend::Memory(store) => {
            let ack = store.replace_nowait(id, plant)?;
            acknowledge(app, store, request, ack, resource, response, None)
        }
        #[cfg(feature = "postgres")]
        Backend::Database(db) => database::run(app, db, request, resource, move |c| {
            match c.replace(id, &plant)? {
                true => Ok(response),
                false => Err(StoreError::NotFound(id).into()),
            }
        }),
    }
}

/// `DELETE /plants/{id}`: 204 with an empty body.
pub(super) fn delete(
    app: &App,
    request: &mut Request<'_>,
    id: Option<i64>,
) -> Result<Response, ApiError> {
    app.authorize(request)?;
    let id = path_id(id)?;
    let resource = Resource::Plant(Some(id));
    match &app.backend {
        Backend::Memory(store) => {
            let ack = store.delete_nowait(id)?;
            acknowledge(
                app,
                store,
                request,
                ack,
                resource,
                Response::no_content(),
                None,
            )
        }
        #[cfg(feature = "postgres")]
        Backend::Database(db) => {
            database::run(app, db, request, resource, move |c| match c.delete(id)? {
                true => Ok(Response::no_content()),
                false => Err(StoreError::NotFound(id).into()),
            })
        }
    }
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
