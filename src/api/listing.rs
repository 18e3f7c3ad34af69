//! `GET /plants`: a page of a listing, in the order asked (`sort`), with
//! its filters (`tag`, `q`), the fields asked (`fields`), the total when
//! asked (`count`), and `Link: <...>; rel="next"` while more follow. What
//! each parameter means is `query.rs`'s; the cursor is `cursor.rs`'s; the
//! store reads the page through the door.
//!
//! A page is at most `limit` plants and at most [`PAGE_BYTES`] of JSON:
//! the page ends before the record that would cross it. The store is
//! given that budget (`model::Budget`, with the fields shown) and takes
//! plants only while they fit, so a page costs what it sends, whatever
//! its `limit` and however long the names; the API measures again what it
//! was given, so no store's page can pass it. A large page is streamed a
//! piece at a time ([`PIECE_BYTES`]).

use super::Call;
use super::query::{Fields, ListQuery};
use super::reply::reply;
use super::{ApiError, App};
use crate::http::{Fill, Request, Response, Stream};
use crate::model::{Budget, Plant, PlantRecord};

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

/// `GET /plants`: one page of PlantRecords.
pub(super) fn list(app: &App, request: &mut Request<'_>, call: Call) -> Result<Response, ApiError> {
    let query = ListQuery::parse(&call.query)?;
    let base = base_url(request);
    // The store takes no more plants than a page of PAGE_BYTES holds.
    // Searches are shared fairly between client addresses.
    let asker = app.throttle.key(request);
    let outcome = app
        .plants
        .page(asker, query.store.clone(), query.fields.budget(PAGE_BYTES));
    reply(app, request, call.row, outcome, move |page| {
        let response = page_response(&query, base.as_deref(), page.items, page.more);
        Ok(match page.total {
            Some(total) => response.with_header("X-Total-Count", total.to_string()),
            None => response,
        })
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

/// The page of `items` (in the query's order, at most its `limit`),
/// with `Link` to the next one (under `base`, or relative) when `more`
/// follow them or not all fit in PAGE_BYTES. Where the page ends is
/// settled from the length each record will have, before any is encoded:
/// the head, with its `Link`, goes first.
fn page_response(
    query: &ListQuery,
    base: Option<&str>,
    mut items: Vec<(i64, Plant)>,
    more: bool,
) -> Response {
    let (included, bytes) = fitting(&items, query.fields.budget(PAGE_BYTES));
    let more = included < items.len() || more;
    items.truncate(included);
    let link = match items.last() {
        Some((last, plant)) if more => Some(format!(
            "<{}/plants?{}>; rel=\"next\"",
            base.unwrap_or_default(),
            query.next(*last, &plant.name)
        )),
        _ => None,
    };
    let mut records = Records {
        items: items.into_iter(),
        fields: query.fields,
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

/// How many leading `items` fit in the budget's bytes of JSON array (at
/// least one), and the length of that array.
fn fitting(items: &[(i64, Plant)], budget: Budget) -> (usize, usize) {
    let mut bytes = Budget::EMPTY;
    for (included, (id, plant)) in items.iter().enumerate() {
        let record = budget.record_len(*id, &plant.name, plant.tag.as_deref());
        match budget.add(bytes, included, record) {
            Some(grown) => bytes = grown,
            None => return (included, bytes),
        }
    }
    (items.len(), bytes)
}

/// Writes a record with these fields (`PlantRecord`'s order and form).
fn write_record(out: &mut Vec<u8>, id: i64, plant: &Plant, fields: Fields) {
    // Our own plain strings into a Vec: serialising cannot fail.
    if fields == Fields::ALL {
        let _ = serde_json::to_writer(&mut *out, &PlantRecord::new(id, plant));
        return;
    }
    out.push(b'{');
    let mut comma = false;
    let mut field = |out: &mut Vec<u8>, name: &str| {
        if std::mem::replace(&mut comma, true) {
            out.push(b',');
        }
        out.extend_from_slice(format!("\"{name}\":").as_bytes());
    };
    if fields.id {
        field(out, "id");
        out.extend_from_slice(id.to_string().as_bytes());
    }
    if fields.name {
        field(out, "name");
        let _ = serde_json::to_writer(&mut *out, &plant.name);
    }
    if let (true, Some(tag)) = (fields.tag, &plant.tag) {
        field(out, "tag");
        let _ = serde_json::to_writer(&mut *out, tag);
    }
    out.push(b'}');
}

/// A page's body: the JSON array of its records, made a piece at a time.
struct Records {
    items: std::vec::IntoIter<(i64, Plant)>,
    fields: Fields,
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
            write_record(out, id, &plant, self.fields);
            if out.len() - start >= want && self.items.len() > 0 {
                return Fill::More;
            }
        }
        self.opened = true;
        out.push(b']');
        Fill::Done
    }
}

#[cfg(test)]
#[path = "listing_tests.rs"]
mod tests;
