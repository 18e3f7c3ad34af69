//! The bytes of the feed: one event per change, the `reset` event, and
//! reading `Last-Event-ID`.
//!
//! An event is
//!
//! ```text
//! id: 1764107000123-42
//! event: created            (or replaced, deleted)
//! data: {"id":42,"name":"fern","tag":"x"}
//!
//! ```
//!
//! and its data is one JSON line (JSON text escapes every line break): the
//! plant as `GET /plants/{id}` answers it, or only `{"id":42}` once
//! deleted.

use std::io::Write;

use crate::model::{ChangeKind, PlantChange, PlantRecord};

/// Bytes an event costs the history beyond its text.
pub(super) const OVERHEAD: usize = 64;

/// Why a stream starts with a `reset` (its `data`'s `reason`).
pub(super) const FOREIGN: &str = "not an event id of this feed";
pub(super) const RESTARTED: &str = "the server restarted";
pub(super) const TOO_FAR: &str = "too far behind";
/// The shared change log was needed and did not answer.
pub(super) const UNREADABLE: &str = "the change log could not be read";
/// The change log holds the id, but this instance was not handed it in
/// time.
pub(super) const LAGGING: &str = "this instance is behind the change log";
/// A change like any other (`ChangeKind::Reset`): `POST /plants/reset`.
pub(super) const WAS_RESET: &str = "the plants were reset";

/// One change, encoded once for every subscriber.
pub(super) struct Event {
    pub(super) seq: u64,
    /// The plant's tag after the change (`?tag=`); `None` also for a delete.
    tag: Option<Box<str>>,
    deleted: bool,
    bytes: Box<[u8]>,
}

impl Event {
    pub(super) fn new(epoch: u64, change: &PlantChange) -> Event {
        let mut bytes = Vec::with_capacity(96);
        let kind = match change.kind {
            ChangeKind::Created => "created",
            ChangeKind::Replaced => "replaced",
            ChangeKind::Deleted => "deleted",
            ChangeKind::Reset => {
                // Every subscriber gets it, whatever its tag (as a delete).
                reset(&mut bytes, epoch, change.seq, WAS_RESET);
                let (seq, tag, deleted, bytes) = (change.seq, None, true, bytes.into());
                return Event {
                    seq,
                    tag,
                    deleted,
                    bytes,
                };
            }
        };
        id_line(&mut bytes, epoch, change.seq);
        let _ = write!(bytes, "event: {kind}\ndata: ");
        // Our own plain records into a Vec: serialising cannot fail.
        match &change.plant {
            Some(plant) => {
                let _ = serde_json::to_writer(&mut bytes, &PlantRecord::new(change.id, plant));
            }
            None => {
                let _ = write!(bytes, "{{\"id\":{}}}", change.id);
            }
        }
        bytes.extend_from_slice(b"\n\n");
        Event {
            seq: change.seq,
            tag: change
                .plant
                .as_ref()
                .and_then(|p| p.tag.as_deref())
                .map(Box::from),
            deleted: change.plant.is_none(),
            bytes: bytes.into_boxed_slice(),
        }
    }

    /// What it takes of the history's bytes.
    pub(super) fn cost(&self) -> usize {
        self.bytes.len() + self.tag.as_ref().map_or(0, |t| t.len()) + OVERHEAD
    }

    pub(super) fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Whether a subscriber following `tag` (all changes: `None`) gets it.
    pub(super) fn selected_by(&self, tag: Option<&str>) -> bool {
        self.deleted || tag.is_none_or(|t| self.tag.as_deref() == Some(t))
    }
}

/// `id: <epoch>-<seq>\n`.
pub(super) fn id_line(out: &mut Vec<u8>, epoch: u64, seq: u64) {
    let _ = writeln!(out, "id: {epoch}-{seq}");
}

/// The `reset` event: the client's position is lost; it re-lists and
/// goes on after `seq`.
pub(super) fn reset(out: &mut Vec<u8>, epoch: u64, seq: u64, why: &str) {
    id_line(out, epoch, seq);
    let _ = write!(out, "event: reset\ndata: {{\"reason\":\"{why}\"}}\n\n");
}

