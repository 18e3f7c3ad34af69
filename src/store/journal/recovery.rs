//! Reading a journal back: every complete record in order, handed to the
//! caller, up to a torn tail or the zeros written ahead of the records;
//! damage in the middle refuses the file. The rules are in the journal's
//! module header.
//!
//! The file is read as a stream through a window that holds the record
//! being read and little else ([`Window`]): start-up memory is the store
//! being built plus the largest record, not the file. The work is linear
//! in the file: a record's length is believed only within
//! [`MAX_PAYLOAD`](super::format::MAX_PAYLOAD) and, in versions 3 and 4, once its
//! own check passes, so the search past damage costs a few bytes of
//! checksum per offset (see `decode_at`), and none at all where the bytes
//! are zeros: no record's length is zero, so a run of zeros is passed at
//! the speed of comparing bytes (the zeros a version-4 or -5 journal has
//! written ahead, up to a megabyte, are read once at each start, not
//! searched).
//!
//! A put of a version-1 to -4 file carries no version: the reader gives
//! it the number of puts read so far, itself included, so a file read
//! twice (replayed, then converted) numbers its plants alike.

use std::io::{self, Read};

use super::format::{
    Change, Decoded, HEADER, HEADER_V4, Lineage, MAGIC, MAGIC_V1, MAGIC_V2, MAGIC_V3, MAGIC_V4,
    Version, batch_of, claimed_size, decode_at, read_header, salt_of,
};

/// Bytes read from the file at a time.
const CHUNK: usize = 64 * 1024;

/// The result of reading a whole journal.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Scan {
    /// The file's version, from its header; `None` if the file is too
    /// short to hold a whole header (new, or torn while it was written).
    pub version: Option<Version>,
    /// The lineage a version-5 header names (none for an older file).
    pub lineage: Lineage,
    /// The store's high-water mark: the highest of the header's mark and
    /// of the versions of the puts read.
    pub high: u64,
    /// Complete records read.
    pub records: u64,
    /// Length of the valid prefix; anything after it is a torn tail, or
    /// zeros written ahead (`zeroed`).
    pub valid_len: u64,
    /// A version-4 or -5 file whose bytes after the valid prefix are all zeros
    /// (none, or space written ahead and not used yet): nothing is torn.
    pub zeroed: bool,
    /// Length of the whole file as read.
    pub len: u64,
    /// Bytes of the file that went through a checksum: about the file's
    /// length, and a few bytes per offset of a torn tail.
    pub checked: u64,
    /// The most bytes of the file held in memory at once.
    pub held: usize,
}

/// Why a journal is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Damage {
    /// The file does not start with a magic.
    NotAJournal,
    /// A version-2 to -5 header that fails its check, with records after it.
    Header,
    /// A damaged record (1-based number, byte offset) with valid ones after.
    Record {
        /// 1-based number of the damaged record.
        record: u64,
        /// Its byte offset.
        offset: u64,
    },
}

/// Why a scan stopped short of the end.
#[derive(Debug)]
pub enum ScanError {
    /// The file is damaged.
    Damage(Damage),
    /// Reading it failed.
    Io(io::Error),
}

