//! One connection to the database and the statements that change plants
//! or read them by id (the listing's are `listing`, the schema `schema`).
//!
//! The table is `plants (id bigint PRIMARY KEY, name bytea, tag bytea,
//! name_folded text, tag_folded text)` with an index on `(tag, id)`; every
//! write sets the folded name and tag that a search compares ([`folded`]).
//! Names and tags are UTF-8 kept as `bytea`:
//! a JSON string may hold U+0000, which PostgreSQL's `text` refuses, and
//! the API must take every name the in-memory store takes. (In `psql`,
//! `convert_from(name, 'UTF8')` shows them as text.)
//!
//! Every statement is sent unnamed with its parameters' types
//! (`query_typed`: parse, bind and run in one round trip), never prepared
//! under a name nor set up by a session `SET`, so that a pooler in
//! transaction mode (pgbouncer), which may hand each transaction to
//! another server connection, changes nothing (see docs/postgres.md). An
//! unnamed statement is planned for its parameters at each run, which the
//! statements need: a plan kept from when the table was small scans it
//! whole. Measured on a new database at 64 connections, batches through
//! [`APPLY`] stored 6,100 to 7,400 plants/s with kept (generic) plans,
//! made while the table was nearly empty (`EXPLAIN` shows the replaces as
//! a hash join over a scan of the whole table), and 36,600 with plans made
//! for each run (then prepared statements with `plan_cache_mode =
//! force_custom_plan`, which a pooler would lose). A
//! batch of changes is one statement ([`APPLY`], or for one change alone a
//! statement of its own per kind), so one transaction: it has committed, all of
//! it, when the statement returns, and the answers that follow are never
//! ahead of the database. Each kind of change is set-based over arrays
//! (`unnest`, `= ANY`), each id at most once per batch, and the statement
//! returns the ids it changed: a create that meets an existing id does
//! nothing (`ON CONFLICT DO NOTHING`) and is not returned, which is the
//! 409; a replace or delete of an absent id is the 404. The primary key
//! decides between instances racing for one id. Within each kind of change
//! rows are taken in id order (the plan runs the creates, then the
//! replaces, then the deletes); two instances' batches can still lock rows
//! in opposite orders, and PostgreSQL's deadlock detection (after
//! `deadlock_timeout`, 1 s by default) cancels one, which is run again
//! (nothing of it committed).
//!
//! The change log, for the change feed of every instance: the same
//! statement that applies a batch takes a ticket once its changes are
//! applied (`nextval('plant_changes_ticket')`, so after every row lock
//! the batch holds) and writes them under it as one row of
//! `plant_changes_pending (ticket, ids, kinds, names, tags)`, in the order
//! applied (creates, replaces, deletes; each id once). A batch that
//! changed nothing takes no ticket. Writers share no row but those of the
//! plants they change, so batches of different ids commit
//! side by side. The numberer (`number`, schema version 6) later moves the
//! committed rows to `plant_changes (seq, ids, kinds, names, tags)`,
//! numbered in ticket order, which the followers (`follow`) read from
//! their last number (`changelog`). `plantstore_feed (epoch, last)` holds
//! the last number given; `epoch` is when the log was made (milliseconds
//! since 1970): ids of the feed are `<epoch>-<seq>` on every instance.
//! Each statement comes in two variants, with the log and without it (a
//! benchmark's switch, [`change_log_on`]), made of the same pieces.

use std::fmt;
use std::sync::OnceLock;

use postgres::error::SqlState;
use postgres::types::{ToSql, Type};
use postgres::{Client, Row};

use crate::model::{Edit, Plant, fold};

