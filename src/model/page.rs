//! A listing, as every store reads it: the door (`crate::plants`) takes
//! the same [`Query`] and hands the API the same [`Page`] whichever store
//! read it.
//!
//! Orders: by id (the default) or by name, each either way; ties of name
//! are broken by id, in the same direction. Names compare as their UTF-8
//! bytes (that is, by code point), on both stores: no locale.
//!
//! Where a page resumes is a [`Position`] in its order. In name order it
//! holds the last plant's name, at most [`CURSOR_NAME`] bytes of it: a
//! longer name is `cut`, with a hash of the whole name, and the store
//! reads plant `id`'s name as it is now: if it is still the name cut (its
//! hash and first bytes agree), the page resumes past it
//! ([`Position::resume`]). If it is not (renamed or deleted since), the
//! page resumes at the first name in the walk's direction that starts with
//! the cut name, so plants sharing those first bytes may be listed again,
//! never skipped.

use super::Plant;

/// Bytes of a name a cursor carries, at most: every name the default
/// `--max-name` (256 characters) allows in ASCII.
pub const CURSOR_NAME: usize = 256;

/// One page of a listing.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Page {
    /// The plants, in the query's order.
    pub items: Vec<(i64, Plant)>,
    /// Whether more matching plants follow the last one.
    pub more: bool,
    /// How many plants match the query's filters (tag, search), over the
    /// whole store: only when the query asked to `count`.
    pub total: Option<u64>,
}

/// The order of a listing.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Order {
    /// Ascending id.
    #[default]
    Id,
    /// Descending id.
    IdDesc,
    /// Ascending name, then ascending id.
    Name,
    /// Descending name, then descending id.
    NameDesc,
}

impl Order {
    /// Whether the order walks downwards.
    pub fn descending(self) -> bool {
        matches!(self, Order::IdDesc | Order::NameDesc)
    }

    /// Whether the order is by name.
    pub fn by_name(self) -> bool {
        matches!(self, Order::Name | Order::NameDesc)
    }
}

/// Where a listing resumes: past this plant, in the query's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Position {
    /// Past this id (id orders).
    Id(i64),
    /// Past this name and id (name orders); `cut`: `name` is only the
    /// first [`CURSOR_NAME`] bytes (at most) of the plant's name, whose
    /// [`name_hash`] this is.
    Name {
        name: String,
        id: i64,
        cut: Option<u64>,
    },
}

/// A hash of a whole name, for a cut cursor to tell whether its plant
/// still has the name it was cut from: FNV-1a (64 bits), the same in
/// every instance and build.
pub fn name_hash(name: &[u8]) -> u64 {
    name.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Where a walk in name order resumes, once a cut name is resolved: past
/// `(name, id)` in the walk's direction, or, when `inclusive`, at it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameBound {
    pub name: Vec<u8>,
    pub id: i64,
    pub inclusive: bool,
}

impl Position {
    /// The position past plant `id` named `name` in a name order: the
    /// name cut at a character boundary if it is longer than
    /// [`CURSOR_NAME`] bytes.
    pub fn past_name(name: &str, id: i64) -> Position {
        if name.len() <= CURSOR_NAME {
            return Position::Name {
                name: name.to_owned(),
                id,
                cut: None,
            };
        }
        let end = (0..=CURSOR_NAME)
            .rev()
            .find(|&at| name.is_char_boundary(at))
            .unwrap_or(0);
        Position::Name {
            name: name[..end].to_owned(),
            id,
            cut: Some(name_hash(name.as_bytes())),
        }
    }

    /// The bound a name order resumes from. `current` is the name plant
    /// `id` has now (`None` if it is gone), read by the store only when
    /// the name is `cut`; `descending` is the walk's direction. `None`
    /// for an id position.
    pub fn resume(&self, current: Option<&str>, descending: bool) -> Option<NameBound> {
        let Position::Name { name, id, cut } = self else {
            return None;
        };
        let Some(hash) = cut else {
            return Some(NameBound {
                name: name.as_bytes().to_vec(),
                id: *id,
                inclusive: false,
            });
        };
        let still =
            |whole: &str| whole.starts_with(name.as_str()) && name_hash(whole.as_bytes()) == *hash;
        match current {
            Some(whole) if still(whole) => Some(NameBound {
                name: whole.as_bytes().to_vec(),
                id: *id,
                inclusive: false,
            }),
            // Renamed or gone (or, for a name renamed within its first
            // bytes, moved past plants a walk has not seen): at the first
            // name starting with `name`.
            _ if !descending => Some(NameBound {
                name: name.as_bytes().to_vec(),
                id: i64::MIN,
                inclusive: true,
            }),
            _ => match successor(name.as_bytes()) {
                // Every name below the next prefix: those starting with
                // `name` and all after them.
                Some(next) => Some(NameBound {
                    name: next,
                    id: i64::MIN,
                    inclusive: false,
                }),
                // `name` is all 0xFF bytes: no UTF-8 name is above it...
                // nor starts with it; resume from the very top.
                None => Some(NameBound {
                    name: vec![0xFF; CURSOR_NAME + 1],
                    id: i64::MAX,
                    inclusive: true,
                }),
            },
        }
    }
}