/// Where a new stream starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resume {
    /// No `Last-Event-ID`: from the next change.
    Fresh,
    /// After this event, which the history still holds (or the last one).
    After(u64),
    /// After this event, older than the history: only a shared change log
    /// can still have the changes after it.
    Behind(u64),
    /// After this event, newer than the last one handed to the feed: only
    /// a shared change log can say whether it is one (another instance's,
    /// which this one has not been handed yet).
    Ahead(u64),
    /// From the next change, after a `reset` event saying why.
    Reset(&'static str),
}

impl Resume {
    /// Reads `Last-Event-ID` against a history of `first..=last` in
    /// `epoch`.
    pub fn from_header(header: Option<&str>, epoch: u64, first: u64, last: u64) -> Resume {
        let Some(id) = header.map(str::trim).filter(|id| !id.is_empty()) else {
            return Resume::Fresh;
        };
        let parsed = id
            .split_once('-')
            .and_then(|(e, s)| Some((digits(e)?, digits(s)?)));
        match parsed {
            None => Resume::Reset(FOREIGN),
            Some((e, _)) if e != epoch => Resume::Reset(RESTARTED),
            Some((_, seq)) if seq > last => Resume::Ahead(seq),
            // Resuming after `seq` needs `seq + 1` onwards.
            Some((_, seq)) if seq + 1 < first => Resume::Behind(seq),
            Some((_, seq)) => Resume::After(seq),
        }
    }
}

/// A decimal number of ASCII digits only.
fn digits(text: &str) -> Option<u64> {
    (!text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.parse().ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Plant;

    fn change(seq: u64, kind: ChangeKind, plant: Option<(&str, Option<&str>)>) -> PlantChange {
        PlantChange {
            seq,
            id: 7,
            kind,
            plant: plant.map(|(name, tag)| Plant {
                name: name.into(),
                tag: tag.map(Into::into),
            }),
        }
    }

    #[test]
    fn each_change_is_one_event_with_its_id_kind_and_plant() {
        let created = Event::new(
            5,
            &change(3, ChangeKind::Created, Some(("a\nb", Some("t")))),
        );
        assert_eq!(
            created.bytes(),
            b"id: 5-3\nevent: created\ndata: {\"id\":7,\"name\":\"a\\nb\",\"tag\":\"t\"}\n\n"
        );
        let replaced = Event::new(5, &change(4, ChangeKind::Replaced, Some(("c", None))));
        assert_eq!(
            replaced.bytes(),
            b"id: 5-4\nevent: replaced\ndata: {\"id\":7,\"name\":\"c\"}\n\n"
        );
        let deleted = Event::new(5, &change(5, ChangeKind::Deleted, None));
        assert_eq!(
            deleted.bytes(),
            b"id: 5-5\nevent: deleted\ndata: {\"id\":7}\n\n"
        );
        assert!(created.selected_by(Some("t")) && created.selected_by(None));
        assert!(!created.selected_by(Some("u")));
        assert!(!replaced.selected_by(Some("t")) && replaced.selected_by(None));
        assert!(deleted.selected_by(Some("t")), "a delete reaches every tag");
        let reset = Event::new(5, &change(6, ChangeKind::Reset, None));
        assert_eq!(
            reset.bytes(),
            b"id: 5-6\nevent: reset\ndata: {\"reason\":\"the plants were reset\"}\n\n"
        );
        assert!(reset.selected_by(Some("t")), "a reset reaches every tag");
    }

    #[test]
    fn last_event_id_resumes_only_within_this_epochs_history() {
        let at = |h| Resume::from_header(h, 17, 10, 20);
        assert_eq!(at(None), Resume::Fresh);
        assert_eq!(at(Some(" ")), Resume::Fresh);
        assert_eq!(at(Some("17-9")), Resume::After(9), "10 onwards is kept");
        assert_eq!(at(Some("17-20")), Resume::After(20));
        assert_eq!(at(Some(" 17-15 ")), Resume::After(15));
        assert_eq!(at(Some("17-8")), Resume::Behind(8));
        assert_eq!(at(Some("17-21")), Resume::Ahead(21));
        assert_eq!(at(Some("16-15")), Resume::Reset(RESTARTED));
        for bad in [
            "17",
            "17-",
            "-3",
            "17-+3",
            "x-1",
            "17-1-2",
            "17-99999999999999999999",
        ] {
            assert_eq!(at(Some(bad)), Resume::Reset(FOREIGN), "{bad}");
        }
        // Nothing kept yet: an id of the last event still resumes.
        assert_eq!(
            Resume::from_header(Some("17-0"), 17, 1, 0),
            Resume::After(0)
        );
    }
}
