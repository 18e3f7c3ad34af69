//! The cursor of a listing: the `after` parameter, written into the
//! `Link: rel="next"` of each page but the last.
//!
//! In the default order (`sort=id`) it is the last id, a plain int64, as
//! it always was, so that a client may write it itself. In every other
//! order it names its sort, so that a cursor pasted into another order is
//! a 400 rather than a wrong page: `-id:ID`, or `name:ID:=NAME` and
//! `-name:ID:=NAME` with the last plant's whole name. A name longer than
//! [`CURSOR_NAME`] bytes is cut at a character boundary and written
//! `name:ID:^HASH:PREFIX`, HASH the whole name's `name_hash` in 16 hex
//! digits (the store resumes past plant `ID` while its name is still the
//! one cut: see `model/page.rs`), so a cursor stays short (at most some
//! 800 bytes percent-encoded) whatever `--max-name` allows.

use crate::model::{CURSOR_NAME, Order, Position, int64_text};

/// The cursor after plant `id` named `name`, in `order`.
pub fn write(order: Order, id: i64, name: &str) -> String {
    match order {
        Order::Id => id.to_string(),
        Order::IdDesc => format!("-id:{id}"),
        Order::Name | Order::NameDesc => {
            let sort = if order == Order::Name {
                "name"
            } else {
                "-name"
            };
            match Position::past_name(name, id) {
                Position::Name {
                    name,
                    cut: Some(hash),
                    ..
                } => format!("{sort}:{id}:^{hash:016x}:{name}"),
                _ => format!("{sort}:{id}:={name}"),
            }
        }
    }
}

/// The position a cursor (decoded) names, if it is one of `order`.
pub fn read(order: Order, text: &str) -> Option<Position> {
    if order == Order::Id {
        return int64_text(text).map(Position::Id);
    }
    let (sort, rest) = text.split_once(':')?;
    let wanted = match order {
        Order::Id => "",
        Order::IdDesc => "-id",
        Order::Name => "name",
        Order::NameDesc => "-name",
    };
    if sort != wanted {
        return None;
    }
    if order == Order::IdDesc {
        return rest.parse::<i64>().ok().map(Position::Id);
    }
    let (id, name) = rest.split_once(':')?;
    let id = id.parse::<i64>().ok()?;
    let (cut, name) = match name.split_at_checked(1)? {
        ("=", name) => (None, name),
        ("^", rest) => {
            let (hash, name) = rest.split_once(':')?;
            let hex = hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit());
            (
                Some(u64::from_str_radix(hash, 16).ok().filter(|_| hex)?),
                name,
            )
        }
        _ => return None,
    };
    // A cut name is as long as a cut makes it; a whole one fits.
    if name.len() > CURSOR_NAME || (cut.is_some() && name.len() + 4 <= CURSOR_NAME) {
        return None;
    }
    Some(Position::Name {
        name: name.to_owned(),
        id,
        cut,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::name_hash;

    #[test]
    fn a_cursor_reads_back_in_its_own_order_only() {
        let orders = [Order::Id, Order::IdDesc, Order::Name, Order::NameDesc];
        for (i, order) in orders.into_iter().enumerate() {
            for (id, name) in [
                (-5, "Fern: a:b"),
                (9, ""),
                (i64::MAX, "é".repeat(200).as_str()),
            ] {
                let cursor = write(order, id, name);
                let expected = if order.by_name() {
                    let cut = name.len() > CURSOR_NAME;
                    let kept = if cut { &name[..CURSOR_NAME] } else { name };
                    Position::Name {
                        name: kept.into(),
                        id,
                        cut: cut.then(|| name_hash(name.as_bytes())),
                    }
                } else {
                    Position::Id(id)
                };
                assert_eq!(read(order, &cursor), Some(expected), "{cursor}");
                assert!(cursor.len() <= CURSOR_NAME + 50, "{cursor}");
                for (j, other) in orders.into_iter().enumerate() {
                    if i != j {
                        assert_eq!(read(other, &cursor), None, "{cursor} in {other:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn garbled_cursors_are_refused() {
        for (order, text) in [
            (Order::Id, "x"),
            (Order::IdDesc, "-id:"),
            (Order::IdDesc, "-id:1.5"),
            (Order::IdDesc, "5"),
            (Order::Name, "name:5"),
            (Order::Name, "name:x:=a"),
            (Order::Name, "name:5:a"),
            (Order::Name, "name:5:"),
            (Order::Name, "name:5:^short"),
            (Order::Name, "name:5:^0123456789abcdef:short"),
            (Order::Name, "name:5:^+123456789abcdef:x"),
            (Order::Name, "name:5:^0123:x"),
            (Order::NameDesc, "name:5:=a"),
        ] {
            assert_eq!(read(order, text), None, "{text}");
        }
        let long = format!("name:1:={}", "a".repeat(CURSOR_NAME + 1));
        assert_eq!(read(Order::Name, &long), None);
    }
}
