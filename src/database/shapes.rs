//! The SQL of the listing's statements (`listing` runs them), by shape:
//! a statement's text depends only on a query's order, on what kind of
//! bound it resumes from and on which filters it has, never on their
//! values, which are parameters: a few dozen texts at most, each sent
//! unnamed with its parameters' types (see `sql`).
//!
//! A page in name order reads two ranges and merges them: the names of at
//! most [`NAME_KEY`] bytes through `plants_name_id`, an index of `(name,
//! id)` (resumed past `(name, id)` with a row comparison the index
//! serves), and the longer ones through `plants_long_name_id`, of their
//! first `NAME_KEY` bytes and id, sorting each run of equal first bytes
//! by the whole name (an incremental sort). A btree entry holds at most
//! 2,704 bytes: a longer name in `(name, id)` would make its create fail.
//!
//! A page's rows stop at its budget of bytes, in the statement: a running
//! sum of the names' and tags' bytes (`octet_length`, read from the
//! value's header, not from the value) over the rows before each, and
//! only the rows whose sum up to the row before them is within the
//! budget are sent, the first row past it included (the page cannot hold
//! it, but it shows that more follow). No record is shorter than its
//! name and tag, so a page (cut exactly by `listing`, as the API measures
//! it) never needs a row that was not sent, and what a page fetches
//! follows what it holds, whatever its limit and however long the names:
//! the rows past the budget are read from the index and the table up to
//! the limit, but their names are neither read whole nor sent.
//!
//! A search is `LIKE` on the folded columns, either of them, with the
//! pattern a parameter (made by `listing`, every character of the search
//! escaped); planned for each run, so that the trigram indexes serve a
//! pattern they can (three characters or more).

use crate::model::Order;

/// Names of at most this many bytes are in the `(name, id)` index whole;
/// longer ones are ordered by their first this many bytes, then in full.
/// Every name the default `--max-name` (256 characters) allows fits.
pub(super) const NAME_KEY: usize = 1024;

/// Where a page resumes, as its SQL sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Resume {
    /// At the start of the order.
    Start,
    /// Past a bound.
    Past,
    /// At a bound (a cut name resolved to a prefix), or past it.
    At,
}

/// What a statement's SQL depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Shape {
    /// A page: its order, bound and filters.
    Page {
        order: Order,
        from: Resume,
        tag: bool,
        search: bool,
    },
    /// The count of the plants matching these filters.
    Count { tag: bool, search: bool },
    /// The name of one plant (to make a cut cursor name whole).
    Name,
}

/// A statement's parameters as its SQL numbers them: each written once in
/// the SQL's text, and repeated by number where the SQL uses it again.
struct Numbered(usize);

impl Numbered {
    fn next(&mut self, cast: &str) -> String {
        self.0 += 1;
        format!("${}::{cast}", self.0)
    }
}

/// The SQL of `shape`. Its parameters, in order: the bound (an id; or a
/// name and an id), the tag, the search pattern, the limit, the bytes.
pub(super) fn sql(shape: Shape) -> String {
    match shape {
        Shape::Name => "SELECT name FROM plants WHERE id = $1".into(),
        Shape::Count { tag, search } => {
            let mut at = Numbered(0);
            let filters = filters(&mut at, tag, search);
            format!("SELECT count(*) FROM plants{}", clause(&filters))
        }
        Shape::Page {
            order,
            from,
            tag,
            search,
        } if !order.by_name() => {
            let mut at = Numbered(0);
            let op = comparison(order, from);
            let mut conditions: Vec<String> = Vec::new();
            if from != Resume::Start {
                conditions.push(format!("id {op} {}", at.next("bigint")));
            }
            conditions.extend(filters(&mut at, tag, search));
            let dir = direction(order);
            let page = format!(
                "SELECT id, name, tag FROM plants{} ORDER BY id{dir} LIMIT {}",
                clause(&conditions),
                at.next("bigint")
            );
            within(&page, &format!("id{dir}"), &at.next("bigint"))
        }
        Shape::Page {
            order,
            from,
            tag,
            search,
        } => by_name(order, from, tag, search),
    }
}

