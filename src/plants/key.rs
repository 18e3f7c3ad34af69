//! The key that signs the change feed's tickets, kept where the plants
//! are, so that every instance that serves the same plants accepts the
//! same tickets: in memory, made at start from the OS's random bytes (a
//! restart invalidates every ticket, and a client mints a new one); on
//! the database, shared through it (`crate::database::ticket_key`: made
//! once by the first instance, rotated by deleting its row).

use std::io;

use super::{Kept, Plants};
use crate::model::NotDone;

/// A key for the tickets' MACs.
pub type TicketKey = [u8; 32];

impl Plants {
    /// The key at start: a fresh one in memory, the shared one (read when
    /// the store opened) on the database.
    pub fn ticket_key(&self) -> io::Result<TicketKey> {
        match &self.kept {
            Kept::Memory { .. } => fresh(),
            Kept::Database(remote) => Ok(remote.key()),
        }
    }

    /// On a reload: the shared key read again (a new one stored if its
    /// row was deleted: a rotation); `None` in memory, where the key lives
    /// as long as the process.
    pub fn reread_ticket_key(&self) -> Option<Result<TicketKey, String>> {
        match &self.kept {
            Kept::Memory { .. } => None,
            Kept::Database(remote) => Some(fresh().map_err(|e| e.to_string()).and_then(|fresh| {
                match remote.ticket_key(fresh).wait() {
                    Ok(key) => Ok(key),
                    Err(NotDone::Refused(e)) => Err(e.to_string()),
                    Err(NotDone::Unavailable(e)) => Err(e.to_string()),
                }
            })),
        }
    }
}

/// A key from the OS's random bytes.
pub(super) fn fresh() -> io::Result<TicketKey> {
    let mut key = [0u8; 32];
    crate::os::random_fill(&mut key)?;
    Ok(key)
}
