//! Handlers for the plant resource: one plain function per operation,
//! called once its row's checks passed (`routes`: auth, query, content
//! type, the body read), then parse and validate, and the operation
//! through the door (`crate::plants`), whose outcome
//! `reply` turns into the response, now or later.

use std::sync::Arc;

use super::Call;
use super::query::ListQuery;
use super::reply::reply;
use super::{ApiError, App};
use crate::http::{Fill, Request, Response, Stream};
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
    // Built before the plant moves into the store; sent only on success.
    let response =
        Response::json(200, &new.plant).with_header("Location", format!("/plants/{}", new.id));
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
        Ok(response)
    })
}

/// Largest body of a listing page, in bytes: a page ends before the
/// record that would take its JSON past this, so fewer than `limit` plants
/// may come back (with `Link` to the rest). The first record always goes
/// in, however large, so paging always advances. 256 KiB holds a default
/// page (100 plants) of the longest names and tags the default limits
/// allow, even when every character is escaped as `\u00XX` (about 1.9 KiB
/// a plant).
pub const PAGE_BYTES: usize = 256 * 1024;

/// A page's JSON is made at most this many bytes at a time (past the
/// record that crosses it): a larger page is streamed, a piece each time
/// the client has taken the last, so one reader never holds its event loop
/// for longer than a piece takes to encode, and the others on that loop
/// are served between its pieces. A page that fits is one answer with a
/// `Content-Length`, as most pages are.
const PIECE_BYTES: usize = 32 * 1024;

/// `GET /plants`: one page of PlantRecords, ascending by id, with a
/// `Link: <...>; rel="next"` header while more exist. The page is at most
/// `limit` plants and at most `PAGE_BYTES` of JSON; the store copies out
/// no more plants than that could hold.
pub(super) fn list(app: &App, request: &mut Request<'_>, call: Call) -> Result<Response, ApiError> {
    let query = ListQuery::parse(&call.query)?;
    // Plants past PAGE_BYTES of names and tags could not be sent: their
    // JSON is longer still.
    let base = base_url(request);
    let outcome = app.plants.page(
        crate::model::Query {
            after: query.after.map(crate::model::Position::Id),
            tag: query.tag.clone(),
            limit: query.limit,
            ..Default::default()
        },
        PAGE_BYTES,
    );
    reply(app, request, call.row, outcome, move |page| {
        Ok(page_response(
            &query,
            base.as_deref(),
            page.items,
            page.more,
        ))
    })
}

/// `scheme://host[:port]` of the request, for an absolute `Link` (a page
/// from another origin resolves a relative one against its own): the
/// listener's scheme and the `Host` header, lowercased, a default port
/// dropped. `None` (a relative link) when `Host` is absent or not a host
/// name or IP address with an optional port.
fn base_url(request: &Request<'_>) -> Option<String> {
    let host = std::str::from_utf8(request.header("host")?).ok()?;
    super::cors::origin(&format!("{}://{host}", request.scheme())).ok()
}

/// The page of `items` (ascending ids, at most `query.limit`), with `Link`
/// to the next one (under `base`, or relative) when `more` follow them or
/// not all fit in PAGE_BYTES. Where the page ends is settled from the
/// length each record will have, before any is encoded: the head, with its
/// `Link`, goes first.
fn page_response(
    query: &ListQuery,
    base: Option<&str>,
    mut items: Vec<(i64, Plant)>,
    more: bool,
) -> Response {
    let (included, bytes) = fitting(&items, PAGE_BYTES);
    let more = included < items.len() || more;
    items.truncate(included);
    let link = match items.last() {
        Some((last, _)) if more => {
            let tag = query
                .tag
                .as_deref()
                .map(|t| format!("&tag={}", crate::percent::encode(t)));
            Some(format!(
                "<{}/plants?after={last}&limit={}{}>; rel=\"next\"",
                base.unwrap_or_default(),
                query.limit,
                tag.unwrap_or_default()
            ))
        }
        _ => None,
    };
    let mut records = Records {
        items: items.into_iter(),
        opened: false,
    };
    let response = if bytes <= PIECE_BYTES {
        let mut body = Vec::with_capacity(bytes);
        records.fill(&mut body, usize::MAX);
        Response::bytes(200, "application/json", body)
    } else {
        Response::stream(200, "application/json", records)
    };
    match link {
        Some(link) => response.with_header("Link", link),
        None => response,
    }
}

/// How many leading `items` fit in `cap` bytes of JSON array (at least
/// one), and the length of that array.
fn fitting(items: &[(i64, Plant)], cap: usize) -> (usize, usize) {
    // The brackets, then each record and the comma before it.
    let mut bytes = 2;
    for (included, (id, plant)) in items.iter().enumerate() {
        let record = PlantRecord::new(*id, plant).json_len() + usize::from(included > 0);
        if included > 0 && bytes + record > cap {
            return (included, bytes);
        }
        bytes += record;
    }
    (items.len(), bytes)
}

/// A page's body: the JSON array of its records, made a piece at a time.
struct Records {
    items: std::vec::IntoIter<(i64, Plant)>,
    /// The opening bracket is written.
    opened: bool,
}

impl Stream for Records {
    fn fill(&mut self, out: &mut Vec<u8>, want: usize) -> Fill {
        let start = out.len();
        if !self.opened {
            out.push(b'[');
        }
        while let Some((id, plant)) = self.items.next() {
            if self.opened {
                out.push(b',');
            }
            self.opened = true;
            // Our own plain record into a Vec: serialising cannot fail.
            let _ = serde_json::to_writer(&mut *out, &PlantRecord::new(id, &plant));
            if out.len() - start >= want && self.items.len() > 0 {
                return Fill::More;
            }
        }
        self.opened = true;
        out.push(b']');
        Fill::Done
    }
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

    /// The page `page_response` would send for `items` and a `cap`, made
    /// in pieces of `piece` bytes, and how many records it holds; the
    /// length settled beforehand must be the length made.
    fn json_page(items: &[(i64, Plant)], cap: usize) -> (Vec<u8>, usize) {
        let (included, bytes) = fitting(items, cap);
        let whole = |piece: usize| {
            let mut records = Records {
                items: Vec::from(&items[..included]).into_iter(),
                opened: false,
            };
            let mut body = Vec::new();
            let mut pieces = 1;
            while records.fill(&mut body, piece) == Fill::More {
                pieces += 1;
            }
            (body, pieces)
        };
        let (body, one) = whole(usize::MAX);
        assert_eq!((body.len(), one), (bytes, 1));
        let (pieced, pieces) = whole(100);
        assert_eq!(pieced, body);
        assert!(included < 2 || pieces > 1);
        (body, included)
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
        let limits = crate::model::TextLimits::default();
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
