//! `GET /export`: every plant as NDJSON, one PlantRecord a line, ascending
//! by id: a valid `--seed` file.
//!
//! The body is streamed: the engine pulls the next piece (about 32 KiB of
//! lines, read through the door a piece at a time, see `plants::Export`) only
//! once the client has taken the last, so an export of any size holds one
//! piece per connection and never a copy of the store. What a concurrent
//! export shows is what a listing page promises, over the whole export:
//! ids strictly ascending, none twice, every plant that exists from start
//! to end; one changed, created or deleted meanwhile may appear as it was
//! or as it became.

use std::sync::Arc;

use super::Call;
use super::{ApiError, App};
use crate::http::{Fill, Request, Response, Stream};
use crate::model::{Plant, PlantRecord};
use crate::plants::{Export, Piece};

/// `GET /export` (bearer auth).
pub(super) fn export(app: &App, request: &mut Request<'_>, _: Call) -> Result<Response, ApiError> {
    // A store that reads pieces later wakes the stream when one is in.
    let wake = request
        .waker()
        .map(|waker| Arc::new(move || waker.wake()) as _);
    let export = app.plants.export(wake)?;
    Ok(Response::stream(
        200,
        "application/x-ndjson",
        Lines { export },
    ))
}

/// The export's body: NDJSON lines, a piece of plants at a time.
struct Lines {
    export: Export,
}

impl Stream for Lines {
    fn fill(&mut self, out: &mut Vec<u8>, want: usize) -> Fill {
        // A line is longer than the plant's name and tag: asking the store
        // for `want` bytes of them never makes a piece much smaller.
        match self.export.next(want) {
            Piece::Plants { plants, last } => {
                lines(out, plants);
                if last { Fill::Done } else { Fill::More }
            }
            Piece::Pending => Fill::Pending,
            // The door has logged why.
            Piece::Failed => Fill::Failed,
        }
    }
}

/// Appends a line for each plant.
fn lines(out: &mut Vec<u8>, plants: impl IntoIterator<Item = (i64, Plant)>) {
    for (id, plant) in plants {
        // Our own plain record into a Vec: serialising cannot fail.
        let _ = serde_json::to_writer(&mut *out, &PlantRecord::new(id, &plant));
        out.push(b'\n');
    }
}
