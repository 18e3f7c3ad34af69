//! A page of a listing [`Query`]: where it starts (a cut name in the
//! cursor made whole from the plant's name as it is now,
//! [`Position::resume`]), its values, and the count of what matches. The
//! statements, and why they are shaped so, are `shapes`.
//!
//! A page asks for one plant more than its limit, to learn whether more
//! follow, and for no more than its budget of bytes holds (`shapes`),
//! then ends before the plant that would take it past its budget. The count, when asked for, is a second statement with the same
//! filters, in one read-only repeatable-read transaction with the page:
//! both see one snapshot, so a write (or a reset, which may change every
//! plant) between them cannot make the count another state's. A page
//! without a count is one statement and needs no transaction.

use postgres::types::Type;

use super::shapes::{Resume, Shape, sql};
use super::sql::{Typed, plant};
use super::{Connection, DbError};
use crate::model::{Budget, NameBound, Page, Plant, Position, Query};

/// Where a page starts, resolved.
enum Start {
    Beginning,
    Id(i64),
    Name(NameBound),
}

/// The `LIKE` pattern of text containing `search`, every character of it
/// taken literally.
fn pattern(search: &str) -> String {
    let mut pattern = String::with_capacity(search.len() + 2);
    pattern.push('%');
    for c in search.chars() {
        if matches!(c, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}

impl Connection {
    /// One page of a listing `query`, no larger than `budget`, with its
    /// count if asked for.
    pub fn query(&mut self, query: &Query, budget: Budget) -> Result<Page, DbError> {
        if !query.count {
            return self.page_and_count(query, budget);
        }
        self.client()
            .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")?;
        let page = self.page_and_count(query, budget);
        self.client()
            .batch_execute(if page.is_ok() { "COMMIT" } else { "ROLLBACK" })?;
        page
    }

    /// `query`'s page and count, in whatever snapshot the caller gives.
    fn page_and_count(&mut self, query: &Query, budget: Budget) -> Result<Page, DbError> {
        let start = self.start(query)?;
        let tag = query.tag.as_deref().map(str::as_bytes);
        let search = query.search.as_deref().map(pattern);
        let limit = i64::try_from(query.limit.saturating_add(1)).unwrap_or(i64::MAX);
        let from = match &start {
            Start::Beginning => Resume::Start,
            Start::Name(bound) if bound.inclusive => Resume::At,
            _ => Resume::Past,
        };
        let mut values: Vec<Typed> = Vec::with_capacity(5);
        match &start {
            Start::Beginning => {}
            Start::Id(id) => values.push((id, Type::INT8)),
            Start::Name(bound) => {
                values.push((&bound.name, Type::BYTEA));
                values.push((&bound.id, Type::INT8));
            }
        }
        let filters = push_filters(&mut values, &tag, &search);
        values.push((&limit, Type::INT8));
        // The first row is always sent, whatever the budget.
        let bytes = i64::try_from(budget.bytes.max(1)).unwrap_or(i64::MAX);
        values.push((&bytes, Type::INT8));
        let (has_tag, has_search) = shape_filters(&tag, &search);
        let shape = Shape::Page {
            order: query.order,
            from,
            tag: has_tag,
            search: has_search,
        };
        let rows = self.run(shape, &values)?;
        let mut items = rows
            .iter()
            .map(|row| Ok((row.try_get::<_, i64>(0)?, plant(row, 1)?)))
            .collect::<Result<Vec<_>, DbError>>()?;
        let held = within(&items, budget);
        let more = items.len() > held.min(query.limit);
        items.truncate(held.min(query.limit));
        let total = match query.count {
            true => Some(self.count(shape_filters(&tag, &search), &values[filters])?),
            false => None,
        };
        Ok(Page { items, more, total })
    }

    /// How many plants match the filters (`values`: their values).
    fn count(&mut self, (tag, search): (bool, bool), values: &[Typed]) -> Result<u64, DbError> {
        let rows = self.run(Shape::Count { tag, search }, values)?;
        let counted: i64 = match rows.first() {
            Some(row) => row.try_get(0)?,
            None => 0,
        };
        Ok(u64::try_from(counted).unwrap_or(0))
    }

    /// Where `query` starts: a cut name is made whole from the plant's
    /// name as it is now.
    fn start(&mut self, query: &Query) -> Result<Start, DbError> {
        let descending = query.order.descending();
        Ok(match (&query.after, query.order.by_name()) {
            (None, _) => Start::Beginning,
            (Some(Position::Id(id)), false) => Start::Id(*id),
            (Some(position @ Position::Name { id, cut, .. }), true) => {
                let current = match cut {
                    Some(_) => self.name_of(*id)?,
                    None => None,
                };
                match position.resume(current.as_deref(), descending) {
                    Some(bound) => Start::Name(bound),
                    None => Start::Beginning,
                }
            }
            // A cursor of another order: the API refuses those before they
            // reach a store; its id is the nearest meaning there is.
            (Some(Position::Name { id, .. }), false) => Start::Id(*id),
            (Some(Position::Id(_)), true) => Start::Beginning,
        })
    }

    /// The name plant `id` has now, if it exists.
    fn name_of(&mut self, id: i64) -> Result<Option<String>, DbError> {
        let rows = self.run(Shape::Name, &[(&id, Type::INT8)])?;
        match rows.first() {
            None => Ok(None),
            Some(row) => {
                let name: &[u8] = row.try_get(0)?;
                Ok(Some(String::from_utf8_lossy(name).into_owned()))
            }
        }
    }

    /// Runs the statement of `shape`.
    fn run(&mut self, shape: Shape, values: &[Typed]) -> Result<Vec<postgres::Row>, DbError> {
        let rows = self.client().query_typed(&sql(shape), values);
        self.counted(rows)
    }
}

/// How many leading `items` a page of `budget` holds (at least one): each
/// costs its record, or its name's and tag's bytes if more (shown or
/// not: they were fetched), as the memory store counts.
fn within(items: &[(i64, Plant)], budget: Budget) -> usize {
    let mut array = Budget::EMPTY;
    for (taken, (id, plant)) in items.iter().enumerate() {
        let tag = plant.tag.as_deref();
        let fetched = plant.name.len() + tag.map_or(0, str::len);
        let cost = budget.record_len(*id, &plant.name, tag).max(fetched);
        match budget.add(array, taken, cost) {
            Some(grown) => array = grown,
            None => return taken,
        }
    }
    items.len()
}

/// Which filters a query has: a tag, a search.
fn shape_filters(tag: &Option<&[u8]>, search: &Option<String>) -> (bool, bool) {
    (tag.is_some(), search.is_some())
}

/// Pushes the tag and search values (as [`sql`] numbers them); the range
/// of `values` they take.
fn push_filters<'a>(
    values: &mut Vec<Typed<'a>>,
    tag: &'a Option<&'a [u8]>,
    search: &'a Option<String>,
) -> std::ops::Range<usize> {
    let first = values.len();
    if let Some(tag) = tag {
        values.push((tag, Type::BYTEA));
    }
    if let Some(search) = search {
        values.push((search, Type::TEXT));
    }
    first..values.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_ends_before_the_row_that_would_pass_its_budget() {
        let row = |id, name: &str| {
            (
                id,
                Plant {
                    name: name.into(),
                    tag: None,
                },
            )
        };
        let rows = [row(1, "abc"), row(2, "def"), row(3, &"x".repeat(100))];
        // {"id":1,"name":"abc"} is 21 bytes: two in brackets take 45.
        assert_eq!(within(&rows, Budget::of(45)), 2);
        assert_eq!(within(&rows, Budget::of(44)), 1);
        assert_eq!(within(&rows, Budget::of(0)), 1, "the first however large");
        // A name not shown costs its bytes all the same.
        let ids = Budget {
            name: false,
            ..Budget::of(2 + 8 + 1 + 8 + 1 + 100)
        };
        assert_eq!(within(&rows, ids), 3);
        assert_eq!(
            within(
                &rows,
                Budget {
                    bytes: ids.bytes - 1,
                    ..ids
                }
            ),
            2
        );
    }

    #[test]
    fn a_pattern_takes_every_character_literally() {
        assert_eq!(pattern("fern"), "%fern%");
        assert_eq!(pattern(r"50%_a\b"), r"%50\%\_a\\b%");
    }
}