/// A batch of changes in one statement: creates ($1-$5: ids, names,
/// tags, folded names, folded tags), replaces ($6-$10) and deletes ($11),
/// each array in id order, up to the CTE `changed` (what was applied).
macro_rules! apply_changes {
    () => {
        "WITH created AS (
    INSERT INTO plants (id, name, tag, name_folded, tag_folded)
    SELECT id, name, tag, name_folded, tag_folded
    FROM unnest($1::bigint[], $2::bytea[], $3::bytea[], $4::text[], $5::text[])
        AS c (id, name, tag, name_folded, tag_folded)
    ORDER BY id
    ON CONFLICT (id) DO NOTHING
    RETURNING id, name, tag
), replaced AS (
    UPDATE plants SET name = r.name, tag = r.tag, name_folded = r.name_folded,
        tag_folded = r.tag_folded
    FROM unnest($6::bigint[], $7::bytea[], $8::bytea[], $9::text[], $10::text[])
        AS r (id, name, tag, name_folded, tag_folded)
    WHERE plants.id = r.id
    RETURNING plants.id, r.name, r.tag
), deleted AS (
    DELETE FROM plants WHERE id = ANY($11::bigint[])
    RETURNING id
), changed AS (
    SELECT id, 1::smallint AS kind, name, tag FROM created
    UNION ALL SELECT id, 2::smallint, name, tag FROM replaced
    UNION ALL SELECT id, 3::smallint, NULL::bytea, NULL::bytea FROM deleted
)"
    };
}

/// What every writing statement returns: the ids it changed.
macro_rules! changed_ids {
    () => {
        "
SELECT id FROM changed"
    };
}

/// [`apply_changes`], its changes logged as one pending row under its
/// ticket (see the module header); it returns the ids it changed. One
/// aggregate over `changed` makes the row: its arrays are filled from the
/// same rows in the same order, and the ticket is taken in its output,
/// once every change is applied (every row lock the batch takes is held)
/// and only when `HAVING` found any: a third of what a ticket in a CTE of
/// its own, joined to `changed` and sorted by id, cost the statement
/// (docs/postgres.md, Throughput).
const APPLY: &str = concat!(
    apply_changes!(),
    ", logged AS (
    INSERT INTO plant_changes_pending (ticket, ids, kinds, names, tags)
    SELECT nextval('plant_changes_ticket'), array_agg(id), array_agg(kind),
        array_agg(name), array_agg(tag)
    FROM changed HAVING count(*) > 0
)",
    changed_ids!()
);

/// The end of a statement for one change, after the CTE `changed` (the
/// id if it was applied): logs it as [`APPLY`] does, with this kind (1
/// create, 2 replace, 3 delete) and this name and tag: a ticket only for
/// the row `changed` holds, if any.
macro_rules! log_one {
    ($kind:literal, $name:literal, $tag:literal) => {
        concat!(
            ", logged AS (
    INSERT INTO plant_changes_pending (ticket, ids, kinds, names, tags)
    SELECT nextval('plant_changes_ticket'), ARRAY[$1::bigint], ARRAY[",
            $kind,
            "::smallint], ARRAY[",
            $name,
            "::bytea], ARRAY[",
            $tag,
            "::bytea] FROM changed
)",
            changed_ids!()
        )
    };
}

/// A batch of one change: a statement of its own for each kind ($1: the
/// id, $2 and $3: name and tag, $4 and $5: both folded), planned in a
/// fraction of [`APPLY`]'s time, which a lone client waits for; each up to
/// its CTE `changed`.
macro_rules! create_one {
    () => {
        "WITH changed AS (
    INSERT INTO plants (id, name, tag, name_folded, tag_folded) VALUES ($1, $2, $3, $4, $5)
    ON CONFLICT (id) DO NOTHING RETURNING id
)"
    };
}
macro_rules! replace_one {
    () => {
        "WITH changed AS (
    UPDATE plants SET name = $2, tag = $3, name_folded = $4, tag_folded = $5 WHERE id = $1
    RETURNING id
)"
    };
}
macro_rules! delete_one {
    () => {
        "WITH changed AS (
    DELETE FROM plants WHERE id = $1 RETURNING id
)"
    };
}

