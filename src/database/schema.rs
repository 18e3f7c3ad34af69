//! The schema: made at the first start, upgraded from an older version at
//! the start of a newer build, its version recorded in
//! `plantstore_schema`. Instances starting together take turns on an
//! advisory lock, so one creates or upgrades and the others find it done.
//!
//! Version 1: `plants (id, name, tag)`, names and tags as UTF-8 `bytea`
//! (see `sql`), an index on `(tag, id)`. Version 2: the change log
//! (`plantstore_feed`, `plant_changes`). Version 3: search and the name
//! order. `name_folded` and `tag_folded` hold the name and tag folded by
//! [`fold`] (Unicode lower-casing, written by this server on every write:
//! PostgreSQL's `lower()` folds only ASCII on a cluster made without a
//! locale), which a search compares with `LIKE`; the upgrade fills them in
//! pieces of at most [`BACKFILL_ROWS`] rows and [`BACKFILL_BYTES`] bytes.
//! The name order reads `plants_name_id`, an index of `(name, id)` over
//! the names of at most [`NAME_KEY`] bytes: a btree entry holds at most
//! 2,704 bytes, and a longer name would make its create fail. Longer
//! names (only where `--max-name` allows them) are ordered through
//! `plants_long_name_id`, of their first `NAME_KEY` bytes and id. Where
//! the `pg_trgm` extension can be created, trigram indexes on the folded
//! columns serve searches; where not, a search scans, and each start
//! tries again (a server given `pg_trgm` since builds the indexes then).
//! Version 4: `plantstore_key`, the key of the change feed's tickets that
//! every instance shares (`key`). Version 5: the reset (`reset`):
//! `plantstore_feed.generation`, the count of resets, and a kind of change
//! of its own in the log, which an older build cannot read. Version 6:
//! the change log numbered without a lock over the cluster (`number`):
//! the tickets' sequence `plant_changes_ticket`, the writers' rows waiting
//! for numbers in `plant_changes_pending`, and `plantstore_feed.ticket`,
//! the last ticket numbered; the log and its numbers stay as they were.

use std::fmt;

use log::warn;
use postgres::types::Type;
use postgres::{Client, Transaction};

use super::DbError;
use super::key::SCHEMA_4;
use super::number::SCHEMA_6;
use super::reset::SCHEMA_5;
use super::shapes::NAME_KEY;
use super::sql::Typed;
use crate::dbconfig::STATEMENT_TIMEOUT;
use crate::model::fold;

/// The schema version this build creates and understands: 2 adds the
/// change log, 3 the folded columns for search and the name order's
/// indexes (an instance of an older build would write plants without
/// them, so it refuses to start on it), 4 the shared key of the feed's
/// tickets, 5 the reset (an older build's change feed would stop at the
/// first reset in the log, so it refuses to start on it too), 6 the
/// numbering without a cluster-wide lock (an older build would number
/// changes beside the numberer: it refuses to start as well).
pub const SCHEMA_VERSION: i32 = 6;

/// Rows the upgrade to version 3 folds a statement, at most...
const BACKFILL_ROWS: i64 = 1000;
/// ... and bytes of names and tags (the row that passes it is the last).
const BACKFILL_BYTES: i64 = 1 << 20;

/// The schema of version 1, created in one transaction when the database
/// has none.
const SCHEMA: &str = "
CREATE TABLE plantstore_schema (version integer NOT NULL);
CREATE TABLE plants (id bigint PRIMARY KEY, name bytea NOT NULL, tag bytea);
CREATE INDEX plants_tag_id ON plants (tag, id);
";

/// What version 2 adds to version 1: the change log.
const SCHEMA_2: &str = "
CREATE TABLE plantstore_feed (
    one boolean PRIMARY KEY DEFAULT true CHECK (one), epoch bigint NOT NULL, last bigint NOT NULL
) WITH (fillfactor = 10);
INSERT INTO plantstore_feed (epoch, last)
VALUES ((extract(epoch FROM clock_timestamp()) * 1000)::bigint, 0);
CREATE TABLE plant_changes (
    seq bigint PRIMARY KEY, ids bigint[] NOT NULL, kinds smallint[] NOT NULL,
    names bytea[] NOT NULL, tags bytea[] NOT NULL
);
";

/// The plants from id $1 up, in id order, at most $2 of them, while the
/// names and tags before each take less than $3 bytes.
const BACKFILL_READ: &str = "SELECT id, name, tag FROM (
    SELECT id, name, tag, sum(bytes) OVER (ORDER BY id) - bytes AS before FROM (
        SELECT id, name, tag, octet_length(name) + coalesce(octet_length(tag), 0) AS bytes
        FROM plants WHERE id >= $1 ORDER BY id LIMIT $2
    ) AS piece
) AS counted WHERE before < $3 ORDER BY id";