/// Reads the journal image `bytes`; see [`scan_from`].
pub fn scan(bytes: &[u8], apply: impl FnMut(Change<'_>)) -> Result<Scan, Damage> {
    scan_from(bytes, apply).map_err(|e| match e {
        ScanError::Damage(damage) => damage,
        ScanError::Io(_) => unreachable!("reading a slice cannot fail"),
    })
}

/// Reads a journal from `file`, handing every complete record's change to
/// `apply` in file order. Never panics, whatever the bytes. On damage in
/// the middle, `apply` has seen the records before it; the caller throws
/// what it built away.
///
/// Whether a later record exists is asked with the same rule that reads
/// records, salt included: in a version-2 or -3 file, bytes a client chose
/// (a record inside a name) do not pass it.
pub fn scan_from(file: impl Read, mut apply: impl FnMut(Change<'_>)) -> Result<Scan, ScanError> {
    let mut window = Window::new(file);
    let mut scan = Scan::default();
    let io = ScanError::Io;
    let head = window.get(0, HEADER + 1).map_err(io)?;
    let version = version(head).map_err(ScanError::Damage)?;
    let Some((version, lineage)) = version else {
        scan.len = window.len().map_err(io)?;
        scan.held = window.held;
        return Ok(scan);
    };
    scan.version = Some(version);
    scan.lineage = lineage;
    scan.high = lineage.mark;
    let mut at = version.header_len() as u64;
    let mut puts = 0;
    loop {
        match window.decode(at, version, &mut scan.checked).map_err(io)? {
            Some(Decoded::Record(mut change, size)) => {
                if let Change::Put { version: stamp, .. } = &mut change {
                    puts += 1;
                    if !version.versioned() {
                        *stamp = puts;
                    }
                    scan.high = scan.high.max(*stamp);
                }
                apply(change);
                scan.records += 1;
                at += size as u64;
                window.release(at);
            }
            None => break,
            Some(Decoded::Bad | Decoded::Short(_)) => {
                match window.after_damage(at, version, &mut scan.checked)? {
                    After::Record => {
                        return Err(ScanError::Damage(Damage::Record {
                            record: scan.records + 1,
                            offset: at,
                        }));
                    }
                    After::Zeros => scan.zeroed = version.batched(),
                    After::Torn => {}
                }
                break;
            }
        }
    }
    if at == window.len().map_err(io)? {
        scan.zeroed = version.batched();
    }
    scan.valid_len = at;
    scan.len = window.len().map_err(io)?;
    scan.held = window.held;
    Ok(scan)
}

/// The file's version and lineage from the first bytes of its header;
/// `None` while the header is not whole but could still become one, or
/// fails its check with nothing after it (a new file torn while its header
/// was written: the header is synced before any record goes behind it).
/// `head` holds one byte past a version-5 header, if the file has it.
fn version(head: &[u8]) -> Result<Option<(Version, Lineage)>, Damage> {
    if head.starts_with(MAGIC_V1) {
        return Ok(Some((Version::V1, Lineage::default())));
    }
    if head.starts_with(MAGIC) {
        let Some(header) = head.first_chunk::<HEADER>() else {
            return Ok(None);
        };
        return match read_header(header) {
            Some((salt, lineage)) => Ok(Some((Version::V5(salt), lineage))),
            None if head.len() == HEADER => Ok(None),
            None => Err(Damage::Header),
        };
    }
    if [MAGIC_V4, MAGIC_V3, MAGIC_V2]
        .iter()
        .any(|m| head.starts_with(*m))
    {
        let Some(header) = head.first_chunk::<HEADER_V4>() else {
            return Ok(None);
        };
        let version = match salt_of(header) {
            Some(salt) if head.starts_with(MAGIC_V4) => Version::V4(salt),
            Some(salt) if head.starts_with(MAGIC_V3) => Version::V3(salt),
            Some(salt) => Version::V2(salt),
            None if head.len() == HEADER_V4 => return Ok(None),
            None => return Err(Damage::Header),
        };
        return Ok(Some((version, Lineage::default())));
    }
    if [MAGIC, MAGIC_V4, MAGIC_V3, MAGIC_V2, MAGIC_V1]
        .iter()
        .any(|magic| magic.starts_with(head))
    {
        return Ok(None);
    }
    Err(Damage::NotAJournal)
}

/// What follows a record that is incomplete or fails a check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum After {
    /// Zeros to the end of the file.
    Zeros,
    /// No record that counts: a torn tail.
    Torn,
    /// A whole, valid record that counts: damage in the middle.
    Record,
}

/// The part of the file being looked at: bytes from `start` on, read in
/// chunks as asked for and let go of once passed.
struct Window<R> {
    file: R,
    bytes: Vec<u8>,
    /// The file offset of `bytes[0]`.
    start: u64,
    /// The whole file has been read.
    ended: bool,
    /// The most bytes held at once.
    held: usize,
}

impl<R: Read> Window<R> {
    fn new(file: R) -> Window<R> {
        Window {
            file,
            bytes: Vec::new(),
            start: 0,
            ended: false,
            held: 0,
        }
    }

    /// The bytes from offset `at` (not yet released), at least `n` of them
    /// unless the file ends first.
    fn get(&mut self, at: u64, n: usize) -> io::Result<&[u8]> {
        let from = (at - self.start) as usize;
        while self.bytes.len() < from + n && !self.ended {
            let have = self.bytes.len();
            let want = (from + n - have).max(CHUNK);
            self.bytes.resize(have + want, 0);
            let read = loop {
                match self.file.read(&mut self.bytes[have..]) {
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    result => break result,
                }
            };
            let read = read.inspect_err(|_| self.bytes.truncate(have))?;
            self.bytes.truncate(have + read);
            self.ended = read == 0;
            self.held = self.held.max(self.bytes.len());
        }
        Ok(&self.bytes[from.min(self.bytes.len())..])
    }

    /// Lets go of the bytes before `at`, once they are more than a chunk
    /// and most of what is held (so each byte moves a bounded number of
    /// times).
    fn release(&mut self, at: u64) {
        let done = (at - self.start) as usize;
        if done >= CHUNK && done * 2 >= self.bytes.len() {
            self.bytes.drain(..done);
            self.start = at;
            if self.bytes.capacity() > 4 * CHUNK.max(self.bytes.len()) {
                self.bytes.shrink_to(CHUNK.max(self.bytes.len()));
            }
        }
    }

    /// What the bytes at `at` hold, by `version`'s rules, reading as many
    /// as that takes; `None` at the end of the file, `Short` for a record
    /// the file ends inside.
    fn decode(
        &mut self,
        at: u64,
        version: Version,
        checked: &mut u64,
    ) -> io::Result<Option<Decoded<'_>>> {
        let head = self.get(at, version.framing())?;
        if head.is_empty() {
            return Ok(None);
        }
        if let Some(size) = claimed_size(head, version) {
            self.get(at, size)?;
        }
        let bytes = &self.bytes[(at - self.start) as usize..];
        Ok(Some(decode_at(bytes, version, checked)))
    }

    /// What the file holds from `at`, where a record is incomplete or
    /// fails a check, to its end: whether a whole, valid record that
    /// counts starts at any offset after `at`, else whether every byte
    /// from `at` on is zero. In versions 4 and 5 a record counts only if its
    /// batch started after `at`: one whose batch started at or before it
    /// belongs to the batch that `at` is in, which a crash tore (see
    /// "Recovery" in the module header).
    fn after_damage(
        &mut self,
        at: u64,
        version: Version,
        checked: &mut u64,
    ) -> Result<After, ScanError> {
        let io = ScanError::Io;
        let mut zeros = true;
        // The bytes in `at..seen` have been looked at for zeros.
        let mut seen = at;
        let mut from = at;
        loop {
            let held = self.get(from, version.framing()).map_err(io)?;
            if held.is_empty() {
                return Ok(if zeros { After::Zeros } else { After::Torn });
            }
            let end = from + held.len() as u64;
            if seen < end {
                let unseen = &self.bytes[(seen - self.start) as usize..];
                zeros = zeros && unseen.iter().all(|&b| b == 0);
                seen = end;
            }
            if from > at {
                // A record's length is never zero, so none starts where
                // its four bytes would all be zeros: a run of zeros is
                // stepped over to three bytes before the next byte that
                // is not one.
                let held = &self.bytes[(from - self.start) as usize..];
                let next = held.iter().position(|&b| b != 0).unwrap_or(held.len());
                if next >= 4 {
                    from += next as u64 - 3;
                    self.release(from);
                    continue;
                }
                if let Some(Decoded::Record(..)) =
                    self.decode(from, version, checked).map_err(io)?
                {
                    let head = &self.bytes[(from - self.start) as usize..];
                    // Versions 4 and 5: a record of the batch `at` is in
                    // is of the batch the crash tore.
                    let torn = version.batched() && batch_of(head) <= at;
                    if !torn {
                        return Ok(After::Record);
                    }
                }
            }
            from += 1;
            self.release(from);
        }
    }

    /// The file's whole length, reading what is left.
    fn len(&mut self) -> io::Result<u64> {
        while !self.ended {
            let end = self.start + self.bytes.len() as u64;
            self.get(end, CHUNK)?;
            self.release(self.start + self.bytes.len() as u64);
        }
        Ok(self.start + self.bytes.len() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::super::format::{MAX_PAYLOAD, Salt, encode, header, seal, seal_each};
    use super::Lineage;
    use super::*;

    const SALT: Salt = *b"the salt";
    const MIB: usize = 1 << 20;

    /// A version-4 image of `n` puts, each with a name of `name_len` bytes,
    /// each its own batch.
    fn journal(n: i64, name_len: usize) -> Vec<u8> {
        let mut file = header(&SALT, Lineage::default()).to_vec();
        let name = "n".repeat(name_len);
        for id in 0..n {
            let tag = Some("t");
            encode(
                &mut file,
                &Change::Put {
                    id,
                    version: 1,
                    name: &name,
                    tag,
                },
            );
        }
        seal_each(&mut file[HEADER..], &SALT, HEADER as u64);
        file
    }

    /// Reads `file` and checks that it holds `records` good ones and then
    /// a torn tail, read with checksums over at most a few times the
    /// file's bytes.
    fn torn_after(file: &[u8], records: u64, good: usize, what: &str) {
        let mut ids = 0;
        let scan = scan(file, |_| ids += 1).unwrap_or_else(|e| panic!("{what}: {e:?}"));
        assert_eq!((scan.records, ids), (records, records), "{what}");
        assert_eq!(scan.valid_len, good as u64, "{what}");
        assert_eq!(scan.len, file.len() as u64, "{what}");
        assert!(
            scan.checked <= 5 * file.len() as u64,
            "{what}: {} bytes checksummed for a file of {}",
            scan.checked,
            file.len()
        );
    }

    /// A few puts, then `tail`.
    fn with_tail(tail: &[u8]) -> (Vec<u8>, usize) {
        let mut file = journal(3, 10);
        let good = file.len();
        file.extend_from_slice(tail);
        (file, good)
    }

    #[test]
    fn a_megabyte_of_repeated_00_00_08_00_is_a_torn_tail_read_in_linear_work() {
        let (file, good) = with_tail(&[0, 0, 8, 0].repeat(MIB / 4));
        torn_after(&file, 3, good, "00 00 08 00");
    }

    #[test]
    fn a_megabyte_of_records_with_wrong_checks_is_a_torn_tail_read_in_linear_work() {
        // Records under another salt: their lengths' checks fail.
        let mut other = journal(MIB as i64 / 40, 10);
        seal_each(&mut other[HEADER..], b"not this", HEADER as u64);
        let (file, good) = with_tail(&other[HEADER..]);
        torn_after(&file, 3, good, "records under another salt");
        // Records under this salt with a payload byte changed: each
        // believed length costs one checksum over its record.
        let mut bent = journal(MIB as i64 / 40, 10);
        let size = (bent.len() - HEADER) / (MIB / 40);
        for at in (HEADER + size - 1..bent.len()).step_by(size) {
            bent[at] ^= 1;
        }
        let (file, good) = with_tail(&bent[HEADER..]);
        torn_after(&file, 3, good, "records with a changed byte");
    }

    #[test]
    fn a_torn_megabyte_name_full_of_planted_records_is_a_torn_tail() {
        // What a client can send: records sealed under a salt it guessed,
        // back to back, as one name; the crash tears the record holding it.
        let mut planted = journal(MIB as i64 / 40, 10);
        seal_each(&mut planted[HEADER..], &[0; 8], HEADER as u64);
        let name = String::from_utf8_lossy(&planted[HEADER..]).into_owned();
        let mut file = journal(3, 10);
        let good = file.len();
        encode(
            &mut file,
            &Change::Put {
                id: 9,
                version: 1,
                name: &name,
                tag: None,
            },
        );
        seal(&mut file[good..], &SALT, good as u64);
        for cut in [good + 1, good + 20, good + MIB / 2, file.len() - 1] {
            torn_after(&file[..cut], 3, good, &format!("cut at {cut}"));
        }
    }

    #[test]
    fn a_megabyte_of_random_bytes_is_a_torn_tail_read_in_linear_work() {
        let mut state = 0x9E37_79B9_7F4A_7C15_u64;
        let random: Vec<u8> = (0..MIB)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        let (file, good) = with_tail(&random);
        torn_after(&file, 3, good, "random bytes");
    }

    #[test]
    fn damage_before_a_good_record_far_behind_is_still_found() {
        let mut file = journal(3, 10);
        let damaged = file.len();
        file.extend_from_slice(&[0, 0, 8, 0].repeat(MIB / 4));
        let mut last = Vec::new();
        encode(&mut last, &Change::Delete(1));
        seal(&mut last, &SALT, file.len() as u64);
        file.extend_from_slice(&last);
        assert_eq!(
            scan(&file, |_| {}).unwrap_err(),
            Damage::Record {
                record: 4,
                offset: damaged as u64
            }
        );
    }

    #[test]
    fn the_file_is_read_through_a_window_not_whole() {
        let file = journal(100_000, 30);
        assert!(file.len() > 4 * MIB);
        let scan = scan(&file, |_| {}).unwrap();
        assert_eq!(scan.records, 100_000);
        assert!(scan.held <= 3 * CHUNK, "{} bytes held", scan.held);
    }

    #[test]
    fn a_length_over_the_most_any_record_holds_is_never_read_for() {
        let mut file = journal(1, 10);
        let good = file.len();
        let mut record = Vec::new();
        encode(&mut record, &Change::Delete(1));
        record[..4].copy_from_slice(&(MAX_PAYLOAD as u32 + 1).to_le_bytes());
        seal(&mut record, &SALT, good as u64);
        file.extend_from_slice(&record);
        file.resize(file.len() + 3 * CHUNK, 7);
        torn_after(&file, 1, good, "an overlong length");
    }
}
