//! Query strings: which names a route takes is its row's (`routes`);
//! this reads them, and the values of `GET /plants` (`limit`, `after`,
//! `tag`, `q`, `sort`, `count`, `fields`) and of the change feed (`tag`,
//! `lastEventId`; its `ticket` is the gate's, [`ticket`]).
//!
//! Values are percent-decoded (`+` is a space, as in HTML forms) and must be
//! UTF-8. A malformed or out-of-range value is a 400 naming the parameter,
//! never silently clamped; a repeated parameter is a 400 too, since which
//! one counts would be a guess. A parameter the route does not take is a
//! 400 naming it and those it takes, so that a typo (`?limt=5`, `?tags=x`)
//! is not read as "no limit" or "no filter". Each pair is judged in turn:
//! the first fault named is the first in the query. (Routes whose row says
//! `Any` take any query, unread: a cache-busting `?v=2` is the page's to
//! ignore.)
//!
//! `limit` and `after` (and the id in a path, through [`integer`]) are read
//! exactly from their text, as body ids are: `10e-1` is 1, while
//! `0.99999999999999999` is not an integer and is refused, not rounded.

use super::{ApiError, cursor};
use crate::model::{Budget, CURSOR_NAME, MAX_SEARCH, Order, Query, fold, int64_text};

/// Default and largest page sizes.
pub const DEFAULT_LIMIT: usize = 100;
pub const MAX_LIMIT: usize = 1000;

/// A validated listing query: what the store is asked, and what only the
/// answer needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListQuery {
    /// The store's query (its search text folded); `limit` is
    /// `0..=MAX_LIMIT`.
    pub store: Query,
    /// Search text, as sent (`q`), for the next page's `Link`.
    pub search: Option<String>,
    /// The fields each record shows (`fields`).
    pub fields: Fields,
}

/// Which fields of a plant a listing shows, in the order id, name, tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fields {
    pub id: bool,
    pub name: bool,
    pub tag: bool,
}

impl Fields {
    pub const ALL: Fields = Fields {
        id: true,
        name: true,
        tag: true,
    };

    /// `id,name,tag`, any non-empty subset, each once.
    fn parse(text: &str) -> Option<Fields> {
        let mut fields = Fields {
            id: false,
            name: false,
            tag: false,
        };
        for field in text.split(',') {
            let slot = match field {
                "id" => &mut fields.id,
                "name" => &mut fields.name,
                "tag" => &mut fields.tag,
                _ => return None,
            };
            if std::mem::replace(slot, true) {
                return None;
            }
        }
        Some(fields)
    }

    /// A page's budget of `bytes` of JSON with these fields shown.
    pub fn budget(self, bytes: usize) -> Budget {
        Budget {
            bytes,
            id: self.id,
            name: self.name,
            tag: self.tag,
        }
    }

    /// As the `fields` parameter writes them.
    pub fn to_param(self) -> String {
        let names = [(self.id, "id"), (self.name, "name"), (self.tag, "tag")];
        let shown: Vec<&str> = names
            .iter()
            .filter(|(on, _)| *on)
            .map(|(_, n)| *n)
            .collect();
        shown.join(",")
    }
}