/// Writes the folded name and tag of each id.
const BACKFILL_WRITE: &str = "UPDATE plants SET name_folded = f.name, tag_folded = f.tag
FROM unnest($1::bigint[], $2::text[], $3::text[]) AS f (id, name, tag) WHERE plants.id = f.id";

/// The trigram indexes on the folded columns, and the extension they need.
const TRIGRAM: &str = "
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE INDEX IF NOT EXISTS plants_name_trgm ON plants USING gin (name_folded gin_trgm_ops);
CREATE INDEX IF NOT EXISTS plants_tag_trgm ON plants USING gin (tag_folded gin_trgm_ops);
";

/// Why the schema cannot be used: start-up stops.
#[derive(Debug)]
pub enum SchemaError {
    /// The database holds a schema newer than this build knows.
    Newer(i32),
    /// The database's encoding cannot hold every name (its name): the
    /// folded search columns are `text`, in the database's encoding.
    Encoding(String),
    /// The database could not be asked.
    Db(DbError),
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SchemaError::Newer(found) => write!(
                f,
                "the database holds plantstore schema version {found}, newer than this \
                 build's {SCHEMA_VERSION}: run a newer plantstore"
            ),
            SchemaError::Encoding(found) => write!(
                f,
                "the database's encoding is {found}, which cannot hold every plant name: \
                 use a database created with ENCODING 'UTF8'"
            ),
            SchemaError::Db(e) => write!(f, "cannot set up the schema: {e}"),
        }
    }
}

impl From<postgres::Error> for SchemaError {
    fn from(e: postgres::Error) -> SchemaError {
        SchemaError::Db(e.into())
    }
}

/// What start-up is told of a usable schema.
#[derive(Debug)]
pub struct Schema {
    /// Why searches scan the table (no trigram index): the database's
    /// words; `None` when the index is there.
    pub search_scans: Option<String>,
}

/// Creates the schema if the database has none, upgrades an older one,
/// and checks its version.
pub fn ensure_schema(client: &mut Client) -> Result<Schema, SchemaError> {
    // The folded columns are text: a LATIN1 database would refuse names
    // outside it (and the upgrade would stop part way).
    let encoding: String = client.query_typed_one("SHOW server_encoding", &[])?.get(0);
    if !matches!(encoding.as_str(), "UTF8" | "SQL_ASCII") {
        return Err(SchemaError::Encoding(encoding));
    }
    check_statement_timeout(client)?;
    let mut tx = client.transaction()?;
    // An upgrade of a large table takes longer than the statement timeout,
    // and instances starting meanwhile wait for it here.
    tx.batch_execute("SET LOCAL statement_timeout = 0")?;
    // Any constant will do; this one spells "plantsto".
    tx.batch_execute("SELECT pg_advisory_xact_lock(8097880036592395375)")?;
    let exists: bool = tx
        .query_typed_one("SELECT to_regclass('plantstore_schema') IS NOT NULL", &[])?
        .get(0);
    if !exists {
        tx.batch_execute(SCHEMA)?;
        tx.batch_execute("INSERT INTO plantstore_schema (version) VALUES (1)")?;
    }
    let mut found: Option<i32> = tx
        .query_typed_one("SELECT max(version) FROM plantstore_schema", &[])?
        .get(0);
    if found == Some(1) {
        // Version 1 (a new database, or one an older build made): add the
        // change log, before any instance of this build changes a plant.
        tx.batch_execute(SCHEMA_2)?;
        tx.batch_execute("INSERT INTO plantstore_schema (version) VALUES (2)")?;
        found = Some(2);
    }
    if found == Some(2) {
        upgrade_to_3(&mut tx)?;
        tx.batch_execute("INSERT INTO plantstore_schema (version) VALUES (3)")?;
        found = Some(3);
    }
    if found == Some(3) {
        tx.batch_execute(SCHEMA_4)?;
        tx.batch_execute("INSERT INTO plantstore_schema (version) VALUES (4)")?;
        found = Some(4);
    }
    if found == Some(4) {
        tx.batch_execute(SCHEMA_5)?;
        tx.batch_execute("INSERT INTO plantstore_schema (version) VALUES (5)")?;
        found = Some(5);
    }
    if found == Some(5) {
        tx.batch_execute(SCHEMA_6)?;
        tx.batch_execute("INSERT INTO plantstore_schema (version) VALUES (6)")?;
        found = Some(6);
    }
    let search_scans = match found {
        Some(SCHEMA_VERSION) => trigram(&mut tx)?,
        _ => None,
    };
    tx.commit()?;
    match found {
        Some(v) if v > SCHEMA_VERSION => Err(SchemaError::Newer(v)),
        Some(_) => Ok(Schema { search_scans }),
        None => Err(SchemaError::Db(DbError(
            "plantstore_schema has no version row".into(),
        ))),
    }
}

