//! Tests of `listing.rs`: where a page ends, and the fields shown.

use super::*;

fn plants(count: i64) -> Vec<(i64, Plant)> {
    (0..count)
        .map(|id| {
            let name = format!("plant {id}");
            (id, Plant { name, tag: None })
        })
        .collect()
}

fn ids(body: &[u8]) -> Vec<i64> {
    let records: Vec<serde_json::Value> = serde_json::from_slice(body).expect("a JSON array");
    records.iter().map(|r| r["id"].as_i64().unwrap()).collect()
}

/// The page `page_response` would send for `items` and a `cap`, made
/// in pieces of `piece` bytes, and how many records it holds; the
/// length settled beforehand must be the length made.
fn json_page(items: &[(i64, Plant)], cap: usize) -> (Vec<u8>, usize) {
    let (included, bytes) = fitting(items, Budget::of(cap));
    let whole = |piece: usize| {
        let mut records = Records {
            items: Vec::from(&items[..included]).into_iter(),
            fields: Fields::ALL,
            opened: false,
        };
        let mut body = Vec::new();
        let mut pieces = 1;
        while records.fill(&mut body, piece) == Fill::More {
            pieces += 1;
        }
        (body, pieces)
    };
    let (body, one) = whole(usize::MAX);
    assert_eq!((body.len(), one), (bytes, 1));
    let (pieced, pieces) = whole(100);
    assert_eq!(pieced, body);
    assert!(included < 2 || pieces > 1);
    (body, included)
}

#[test]
fn a_page_ends_before_the_record_that_would_pass_the_cap() {
    let items = plants(10);
    let (whole, all) = json_page(&items, usize::MAX);
    assert_eq!((ids(&whole), all), ((0..10).collect(), 10));
    assert_eq!(whole, serde_json::to_vec(&records(&items)).unwrap());
    assert_eq!(json_page(&items, whole.len()), (whole.clone(), 10));
    let (cut, nine) = json_page(&items, whole.len() - 1);
    assert_eq!((ids(&cut), nine), ((0..9).collect(), 9));
    assert!(cut.len() < whole.len());
}

#[test]
fn a_page_holds_at_least_one_record_however_large() {
    let (body, one) = json_page(&plants(3), 1);
    assert_eq!((ids(&body), one), (vec![0], 1));
    assert_eq!(json_page(&[], 1), (b"[]".to_vec(), 0));
}

#[test]
fn a_default_page_of_the_largest_plants_fits() {
    // Control characters are the longest in JSON: six bytes each.
    let limits = crate::model::TextLimits::default();
    let plant = Plant {
        name: "\u{1}".repeat(limits.name),
        tag: Some("\u{1}".repeat(limits.tag)),
    };
    let items: Vec<(i64, Plant)> = (0..100).map(|i| (i64::MIN + i, plant.clone())).collect();
    let (body, all) = json_page(&items, PAGE_BYTES);
    assert_eq!(all, 100, "{} bytes", body.len());
    assert!(body.len() > 100 * 6 * (limits.name + limits.tag));
}

fn records(items: &[(i64, Plant)]) -> Vec<PlantRecord<'_>> {
    items
        .iter()
        .map(|(id, p)| PlantRecord::new(*id, p))
        .collect()
}

#[test]
fn a_record_of_some_fields_is_as_long_as_it_is_written() {
    let plants = [
        (
            0,
            Plant {
                name: "a\"b".into(),
                tag: Some("t\u{1}".into()),
            },
        ),
        (
            -1234,
            Plant {
                name: String::new(),
                tag: None,
            },
        ),
        (
            i64::MIN,
            Plant {
                name: "ü".into(),
                tag: Some(String::new()),
            },
        ),
    ];
    for bits in 1..8u8 {
        let fields = Fields {
            id: bits & 1 != 0,
            name: bits & 2 != 0,
            tag: bits & 4 != 0,
        };
        for (id, plant) in &plants {
            let mut out = Vec::new();
            write_record(&mut out, *id, plant, fields);
            assert_eq!(
                fields
                    .budget(0)
                    .record_len(*id, &plant.name, plant.tag.as_deref()),
                out.len(),
                "{}",
                String::from_utf8_lossy(&out)
            );
            let value: serde_json::Value = serde_json::from_slice(&out).unwrap();
            let object = value.as_object().unwrap();
            assert_eq!(object.contains_key("id"), fields.id);
            assert_eq!(object.contains_key("name"), fields.name);
            assert_eq!(
                object.contains_key("tag"),
                fields.tag && plant.tag.is_some()
            );
            if fields.id {
                assert_eq!(object["id"], *id);
            }
        }
    }
}