impl ListQuery {
    /// Reads the values of a query whose names were checked (`read`).
    pub fn parse(values: &Values) -> Result<ListQuery, ApiError> {
        let limit = match values.get("limit") {
            None => DEFAULT_LIMIT,
            Some(v) => integer::<i32>(v)
                .and_then(|n| usize::try_from(n).ok())
                .filter(|&n| n <= MAX_LIMIT)
                .ok_or(ApiError::BadParameter(
                    "query parameter limit (an integer from 0 to 1000)",
                ))?,
        };
        let order = match values.get("sort") {
            None | Some("id") => Order::Id,
            Some("-id") => Order::IdDesc,
            Some("name") => Order::Name,
            Some("-name") => Order::NameDesc,
            Some(_) => {
                return Err(ApiError::BadParameter(
                    "query parameter sort (one of id, -id, name, -name)",
                ));
            }
        };
        let after = match values.get("after") {
            None => None,
            Some(v) => Some(cursor::read(order, v).ok_or(if order == Order::Id {
                ApiError::BadParameter("query parameter after (an int64)")
            } else {
                ApiError::BadParameter(
                    "query parameter after (a cursor of this sort, as the Link header gives it)",
                )
            })?),
        };
        let search = match values.get("q") {
            None => None,
            Some(text) if (1..=MAX_SEARCH).contains(&text.len()) => Some(text.to_owned()),
            Some(_) => {
                return Err(ApiError::BadParameter(
                    "query parameter q (1 to 256 bytes of UTF-8)",
                ));
            }
        };
        let count = match values.get("count") {
            None | Some("false") => false,
            Some("true") => true,
            Some(_) => {
                return Err(ApiError::BadParameter(
                    "query parameter count (true or false)",
                ));
            }
        };
        let fields = match values.get("fields") {
            None => Fields::ALL,
            Some(text) => Fields::parse(text).ok_or(ApiError::BadParameter(
                "query parameter fields (a comma-separated list of id, name, tag, each once)",
            ))?,
        };
        let store = Query {
            order,
            after,
            tag: values.get("tag").map(str::to_owned),
            search: search.as_deref().map(fold),
            limit,
            count,
        };
        Ok(ListQuery {
            store,
            search,
            fields,
        })
    }

    /// The query string of the page after `(id, name)`: every parameter
    /// of this one, the cursor moved.
    pub fn next(&self, id: i64, name: &str) -> String {
        let encode = crate::percent::encode;
        let mut query = format!(
            "after={}&limit={}",
            encode(&cursor::write(self.store.order, id, name)),
            self.store.limit
        );
        let sort = match self.store.order {
            Order::Id => None,
            Order::IdDesc => Some("-id"),
            Order::Name => Some("name"),
            Order::NameDesc => Some("-name"),
        };
        let mut add = |name: &str, value: Option<&str>| {
            if let Some(value) = value {
                query.push_str(&format!("&{name}={}", encode(value)));
            }
        };
        add("tag", self.store.tag.as_deref());
        add("q", self.search.as_deref());
        add("sort", sort);
        add("count", self.store.count.then_some("true"));
        let fields = (self.fields != Fields::ALL).then(|| self.fields.to_param());
        add("fields", fields.as_deref());
        query
    }
}

/// The longest request target (`/plants?...`) a next-page `Link` can
/// name when tags are at most `max_tag` characters: every parameter at
/// its longest once percent-encoded (a tag and a search of four-byte
/// characters, twelve bytes each; a name-order cursor of a cut name), so
/// that `config` can refuse limits under which following a `Link` would
/// be a 414. Counted, not built, past the first character of the tag.
pub fn longest_next_target(max_tag: usize) -> usize {
    const WIDEST: char = '\u{10FFFF}';
    let query = ListQuery {
        store: Query {
            order: Order::NameDesc,
            after: None,
            tag: Some(WIDEST.to_string()),
            search: None,
            limit: MAX_LIMIT,
            count: true,
        },
        search: Some(WIDEST.to_string().repeat(MAX_SEARCH / 4)),
        fields: Fields {
            id: false,
            name: true,
            tag: true,
        },
    };
    let name = WIDEST.to_string().repeat(CURSOR_NAME);
    let one_char = "/plants?".len() + query.next(i64::MIN, &name).len();
    one_char.saturating_add(max_tag.saturating_sub(1).saturating_mul(12))
}

/// A validated query of the change feed (its `ticket` was taken at the
/// gate).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeedQuery {
    /// Exact tag filter.
    pub tag: Option<String>,
    /// Where to resume, as `Last-Event-ID` says it (which wins): a new
    /// `EventSource` cannot send that header.
    pub last_event_id: Option<String>,
}

impl FeedQuery {
    /// Reads the values of a query whose names were checked (`read`).
    pub fn parse(values: &Values) -> FeedQuery {
        FeedQuery {
            tag: values.get("tag").map(str::to_owned),
            last_event_id: values.get("lastEventId").map(str::to_owned),
        }
    }
}

