//! The key that signs the change feed's tickets, shared by every instance
//! of the database (schema version 4): the one row of `plantstore_key`.
//!
//! The first instance to ask stores the key it brings, and every other
//! one gets the stored key back from the same statement (`INSERT ... ON
//! CONFLICT DO UPDATE ... RETURNING`), so instances starting together
//! agree on the key of whichever insert won. Deleting
//! the row rotates it: the next instance to ask (at start, or on SIGHUP)
//! stores a new one, and the others read it on their next reload. Whoever
//! may write this table may mint tickets, as they may change plants.

use postgres::Client;
use postgres::types::Type;

use super::DbError;

/// Bytes of the key.
pub const KEY_BYTES: usize = 32;

/// The table, made by the upgrade to version 4.
pub(super) const SCHEMA_4: &str = "
CREATE TABLE plantstore_key (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    key bytea NOT NULL CHECK (octet_length(key) = 32)
);
";

/// The key every instance signs tickets with: the one stored, or `fresh`
/// if none is.
pub fn ticket_key(
    client: &mut Client,
    fresh: &[u8; KEY_BYTES],
) -> Result<[u8; KEY_BYTES], DbError> {
    let fresh: &[u8] = fresh;
    // One statement: an insert that loses a race waits for the winner's
    // commit and returns its key (the update writes the same key back),
    // and a rotation's DELETE between an insert and a read cannot leave
    // this with no row.
    let row = client.query_typed_one(
        "INSERT INTO plantstore_key (key) VALUES ($1) \
         ON CONFLICT (one) DO UPDATE SET key = plantstore_key.key RETURNING key",
        &[(&fresh, Type::BYTEA)],
    )?;
    let key: &[u8] = row.try_get(0)?;
    key.try_into()
        .map_err(|_| DbError(format!("plantstore_key holds {} bytes, not 32", key.len())))
}