/// A page in name order: the names in the `(name, id)` index and the
/// longer ones (see the module header), merged.
fn by_name(order: Order, from: Resume, tag: bool, search: bool) -> String {
    let mut at = Numbered(0);
    let op = comparison(order, from);
    let key = format!("substring(name FROM 1 FOR {NAME_KEY})");
    let (mut short, mut long) = (
        vec![format!("octet_length(name) <= {NAME_KEY}")],
        vec![format!("octet_length(name) > {NAME_KEY}")],
    );
    if from != Resume::Start {
        let (name, id) = (at.next("bytea"), at.next("bigint"));
        short.push(format!("(name, id) {op} ({name}, {id})"));
        long.push(format!(
            "({key}, name, id) {op} (substring({name} FROM 1 FOR {NAME_KEY}), {name}, {id})"
        ));
    }
    let rest = filters(&mut at, tag, search);
    short.extend(rest.iter().cloned());
    long.extend(rest);
    let limit = at.next("bigint");
    let dir = direction(order);
    let columns = "SELECT id, name, tag FROM plants";
    let page = format!(
        "SELECT id, name, tag FROM (\
         ({columns}{} ORDER BY name{dir}, id{dir} LIMIT {limit}) UNION ALL \
         ({columns}{} ORDER BY {key}{dir}, name{dir}, id{dir} LIMIT {limit})\
         ) AS page ORDER BY name{dir}, id{dir} LIMIT {limit}",
        clause(&short),
        clause(&long)
    );
    within(&page, &format!("name{dir}, id{dir}"), &at.next("bigint"))
}

/// The rows of `page` (in the order `order_by`) up to the first whose
/// names and tags before it hold `bytes` or more, and one more (which
/// the page cannot hold: it only shows that more follow); see the module
/// header.
fn within(page: &str, order_by: &str, bytes: &str) -> String {
    format!(
        "SELECT id, name, tag FROM (\
         SELECT id, name, tag, coalesce(sum(octet_length(name) + coalesce(octet_length(tag), 0)) \
         OVER (ORDER BY {order_by} ROWS BETWEEN UNBOUNDED PRECEDING AND 2 PRECEDING), 0) AS held \
         FROM ({page}) AS listed\
         ) AS sized WHERE held < {bytes} ORDER BY {order_by}"
    )
}

/// The tag and search conditions, numbering their parameters.
fn filters(at: &mut Numbered, tag: bool, search: bool) -> Vec<String> {
    let mut conditions = Vec::new();
    if tag {
        conditions.push(format!("tag = {}", at.next("bytea")));
    }
    if search {
        let pattern = at.next("text");
        conditions.push(format!(
            "(name_folded LIKE {pattern} ESCAPE '\\' OR tag_folded LIKE {pattern} ESCAPE '\\')"
        ));
    }
    conditions
}

/// ` WHERE a AND b`, or nothing.
fn clause(conditions: &[String]) -> String {
    if conditions.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", conditions.join(" AND "))
    }
}

/// How a row compares with the bound to be on the page.
fn comparison(order: Order, from: Resume) -> &'static str {
    match (order.descending(), from == Resume::At) {
        (false, false) => ">",
        (false, true) => ">=",
        (true, false) => "<",
        (true, true) => "<=",
    }
}

fn direction(order: Order) -> &'static str {
    if order.descending() { " DESC" } else { "" }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_numbered_in_the_order_values_are_pushed() {
        let page = sql(Shape::Page {
            order: Order::NameDesc,
            from: Resume::At,
            tag: true,
            search: true,
        });
        for (n, cast) in [(1, "bytea"), (2, "bigint"), (3, "bytea"), (4, "text")] {
            assert!(page.contains(&format!("${n}::{cast}")), "{page}");
        }
        assert!(
            page.contains("(name, id) <= ($1::bytea, $2::bigint)"),
            "{page}"
        );
        assert!(page.contains("LIMIT $5::bigint"), "{page}");
        assert!(page.contains("held < $6::bigint"), "{page}");
        assert!(!page.contains("$7"), "{page}");
        let by_id = sql(Shape::Page {
            order: Order::IdDesc,
            from: Resume::Past,
            tag: false,
            search: true,
        });
        assert!(by_id.contains("id < $1::bigint"), "{by_id}");
        assert!(by_id.contains("LIKE $2::text"), "{by_id}");
        assert!(
            by_id.contains("ORDER BY id DESC LIMIT $3::bigint"),
            "{by_id}"
        );
        assert!(by_id.contains("held < $4::bigint"), "{by_id}");
        let count = sql(Shape::Count {
            tag: true,
            search: true,
        });
        assert!(
            count.contains("tag = $1::bytea") && count.contains("LIKE $2::text"),
            "{count}"
        );
    }
}