/// The `ticket` parameter of a query, decoded (empty when it does not
/// decode: no ticket's text), read before the query's names are checked
/// (the gate comes first); the first if repeated (the check that follows
/// refuses the repeat).
pub fn ticket(query: Option<&str>) -> Option<String> {
    query?
        .split('&')
        .map(|pair| pair.split_once('=').unwrap_or((pair, "")))
        .find(|(key, _)| *key == "ticket")
        .map(|(_, value)| decode(value).unwrap_or_default())
}

/// A query's values, percent-decoded, by the names its route takes.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Values(Vec<(&'static str, String)>);

impl Values {
    /// The value of parameter `name`, if the query has it.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Reads the query string (without `?`) of a route that takes the
/// parameters `names`: each at most once, its value percent-decoded.
pub fn read(query: Option<&str>, names: &'static [&'static str]) -> Result<Values, ApiError> {
    let mut values = Values::default();
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let decoded = decode(key);
        let Some(&name) = names.iter().find(|&&n| decoded.as_deref() == Some(n)) else {
            return Err(unknown(key, names));
        };
        if values.get(name).is_some() {
            return Err(ApiError::BadQuery(name));
        }
        let value = decode(value).ok_or(ApiError::BadQuery(name))?;
        values.0.push((name, value));
    }
    Ok(values)
}

/// The 400 for parameter `key` (as sent; at most 64 bytes of it shown),
/// listing those `accepted`.
fn unknown(key: &str, accepted: &'static [&'static str]) -> ApiError {
    let cut = (0..=key.len().min(64))
        .rev()
        .find(|&at| key.is_char_boundary(at))
        .unwrap_or(0);
    ApiError::UnknownParameter(key[..cut].to_owned(), accepted)
}

/// An integer parameter of type `T`, read as JSON Schema reads integers:
/// its exact value must be an integer (`7.0` is 7, `7.5` is `None`) that
/// fits `T`.
pub fn integer<T: TryFrom<i64>>(text: &str) -> Option<T> {
    int64_text(text).and_then(|n| T::try_from(n).ok())
}