/// The smallest byte string greater than every string starting with
/// `prefix`: the prefix with trailing 0xFF bytes dropped and its last byte
/// raised by one. `None` if there is none (empty or all 0xFF).
fn successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut next = prefix.to_vec();
    while let Some(last) = next.pop() {
        if last < 0xFF {
            next.push(last + 1);
            return Some(next);
        }
    }
    None
}

/// How many bytes of JSON a page may hold: the array of its records, each
/// written as `PlantRecord` writes it with the fields shown (`fields` in
/// the API), a comma between them. A store takes plants into a page only
/// while they fit, so that it copies no more than the page it answers
/// (the first record goes in however large, so paging always advances);
/// the API writes the same records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// The array's bytes, at most.
    pub bytes: usize,
    /// Whether each record shows its id, its name, its tag.
    pub id: bool,
    pub name: bool,
    pub tag: bool,
}

impl Budget {
    /// No bound, every field shown.
    pub const UNBOUNDED: Budget = Budget::of(usize::MAX);

    /// At most `bytes`, every field shown.
    pub const fn of(bytes: usize) -> Budget {
        Budget {
            bytes,
            id: true,
            name: true,
            tag: true,
        }
    }

    /// The length of plant `id`'s record, with the fields shown.
    pub fn record_len(&self, id: i64, name: &str, tag: Option<&str>) -> usize {
        let mut parts = [0usize; 3];
        if self.id {
            // "id":N
            let digits = id
                .unsigned_abs()
                .checked_ilog10()
                .map_or(1, |d| d as usize + 1);
            parts[0] = 5 + usize::from(id < 0) + digits;
        }
        if self.name {
            parts[1] = 9 + super::escaped_len(name);
        }
        if let (true, Some(tag)) = (self.tag, tag) {
            parts[2] = 8 + super::escaped_len(tag);
        }
        let shown = parts.iter().filter(|&&part| part > 0).count();
        // The braces and the commas between the parts.
        2 + parts.iter().sum::<usize>() + shown.saturating_sub(1)
    }

    /// The array's length once a record of `record` bytes follows the
    /// `taken` records of an array now `array` bytes long (brackets
    /// included: [`EMPTY`](Self::EMPTY) with none), or `None` if it
    /// would pass the budget. The first record always goes in.
    pub fn add(&self, array: usize, taken: usize, record: usize) -> Option<usize> {
        let grown = array.saturating_add(record.saturating_add(usize::from(taken > 0)));
        (taken == 0 || grown <= self.bytes).then_some(grown)
    }

    /// The length of an array of no records.
    pub const EMPTY: usize = 2;
}

/// What a listing asks of a store.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Query {
    pub order: Order,
    /// Resume past this position; `None` from the start.
    pub after: Option<Position>,
    /// Exact tag filter.
    pub tag: Option<String>,
    /// Search text, already folded ([`fold`](super::fold)): plants whose
    /// folded name or folded tag contains it.
    pub search: Option<String>,
    /// Page size.
    pub limit: usize,
    /// Count every plant matching `tag` and `search` (`Page::total`).
    pub count: bool,
}

impl Query {
    /// Whether `plant` passes the query's filters (tag and search).
    pub fn matches(&self, name: &str, tag: Option<&str>) -> bool {
        if let Some(want) = &self.tag
            && tag != Some(want.as_str())
        {
            return false;
        }
        match &self.search {
            None => true,
            Some(text) => {
                super::contains_folded(name, text)
                    || tag.is_some_and(|t| super::contains_folded(t, text))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_name_resumes_at_its_plant_or_at_its_prefix() {
        let cut = Position::Name {
            name: "ab".into(),
            id: 7,
            cut: Some(name_hash(b"abcd")),
        };
        let past = |name: &str, id, inclusive| {
            Some(NameBound {
                name: name.as_bytes().to_vec(),
                id,
                inclusive,
            })
        };
        assert_eq!(cut.resume(Some("abcd"), false), past("abcd", 7, false));
        assert_eq!(cut.resume(Some("abcd"), true), past("abcd", 7, false));
        assert_eq!(cut.resume(Some("xy"), false), past("ab", i64::MIN, true));
        // Renamed within the cut bytes: at the prefix, not past its new name.
        assert_eq!(cut.resume(Some("abce"), false), past("ab", i64::MIN, true));
        assert_eq!(cut.resume(Some("abce"), true), past("ac", i64::MIN, false));
        assert_eq!(cut.resume(None, true), past("ac", i64::MIN, false));
        assert_eq!(successor(b"a\xff\xff"), Some(b"b".to_vec()));
        assert_eq!(successor(b"\xff"), None);
        let whole = Position::past_name("ab", 7);
        assert_eq!(whole.resume(None, true), past("ab", 7, false));
        assert_eq!(Position::Id(3).resume(None, false), None);
        let long = "é".repeat(200);
        let Position::Name { name, cut, .. } = Position::past_name(&long, 1) else {
            panic!("a name position");
        };
        assert_eq!((name.len(), cut), (256, Some(name_hash(long.as_bytes()))));
    }
}