/// Version 3: the folded columns, filled for the plants there are, and
/// the name order's indexes (made after the fill, which would otherwise
/// update them row by row).
fn upgrade_to_3(tx: &mut Transaction) -> Result<(), postgres::Error> {
    tx.batch_execute("ALTER TABLE plants ADD COLUMN name_folded text, ADD COLUMN tag_folded text")?;
    backfill(tx)?;
    tx.batch_execute(&format!(
        "ALTER TABLE plants ALTER COLUMN name_folded SET NOT NULL;
         CREATE INDEX plants_name_id ON plants (name, id) WHERE octet_length(name) <= {NAME_KEY};
         CREATE INDEX plants_long_name_id ON plants ((substring(name FROM 1 FOR {NAME_KEY})), id)
             WHERE octet_length(name) > {NAME_KEY};
         ANALYZE plants;"
    ))
}

/// Fills the folded columns of every plant, a piece at a time in id order.
fn backfill(tx: &mut Transaction) -> Result<(), postgres::Error> {
    let mut from = i64::MIN;
    loop {
        let values: [Typed; 3] = [
            (&from, Type::INT8),
            (&BACKFILL_ROWS, Type::INT8),
            (&BACKFILL_BYTES, Type::INT8),
        ];
        let rows = tx.query_typed(BACKFILL_READ, &values)?;
        let mut ids = Vec::with_capacity(rows.len());
        let mut names = Vec::with_capacity(rows.len());
        let mut tags = Vec::with_capacity(rows.len());
        for row in &rows {
            ids.push(row.try_get::<_, i64>(0)?);
            names.push(fold(&String::from_utf8_lossy(row.try_get(1)?)));
            let tag: Option<&[u8]> = row.try_get(2)?;
            tags.push(tag.map(|t| fold(&String::from_utf8_lossy(t))));
        }
        let values: [Typed; 3] = [
            (&ids, Type::INT8_ARRAY),
            (&names, Type::TEXT_ARRAY),
            (&tags, Type::TEXT_ARRAY),
        ];
        tx.execute_typed(BACKFILL_WRITE, &values)?;
        // A piece ends at the rows or the bytes, so only an empty one (or
        // the largest id) is the end of the table.
        match ids.last().and_then(|last| last.checked_add(1)) {
            Some(next) => from = next,
            None => return Ok(()),
        }
    }
}

/// Makes the trigram indexes if they are missing and can be made; why
/// not if they cannot. A failed statement ends the transaction it is in,
/// so the attempt has a savepoint of its own.
fn trigram(tx: &mut Transaction) -> Result<Option<String>, postgres::Error> {
    let there: bool = tx
        .query_typed_one(
            "SELECT to_regclass('plants_name_trgm') IS NOT NULL \
             AND to_regclass('plants_tag_trgm') IS NOT NULL",
            &[],
        )?
        .get(0);
    if there {
        return Ok(None);
    }
    let mut attempt = tx.savepoint("trigram")?;
    match attempt.batch_execute(TRIGRAM) {
        Ok(()) => {
            attempt.commit()?;
            Ok(None)
        }
        Err(e) => {
            attempt.rollback()?;
            Ok(Some(DbError::from(e).0))
        }
    }
}

/// Warns when statements run with no timeout here: it is set with the
/// connection's startup options, which a pooler may drop (pgbouncer
/// ignores them with `ignore_startup_parameters = options`; see
/// docs/postgres.md). The watchdog still answers every request in time,
/// but the database would go on running a stuck statement.
fn check_statement_timeout(client: &mut Client) -> Result<(), postgres::Error> {
    let row = client.query_typed_one(
        "SELECT current_setting('statement_timeout'), quote_ident(current_user)",
        &[],
    )?;
    let (timeout, user): (String, String) = (row.try_get(0)?, row.try_get(1)?);
    if timeout == "0" {
        warn!(
            "database: statements run without a timeout (statement_timeout is 0): behind a \
             pooler that drops the connection's options? set it for the role: \
             ALTER ROLE {user} SET statement_timeout = '{}s'",
            STATEMENT_TIMEOUT.as_secs()
        );
    }
    Ok(())
}

/// The change log's epoch and last number (for a feed to start from).
pub fn feed_start(client: &mut Client) -> Result<(u64, u64), DbError> {
    let row = client.query_typed_one("SELECT epoch, last FROM plantstore_feed", &[])?;
    let number = |at: usize| -> Result<u64, DbError> {
        let n: i64 = row.try_get(at)?;
        u64::try_from(n).map_err(|_| DbError(format!("plantstore_feed holds {n}")))
    };
    Ok((number(0)?, number(1)?))
}
