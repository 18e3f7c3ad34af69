//! `GET /export`: every plant as NDJSON, one PlantRecord a line, ascending
//! by id: a valid `--seed` file.
//!
//! The body is streamed: the engine pulls the next piece (about 32 KiB of
//! lines, copied from the store in short steps, see `store::AllPlants`) only
//! once the client has taken the last, so an export of any size holds one
//! piece per connection and never a copy of the store. What a concurrent
//! export shows is what a listing page promises, over the whole export:
//! ids strictly ascending, none twice, every plant that exists from start
//! to end; one changed, created or deleted meanwhile may appear as it was
//! or as it became.

use super::{ApiError, App, Backend};
use crate::http::{Fill, Request, Response, Stream};
use crate::plant::{Plant, PlantRecord};
use crate::store::AllPlants;

/// Plants copied from the store (or read from the database) for one
/// piece, at most.
pub(super) const PIECE_PLANTS: usize = 512;

/// `GET /export` (bearer auth).
pub(super) fn export(app: &App, request: &mut Request<'_>) -> Result<Response, ApiError> {
    app.authorize(request)?;
    match &app.backend {
        Backend::Memory(store) => {
            let lines = Lines {
                plants: store.all_plants(),
            };
            Ok(Response::stream(200, "application/x-ndjson", lines))
        }
        #[cfg(feature = "postgres")]
        Backend::Database(db) => super::database::export(db, request),
    }
}

/// The export's body: NDJSON lines from a read of every plant.
struct Lines {
    plants: AllPlants,
}

impl Stream for Lines {
    fn fill(&mut self, out: &mut Vec<u8>, want: usize) -> Fill {
        // A line is longer than the plant's name and tag: asking the store
        // for `want` bytes of them never makes a piece much smaller.
        lines(out, self.plants.next_piece(PIECE_PLANTS, want));
        if self.plants.is_done() {
            Fill::Done
        } else {
            Fill::More
        }
    }
}

/// Appends a line for each plant.
pub(super) fn lines(out: &mut Vec<u8>, plants: impl IntoIterator<Item = (i64, Plant)>) {
    for (id, plant) in plants {
        // Our own plain record into a Vec: serialising cannot fail.
        let _ = serde_json::to_writer(&mut *out, &PlantRecord::new(id, &plant));
        out.push(b'\n');
    }
}