/// The statements that change plants, with the change log or (the
/// benchmark's switch, [`change_log_on`]) without it.
pub(super) struct Writes {
    pub(super) apply: &'static str,
    pub(super) create_one: &'static str,
    pub(super) replace_one: &'static str,
    pub(super) delete_one: &'static str,
}

const LOGGED: Writes = Writes {
    apply: APPLY,
    create_one: concat!(create_one!(), log_one!("1", "$2", "$3")),
    replace_one: concat!(replace_one!(), log_one!("2", "$2", "$3")),
    delete_one: concat!(delete_one!(), log_one!("3", "NULL", "NULL")),
};

const UNLOGGED: Writes = Writes {
    apply: concat!(apply_changes!(), changed_ids!()),
    create_one: concat!(create_one!(), changed_ids!()),
    replace_one: concat!(replace_one!(), changed_ids!()),
    delete_one: concat!(delete_one!(), changed_ids!()),
};

/// Whether this process keeps the change log: `PLANTSTORE_BENCH_NO_CHANGE_LOG=1`
/// in its environment turns it off. A benchmark's switch, not a flag: the
/// benchmark compares writes with the feed and without it. Off, the
/// statements that change plants log nothing ([`writes`]), a reset
/// logs nothing, and no follower runs (no numbering, a silent feed);
/// nothing else changes. Read once.
pub(super) fn change_log_on() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| {
        std::env::var_os("PLANTSTORE_BENCH_NO_CHANGE_LOG").is_none_or(|value| value != "1")
    })
}

/// The statements that change plants, as this process writes them.
pub(super) fn writes() -> &'static Writes {
    if change_log_on() { &LOGGED } else { &UNLOGGED }
}

/// How often a batch cancelled by deadlock detection is run again.
const DEADLOCK_TRIES: usize = 3;

/// Any failure talking to the database: the connection, a timeout, the
/// server refusing. The request gets 503; the message is logged.
#[derive(Debug)]
pub struct DbError(pub String);

impl fmt::Display for DbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<postgres::Error> for DbError {
    fn from(e: postgres::Error) -> DbError {
        // The database's own message where there is one ("terminating
        // connection due to administrator command"), else the client's
        // with its causes: its own words are only the kind ("error
        // connecting to server"), the cause says why ("Connection
        // refused").
        if let Some(db) = e.as_db_error() {
            return DbError(format!("{}: {}", db.severity(), db.message()));
        }
        let mut text = e.to_string();
        let mut cause = std::error::Error::source(&e);
        while let Some(inner) = cause {
            text.push_str(": ");
            text.push_str(&inner.to_string());
            cause = inner.source();
        }
        DbError(text)
    }
}

/// A connection to the database: its statements are sent unnamed, so it
/// holds no state on the server between transactions (see the module
/// header).
pub struct Connection {
    client: Client,
    /// Statements that failed on this connection.
    errors: u64,
}

/// Read by `changelog.rs`: the log's batches that hold changes after a number ($2), in order, at
/// most $3 of them. A batch holds at most `waiting::BATCH_CHANGES`, so it starts
/// after that number less that ($1): the index bounds the scan.
pub(super) const CHANGES_AFTER: &str = "SELECT seq, ids, kinds, names, tags FROM plant_changes
WHERE seq > $1 AND seq + cardinality(ids) - 1 > $2 ORDER BY seq LIMIT $3";

/// A statement's parameter with its type, as an unnamed statement takes it.
pub(super) type Typed<'a> = (&'a (dyn ToSql + Sync), Type);

/// The plant by id ($1).
const GET: &str = "SELECT name, tag FROM plants WHERE id = $1";
/// Plants from id $1 up, at most $2 of them...
const PAGE: &str = "SELECT id, name, tag FROM plants WHERE id >= $1 ORDER BY id LIMIT $2";
/// ... with tag $3.
const PAGE_TAGGED: &str =
    "SELECT id, name, tag FROM plants WHERE tag = $3 AND id >= $1 ORDER BY id LIMIT $2";

