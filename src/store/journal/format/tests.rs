//! The record and header codec against itself: round trips, what a
//! check covers, and what bytes that are not a record cost.

use super::*;

const SALT: Salt = [1, 2, 3, 4, 5, 6, 7, 8];

fn sealed(change: &Change<'_>, salt: &Salt) -> Vec<u8> {
    let mut record = Vec::new();
    encode(&mut record, change);
    seal(&mut record, salt, HEADER as u64);
    record
}

const LINEAGE: Lineage = Lineage {
    nonce: 0x0123_4567_89AB_CDEF,
    mark: 77,
};

#[test]
fn a_header_reads_back_its_salt_and_lineage_and_no_byte_of_it_changes_unseen() {
    let bytes = header(&SALT, LINEAGE);
    assert_eq!(&bytes[..8], MAGIC);
    assert_eq!(read_header(&bytes), Some((SALT, LINEAGE)));
    for at in 0..HEADER {
        let mut bent = bytes;
        bent[at] ^= 0x20;
        assert_eq!(read_header(&bent), None, "byte {at}");
    }
}

#[test]
fn a_sealed_record_decodes_to_its_change_and_size() {
    let changes = [
        Change::Put {
            id: -5,
            version: 1 << 40,
            name: "fern é",
            tag: Some("green"),
        },
        Change::Put {
            id: i64::MAX,
            version: u64::MAX,
            name: "",
            tag: None,
        },
        Change::Delete(7),
    ];
    for change in changes {
        let record = sealed(&change, &SALT);
        assert_eq!(record.len() as u64, change.size());
        let file = [&header(&SALT, LINEAGE)[..], &record].concat();
        assert_eq!(
            decode(&file, HEADER, Version::V5(SALT)),
            Some((change, record.len()))
        );
        assert_eq!(batch_of(&record), HEADER as u64);
        // The batch is under the check: another one fails it.
        let mut moved = file.clone();
        moved[HEADER + 16] ^= 1;
        assert_eq!(decode(&moved, HEADER, Version::V5(SALT)), None);
        // Version 4's record is version 5's without a put's version
        // (read as 0), its checks over the rest.
        let mut payload = record[FRAMING..].to_vec();
        let mut unversioned = change;
        if let Change::Put { version, .. } = &mut unversioned {
            payload.drain(9..17);
            *version = 0;
        }
        let len = (payload.len() as u32).to_le_bytes();
        let batch = (HEADER as u64).to_le_bytes();
        let record = [
            &len[..],
            &len_check(&SALT, &len).to_le_bytes(),
            &batch_check(&SALT, &len, &batch, &payload).to_le_bytes(),
            &batch,
            &payload,
        ]
        .concat();
        let size = record.len();
        assert_eq!(
            decode(&record, 0, Version::V4(SALT)),
            Some((unversioned, size))
        );
        if unversioned != change {
            assert_eq!(decode(&record, 0, Version::V5(SALT)), None);
        }
        // Version 3's record is version 4's without the batch, its
        // check over the rest.
        let mut v3 = [&record[..16], &record[24..]].concat();
        let check = check(&SALT, &v3[..4], &v3[16..]);
        v3[8..16].copy_from_slice(&check.to_le_bytes());
        let size = v3.len();
        assert_eq!(decode(&v3, 0, Version::V3(SALT)), Some((unversioned, size)));
    }
}

#[test]
fn bytes_that_are_not_a_record_cost_no_checksum_over_what_they_claim() {
    let mut checked = 0;
    // A length over the most any record holds: refused on sight.
    let mut huge = sealed(&Change::Delete(7), &SALT);
    huge[..4].copy_from_slice(&(MAX_PAYLOAD as u32 + 1).to_le_bytes());
    huge.resize(MAX_PAYLOAD + 64, 0);
    for version in [
        Version::V1,
        Version::V2(SALT),
        Version::V3(SALT),
        Version::V4(SALT),
        Version::V5(SALT),
    ] {
        assert_eq!(decode_at(&huge, version, &mut checked), Decoded::Bad);
    }
    // Versions 3 to 5 checked the length's own check, four bytes each.
    assert!(checked <= 12, "{checked}");
    // A believable length whose own check fails: four bytes checked.
    let mut bent = sealed(&Change::Delete(7), &SALT);
    bent[0] = 200;
    bent.resize(400, 0);
    checked = 0;
    assert_eq!(
        decode_at(&bent, Version::V5(SALT), &mut checked),
        Decoded::Bad
    );
    assert_eq!(checked, 4);
    // The repeated bytes 00 00 08 00 claim 512 KiB at every offset.
    let tail: Vec<u8> = [0, 0, 8, 0].repeat(256 * 1024);
    checked = 0;
    for at in 0..tail.len() {
        let _ = decode_at(&tail[at..], Version::V5(SALT), &mut checked);
        let _ = decode_at(&tail[at..], Version::V2(SALT), &mut checked);
    }
    assert!(checked <= 4 * tail.len() as u64, "{checked}");
}

#[test]
fn a_record_cut_short_asks_for_the_bytes_it_lacks() {
    let record = sealed(&Change::Delete(7), &SALT);
    let mut checked = 0;
    for cut in 0..record.len() {
        let need = if cut < 24 { 24 } else { record.len() };
        let version = Version::V5(SALT);
        assert_eq!(
            decode_at(&record[..cut], version, &mut checked),
            Decoded::Short(need),
            "cut at {cut}"
        );
    }
}

#[test]
fn a_record_checks_out_only_under_its_own_files_salt() {
    let record = sealed(&Change::Delete(7), &SALT);
    let mut other = SALT;
    for byte in 0..SALT.len() {
        other[byte] ^= 0x10;
        assert_eq!(decode(&record, 0, Version::V5(other)), None);
        other = SALT;
    }
    assert_eq!(decode(&record, 0, Version::V1), None);
    assert_eq!(decode(&record, 0, Version::V2(SALT)), None);
    assert_eq!(decode(&record, 0, Version::V3(SALT)), None);
    assert_eq!(
        decode(&record, 0, Version::V5(SALT)),
        Some((Change::Delete(7), record.len()))
    );
}

#[test]
fn sealing_bytes_that_are_not_whole_records_stops_without_panicking() {
    let mut bytes = sealed(&Change::Delete(7), &SALT);
    bytes.extend_from_slice(&[200, 0, 0, 0, 1, 2]);
    let whole = bytes[..bytes.len() - 6].to_vec();
    seal(&mut bytes, &SALT, HEADER as u64);
    assert_eq!(&bytes[..whole.len()], &whole[..]);
    seal(&mut [0xFF; 3], &SALT, 0);
}

#[test]
fn the_salt_stays_out_of_debug_output() {
    assert_eq!(format!("{:?}", Version::V2(*b"SECRET!!")), "V2(salt)");
    assert_eq!(format!("{:?}", Version::V3(*b"SECRET!!")), "V3(salt)");
    assert_eq!(format!("{:?}", Version::V4(*b"SECRET!!")), "V4(salt)");
    assert_eq!(format!("{:?}", Version::V5(*b"SECRET!!")), "V5(salt)");
}