/// Percent-decodes a query component (`+` is a space); `None` if
/// malformed or not UTF-8.
fn decode(text: &str) -> Option<String> {
    crate::percent::decode(text, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Position;

    const LIST: &[&str] = &["limit", "after", "tag", "q", "sort", "count", "fields"];

    /// A listing query read as `GET /plants` reads it.
    fn list(query: &str) -> Result<ListQuery, ApiError> {
        ListQuery::parse(&read(Some(query), LIST)?)
    }

    /// The parameter `read` refuses as unknown, and those it lists.
    fn refused(query: &str, names: &'static [&'static str]) -> (String, String) {
        let e = read(Some(query), names).expect_err(query);
        let ApiError::UnknownParameter(name, _) = &e else {
            panic!("{query}: {e:?}");
        };
        (name.clone(), e.to_string())
    }

    #[test]
    fn the_feed_takes_tag_once_and_nothing_else() {
        let feed = |query| read(Some(query), &["tag"]).map(|v| FeedQuery::parse(&v));
        assert_eq!(FeedQuery::parse(&read(None, &["tag"]).unwrap()).tag, None);
        assert_eq!(feed("tag=a%20b").unwrap().tag.as_deref(), Some("a b"));
        let names = &["tag", "ticket", "lastEventId"];
        let resume = FeedQuery::parse(&read(Some("lastEventId=7-3"), names).unwrap());
        assert_eq!(resume.last_event_id.as_deref(), Some("7-3"));
        assert_eq!(
            ticket(Some("tag=x&ticket=a%2Db&ticket=c")).as_deref(),
            Some("a-b")
        );
        assert_eq!(ticket(Some("tickets=a&ticket")).as_deref(), Some(""));
        assert_eq!(ticket(Some("ticket=%ff")).as_deref(), Some(""));
        assert_eq!(ticket(Some("tickets=a")), None);
        assert_eq!(ticket(None), None);
        assert!(matches!(
            feed("tag=a&tag=b"),
            Err(ApiError::BadQuery("tag"))
        ));
        let (name, message) = refused("tags=x", &["tag"]);
        assert_eq!(name, "tags", "tags= is not tag=");
        assert!(message.ends_with("; accepted here: tag"), "{message}");
        let (name, _) = refused(&"k".repeat(100), &["tag"]);
        assert_eq!(name.len(), 64, "the name is shown cut");
    }

    #[test]
    fn defaults_and_values() {
        let q = list("").unwrap();
        assert_eq!(
            (q.store.limit, q.store.after, q.store.tag),
            (100, None, None)
        );
        assert_eq!(
            (q.store.order, q.store.count, q.fields, q.search),
            (Order::Id, false, Fields::ALL, None)
        );
        let q = list("limit=0&after=-5&tag=a%20b+c").unwrap();
        assert_eq!(
            (q.store.limit, q.store.after, q.store.tag.as_deref()),
            (0, Some(Position::Id(-5)), Some("a b c"))
        );
        let (name, message) = refused("limit=0&limt=5", LIST);
        assert_eq!(name, "limt", "a misspelt parameter is refused");
        assert_eq!(
            message,
            "unknown query parameter \"limt\"; accepted here: limit, after, tag, q, sort, count, fields"
        );
        for empty in [None, Some(""), Some("&&")] {
            assert_eq!(read(empty, &[]).unwrap(), Values::default());
        }
        let (name, message) = refused("&x=1&y", &[]);
        assert_eq!(name, "x", "a route without parameters takes none");
        assert!(message.ends_with("; accepted here: none"), "{message}");
        // The first fault in the query is the one named.
        assert!(matches!(
            read(Some("limit=1&limit=2&x"), LIST),
            Err(ApiError::BadQuery("limit"))
        ));
        assert_eq!(refused("x&limit=1&limit=2", LIST).0, "x");
        assert_eq!(list("limit=1000").unwrap().store.limit, 1000);
        assert_eq!(
            list("limit=5.0&after=-2e0").unwrap().store.after,
            Some(Position::Id(-2))
        );
    }

    #[test]
    fn search_sort_count_and_fields() {
        let q = list("q=F%C3%A9rn&sort=-name&count=true&fields=name,id").unwrap();
        assert_eq!(q.search.as_deref(), Some("Férn"));
        assert_eq!(q.store.search.as_deref(), Some("férn"));
        assert_eq!((q.store.order, q.store.count), (Order::NameDesc, true));
        assert_eq!(
            q.fields,
            Fields {
                id: true,
                name: true,
                tag: false
            }
        );
        assert_eq!(q.fields.to_param(), "id,name");
        assert!(list(&format!("q={}", "a".repeat(256))).is_ok());
        assert!(list(&format!("q={}", "a".repeat(257))).is_err());
        // The next page keeps every parameter; the cursor reads back.
        let next = q.next(7, "Fern & co");
        assert_eq!(
            next,
            "after=-name%3A7%3A%3DFern%20%26%20co&limit=100&q=F%C3%A9rn&sort=-name&count=true&fields=id%2Cname"
        );
        let again = list(&next).unwrap();
        assert_eq!(
            again.store.after,
            Some(Position::Name {
                name: "Fern & co".into(),
                id: 7,
                cut: None
            })
        );
        assert_eq!(
            (again.search, again.store.order, again.fields),
            (q.search, q.store.order, q.fields)
        );
        assert_eq!(list("").unwrap().next(3, "x"), "after=3&limit=100");
    }

    #[test]
    fn malformed_values_are_refused() {
        for query in [
            "limit=1001",
            "limit=-1",
            "limit=",
            "limit=+5",
            "limit=1.5",
            "limit=0.99999999999999999",
            "limit=1e-400",
            "after=2.0000000000000001",
            "after=x",
            "limit=2147483648",
            "after=9223372036854775808",
            "tag=%zz",
            "tag=%ff",
            // Regression: `%+a` was read as a line feed, `%+0` as NUL.
            "tag=%+a",
            "tag=%+0",
            "limit=1&limit=2",
            "q=",
            "sort=Name",
            "sort=",
            "after=-id:5",
            "sort=-id&after=5",
            "sort=name&after=-name:1:=a",
            "count=1",
            "count=",
            "fields=",
            "fields=id,",
            "fields=id,id",
            "fields=price",
        ] {
            assert!(list(query).is_err(), "{query}");
        }
    }
}