impl Connection {
    /// Connects.
    pub fn open(
        config: &postgres::Config,
        tls: super::tls_connector::Rustls,
    ) -> Result<Connection, DbError> {
        Ok(Connection {
            client: config.connect(tls)?,
            errors: 0,
        })
    }

    /// Requests whose statements failed on this connection so far.
    pub fn errors(&self) -> u64 {
        self.errors
    }

    /// `result` as the API sees it, counting a failure.
    pub(super) fn counted<T>(&mut self, result: Result<T, postgres::Error>) -> Result<T, DbError> {
        self.counted_for(1, result)
    }

    /// `result` of a statement made for `requests`, counting a failure
    /// for each.
    fn counted_for<T>(
        &mut self,
        requests: usize,
        result: Result<T, postgres::Error>,
    ) -> Result<T, DbError> {
        result.map_err(|e| {
            self.errors += requests as u64;
            e.into()
        })
    }

    /// The client, for start-up work (the schema, the seed).
    pub fn client(&mut self) -> &mut Client {
        &mut self.client
    }

    /// Whether the connection is gone (a new one is needed).
    pub fn is_closed(&self) -> bool {
        self.client.is_closed()
    }

    /// Applies a batch of changes, each id at most once, in one
    /// statement, and logs those applied: for each change, in order,
    /// whether it was applied (`false`: the create's id was taken, the
    /// replaced or deleted plant absent).
    pub fn apply(&mut self, changes: &[(i64, Edit)]) -> Result<Vec<bool>, DbError> {
        let mut tries = 0;
        let applied = loop {
            tries += 1;
            match self.try_apply(changes) {
                Err(e) if tries < DEADLOCK_TRIES && is_deadlock(&e) => continue,
                applied => break self.counted_for(changes.len(), applied)?,
            }
        };
        Ok(applied)
    }

    fn try_apply(&mut self, changes: &[(i64, Edit)]) -> Result<Vec<bool>, postgres::Error> {
        if let [(id, change)] = changes {
            let rows = match change {
                Edit::Create(plant) | Edit::Replace(plant) => {
                    let statement = match change {
                        Edit::Create(_) => writes().create_one,
                        _ => writes().replace_one,
                    };
                    let name = plant.name.as_bytes();
                    let tag = plant.tag.as_deref().map(str::as_bytes);
                    let (name_folded, tag_folded) = folded(plant);
                    let values: [Typed; 5] = [
                        (id, Type::INT8),
                        (&name, Type::BYTEA),
                        (&tag, Type::BYTEA),
                        (&name_folded, Type::TEXT),
                        (&tag_folded, Type::TEXT),
                    ];
                    self.client.query_typed(statement, &values)?
                }
                Edit::Delete => self
                    .client
                    .query_typed(writes().delete_one, &[(id, Type::INT8)])?,
            };
            return Ok(vec![rows.len() == 1]);
        }
        let mut order: Vec<&(i64, Edit)> = changes.iter().collect();
        order.sort_unstable_by_key(|(id, _)| *id);
        let (mut created, mut replaced) = (Columns::default(), Columns::default());
        let mut deleted = Vec::new();
        for (id, change) in order {
            match change {
                Edit::Create(plant) => created.push(*id, plant),
                Edit::Replace(plant) => replaced.push(*id, plant),
                Edit::Delete => deleted.push(*id),
            }
        }
        let [c1, c2, c3, c4, c5] = created.typed();
        let [r1, r2, r3, r4, r5] = replaced.typed();
        let deleted: Typed = (&deleted, Type::INT8_ARRAY);
        let values = [c1, c2, c3, c4, c5, r1, r2, r3, r4, r5, deleted];
        let rows = self.client.query_typed(writes().apply, &values)?;
        let mut done = std::collections::HashSet::with_capacity(rows.len());
        for row in &rows {
            done.insert(row.try_get::<_, i64>(0)?);
        }
        Ok(changes.iter().map(|(id, _)| done.contains(id)).collect())
    }

