//! Query strings: `GET /plants` takes `limit`, `after` and `tag`; the
//! change feed `tag`; the other API routes none.
//!
//! Values are percent-decoded (`+` is a space, as in HTML forms) and must be
//! UTF-8. A malformed or out-of-range value is a 400 naming the parameter,
//! never silently clamped; a repeated parameter is a 400 too, since which
//! one counts would be a guess. A parameter the route does not take is a
//! 400 naming it and those it takes, so that a typo (`?limt=5`, `?tags=x`)
//! is not read as "no limit" or "no filter". (The page's files take any
//! query: a cache-busting `?v=2` is theirs to ignore.)
//!
//! `limit` and `after` (and the id in a path, through [`integer`]) are read
//! exactly from their text, as body ids are: `10e-1` is 1, while
//! `0.99999999999999999` is not an integer and is refused, not rounded.

use super::ApiError;
use crate::model::int64_text;

/// Default and largest page sizes.
pub const DEFAULT_LIMIT: usize = 100;
pub const MAX_LIMIT: usize = 1000;

/// A validated listing query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListQuery {
    /// Page size, `0..=MAX_LIMIT`.
    pub limit: usize,
    /// Return ids strictly greater than this.
    pub after: Option<i64>,
    /// Exact tag filter.
    pub tag: Option<String>,
}

impl ListQuery {
    /// Parses the query string (without `?`).
    pub fn parse(query: Option<&str>) -> Result<ListQuery, ApiError> {
        let (mut limit, mut after, mut tag) = (None, None, None);
        for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let (slot, name): (&mut Option<String>, &'static str) = match decode(key).as_deref() {
                Some("limit") => (&mut limit, "query parameter limit"),
                Some("after") => (&mut after, "query parameter after"),
                Some("tag") => (&mut tag, "query parameter tag"),
                _ => return Err(unknown(key, "limit, after, tag")),
            };
            if slot.is_some() {
                return Err(ApiError::BadParameter(name));
            }
            *slot = Some(decode(value).ok_or(ApiError::BadParameter(name))?);
        }
        let limit = match limit {
            None => DEFAULT_LIMIT,
            Some(v) => integer::<i32>(&v)
                .and_then(|n| usize::try_from(n).ok())
                .filter(|&n| n <= MAX_LIMIT)
                .ok_or(ApiError::BadParameter(
                    "query parameter limit (an integer from 0 to 1000)",
                ))?,
        };
        let after = match after {
            None => None,
            Some(v) => Some(
                integer::<i64>(&v)
                    .ok_or(ApiError::BadParameter("query parameter after (an int64)"))?,
            ),
        };
        Ok(ListQuery { limit, after, tag })
    }
}

/// A validated query of the change feed: only `tag`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeedQuery {
    /// Exact tag filter.
    pub tag: Option<String>,
}

impl FeedQuery {
    /// Parses the query string (without `?`); any parameter but `tag` is
    /// refused, naming it.
    pub fn parse(query: Option<&str>) -> Result<FeedQuery, ApiError> {
        let mut tag = None;
        for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let name = "query parameter tag";
            match decode(key).as_deref() {
                Some("tag") if tag.is_none() => {
                    tag = Some(decode(value).ok_or(ApiError::BadParameter(name))?);
                }
                Some("tag") => return Err(ApiError::BadParameter(name)),
                _ => return Err(unknown(key, "tag")),
            }
        }
        Ok(FeedQuery { tag })
    }
}

/// Refuses any query parameter: for the routes that take none.
pub fn none(query: Option<&str>) -> Result<(), ApiError> {
    match query.unwrap_or("").split('&').find(|p| !p.is_empty()) {
        Some(pair) => Err(unknown(
            pair.split_once('=').map_or(pair, |(k, _)| k),
            "none",
        )),
        None => Ok(()),
    }
}

/// The 400 for parameter `key` (as sent; at most 64 bytes of it shown),
/// listing those `accepted`.
fn unknown(key: &str, accepted: &'static str) -> ApiError {
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

    #[test]
    fn the_feed_takes_tag_once_and_nothing_else() {
        assert_eq!(FeedQuery::parse(None).unwrap().tag, None);
        let q = FeedQuery::parse(Some("tag=a%20b")).unwrap();
        assert_eq!(q.tag.as_deref(), Some("a b"));
        assert!(matches!(
            FeedQuery::parse(Some("tag=a&tag=b")),
            Err(ApiError::BadParameter(_))
        ));
        let Err(ApiError::UnknownParameter(name, "tag")) = FeedQuery::parse(Some("tags=x")) else {
            panic!("tags= is not tag=");
        };
        assert_eq!(name, "tags");
        let long = "k".repeat(100);
        let Err(ApiError::UnknownParameter(name, _)) = FeedQuery::parse(Some(&long)) else {
            panic!("unknown");
        };
        assert_eq!(name.len(), 64, "the name is shown cut");
    }

    #[test]
    fn defaults_and_values() {
        let q = ListQuery::parse(None).unwrap();
        assert_eq!((q.limit, q.after, q.tag), (100, None, None));
        let q = ListQuery::parse(Some("limit=0&after=-5&tag=a%20b+c")).unwrap();
        assert_eq!(
            (q.limit, q.after, q.tag.as_deref()),
            (0, Some(-5), Some("a b c"))
        );
        let Err(ApiError::UnknownParameter(name, accepted)) =
            ListQuery::parse(Some("limit=0&limt=5"))
        else {
            panic!("a misspelt parameter is refused");
        };
        assert_eq!((name.as_str(), accepted), ("limt", "limit, after, tag"));
        assert!(none(None).is_ok() && none(Some("")).is_ok() && none(Some("&&")).is_ok());
        let Err(ApiError::UnknownParameter(name, "none")) = none(Some("&x=1&y")) else {
            panic!("a route without parameters takes none");
        };
        assert_eq!(name, "x");
        assert_eq!(ListQuery::parse(Some("limit=1000")).unwrap().limit, 1000);
        assert_eq!(
            ListQuery::parse(Some("limit=5.0&after=-2e0"))
                .unwrap()
                .after,
            Some(-2)
        );
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
        ] {
            assert!(ListQuery::parse(Some(query)).is_err(), "{query}");
        }
    }
}
