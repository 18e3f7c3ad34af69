//! Handlers' way to the database: a request's statements run on a pool
//! worker, never on the event loop (see `crate::database`).
//!
//! `run` defers the answer and submits a job that runs the handler's
//! statements and completes it. The completed answer is counted in the
//! metrics and carries the request's CORS headers, as `plants::acknowledge`
//! does for the journal. A job the pool cannot run, or whose statements
//! fail, is answered 503 with `Retry-After`: never a 500, never a hang.

use std::sync::{Arc, Mutex};

use log::warn;

use super::export::{PIECE_PLANTS, lines};
use super::{ApiError, App, Resource, label};
use crate::database::{Connection, Database, Queue, Unavailable};
use crate::http::{Fill, Request, Response, Stream, Waker};
use crate::lock::lock;
use crate::plant::Plant;

/// Answers `request` with what `statements` make of a connection, later,
/// from a database worker.
pub(super) fn run(
    app: &App,
    database: &Database,
    request: &mut Request<'_>,
    resource: Resource,
    statements: impl FnOnce(&mut Connection) -> Result<Response, ApiError> + Send + 'static,
) -> Result<Response, ApiError> {
    // Every event loop can defer; only the replay harness cannot.
    let later = request
        .defer()
        .ok_or(ApiError::Unavailable(Unavailable::Busy))?;
    let metrics = Arc::clone(&app.metrics);
    let cors = app.cors_headers(request);
    let started = request.started();
    let answer = move |made: Result<Result<Response, ApiError>, Unavailable>| {
        let response = made
            .unwrap_or_else(|why| Err(ApiError::Unavailable(why)))
            .unwrap_or_else(|e| e.to_response());
        metrics.record(label(Some(resource)), response.status(), started.elapsed());
        later.complete(cors.apply(response));
    };
    database.submit(statements, answer);
    Ok(Response::deferred())
}

/// `GET /export` from the database: a keyset cursor. Each piece is one
/// statement, `id > last ORDER BY id LIMIT PIECE_PLANTS`, run on any
/// worker, asked for as the previous piece goes out; the stream waits
/// (`Fill::Pending`) until it is read. So a slow reader holds no
/// connection and no transaction, and the export keeps the promises of a
/// listing page over its whole length: ids ascending, none twice, every
/// plant that exists from start to end.
pub(super) fn export(database: &Database, request: &mut Request<'_>) -> Result<Response, ApiError> {
    database.check().map_err(ApiError::Unavailable)?;
    let waker = request
        .waker()
        .ok_or(ApiError::Unavailable(Unavailable::Busy))?;
    let cursor = Cursor {
        queue: database.queue(),
        waker,
        after: None,
        piece: Arc::new(Mutex::new(None)),
        asked: false,
    };
    Ok(Response::stream(200, "application/x-ndjson", cursor))
}

/// A piece read for the export, or why it could not be.
type Piece = Result<Vec<(i64, Plant)>, Unavailable>;

/// The export's body, read a piece at a time.
struct Cursor {
    queue: Queue,
    waker: Waker,
    /// The last id sent.
    after: Option<i64>,
    /// Where a worker leaves the next piece.
    piece: Arc<Mutex<Option<Piece>>>,
    /// Whether a piece is being read.
    asked: bool,
}

impl Cursor {
    /// Has a worker read the piece after `after`, then wake the stream.
    fn ask(&mut self) {
        self.asked = true;
        let (after, piece, waker) = (self.after, Arc::clone(&self.piece), self.waker.clone());
        let read = move |c: &mut Connection| c.page(after, PIECE_PLANTS, None);
        let answer = move |read: Result<Result<_, _>, Unavailable>| {
            let read = read.and_then(|plants| plants.map_err(Unavailable::from));
            *lock(&piece) = Some(read);
            waker.wake();
        };
        self.queue.submit(read, answer);
    }
}

impl Stream for Cursor {
    fn fill(&mut self, out: &mut Vec<u8>, _want: usize) -> Fill {
        let ready = lock(&self.piece).take();
        match ready {
            None => {
                if !self.asked {
                    self.ask();
                }
                Fill::Pending
            }
            Some(Err(why)) => {
                warn!("export from the database cut short: {why:?}");
                Fill::Failed
            }
            Some(Ok(plants)) => {
                self.asked = false;
                let last = plants.len() < PIECE_PLANTS;
                self.after = plants.last().map(|(id, _)| *id).or(self.after);
                lines(out, plants);
                if last {
                    return Fill::Done;
                }
                // The next piece is read while this one goes out.
                self.ask();
                Fill::More
            }
        }
    }
}