    /// The plant with this id.
    pub fn get(&mut self, id: i64) -> Result<Option<Plant>, DbError> {
        let row = self.client.query_typed_opt(GET, &[(&id, Type::INT8)]);
        self.counted(row)?.map(|row| plant(&row, 0)).transpose()
    }

    /// Up to `limit` plants with ids above `after` (all with `None`),
    /// ascending, with this `tag` if given (on the `(tag, id)` index).
    pub fn page(
        &mut self,
        after: Option<i64>,
        limit: usize,
        tag: Option<&str>,
    ) -> Result<Vec<(i64, Plant)>, DbError> {
        // `id > after` as `id >= after + 1`: one statement for both
        // cases, and nothing is above i64::MAX.
        let from = match after {
            None => i64::MIN,
            Some(after) => match after.checked_add(1) {
                Some(from) => from,
                None => return Ok(Vec::new()),
            },
        };
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let (from, limit): (Typed, Typed) = ((&from, Type::INT8), (&limit, Type::INT8));
        let rows = match tag.map(str::as_bytes) {
            None => self.client.query_typed(PAGE, &[from, limit]),
            Some(tag) => {
                let tag: Typed = (&tag, Type::BYTEA);
                self.client.query_typed(PAGE_TAGGED, &[from, limit, tag])
            }
        };
        let rows = self.counted(rows)?;
        rows.iter()
            .map(|row| Ok((row.try_get::<_, i64>(0)?, plant(row, 1)?)))
            .collect()
    }
}

/// The plant in `row` from column `at` (name, then tag). What this server
/// wrote is UTF-8; anything else written from outside is shown with
/// U+FFFD rather than refused. A column of another type (a table changed
/// by hand) is an error, never a panic.
pub(super) fn plant(row: &Row, at: usize) -> Result<Plant, DbError> {
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    Ok(Plant {
        name: text(row.try_get::<_, &[u8]>(at)?),
        tag: row.try_get::<_, Option<&[u8]>>(at + 1)?.map(text),
    })
}

/// Plants of one kind of change (or a reset's seed) as a statement's
/// arrays.
#[derive(Default)]
pub(super) struct Columns<'a> {
    ids: Vec<i64>,
    names: Vec<&'a [u8]>,
    tags: Vec<Option<&'a [u8]>>,
    names_folded: Vec<String>,
    tags_folded: Vec<Option<String>>,
}

impl<'a> Columns<'a> {
    /// The arrays in the order of the insert's parameters, with their
    /// types: id, name, tag, folded name, folded tag.
    pub(super) fn typed(&self) -> [Typed<'_>; 5] {
        [
            (&self.ids, Type::INT8_ARRAY),
            (&self.names, Type::BYTEA_ARRAY),
            (&self.tags, Type::BYTEA_ARRAY),
            (&self.names_folded, Type::TEXT_ARRAY),
            (&self.tags_folded, Type::TEXT_ARRAY),
        ]
    }

    pub(super) fn push(&mut self, id: i64, plant: &'a Plant) {
        self.ids.push(id);
        self.names.push(plant.name.as_bytes());
        self.tags.push(plant.tag.as_deref().map(str::as_bytes));
        let (name, tag) = folded(plant);
        self.names_folded.push(name);
        self.tags_folded.push(tag);
    }
}

/// The name and tag of `plant` as a search compares them (the columns
/// `name_folded` and `tag_folded`, see `schema`).
pub(super) fn folded(plant: &Plant) -> (String, Option<String>) {
    (fold(&plant.name), plant.tag.as_deref().map(fold))
}

/// Whether PostgreSQL cancelled the statement to end a deadlock (or a
/// serialization failure): nothing of it committed, and it may run again.
fn is_deadlock(e: &postgres::Error) -> bool {
    matches!(
        e.code(),
        Some(&SqlState::T_R_DEADLOCK_DETECTED | &SqlState::T_R_SERIALIZATION_FAILURE)
    )
}
