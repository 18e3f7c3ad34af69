//! The change feed's tickets on a shared database: instances that start
//! together agree on one key (stored once), so a ticket minted by one
//! opens the feed on another; deleting the key and reloading rotates it,
//! and the old key's tickets are refused.

use std::sync::Arc;
use std::thread;

use crate::api::changes::{Feed, plant_body};
use crate::api::tickets::mint;
use crate::support::{AUTH, FreshDatabase, TestServer, config};

/// The key rows the database holds.
fn keys(database: &FreshDatabase) -> Vec<Vec<u8>> {
    let rows = database
        .client()
        .query("SELECT key FROM plantstore_key", &[])
        .expect("plantstore_key exists");
    rows.iter().map(|row| row.get(0)).collect()
}

/// Whether `ticket` opens the feed on `server`.
fn opens(server: &TestServer, ticket: &str) -> bool {
    let query = format!("?ticket={ticket}");
    match Feed::try_open_with(server.addr, &[], &query) {
        Ok(_) => true,
        Err(head) if head.starts_with("HTTP/1.1 401") => false,
        Err(head) => panic!("{head}"),
    }
}

#[test]
fn instances_started_together_share_one_key_and_accept_each_others_tickets() {
    let database = Arc::new(FreshDatabase::new());
    let starting: Vec<_> = (0..3)
        .map(|_| {
            let config = database.config(config());
            thread::spawn(move || TestServer::with(config))
        })
        .collect();
    let servers: Vec<TestServer> = starting.into_iter().map(|s| s.join().unwrap()).collect();
    assert_eq!(keys(&database).len(), 1, "one key, stored once");
    assert_eq!(keys(&database)[0].len(), 32);
    for (i, minter) in servers.iter().enumerate() {
        let (ticket, _, _) = mint(minter, AUTH);
        for (j, server) in servers.iter().enumerate() {
            assert!(opens(server, &ticket), "minted by {i}, refused by {j}");
        }
    }
    // A stream opened on one instance with another's ticket follows the
    // changes made on a third.
    let (ticket, _, _) = mint(&servers[0], AUTH);
    let query = format!("?ticket={ticket}");
    let mut feed = Feed::try_open_with(servers[1].addr, &[], &query).unwrap();
    feed.opening();
    assert_eq!(
        servers[2].create(&plant_body(1, "shared", None)).status,
        200
    );
    assert_eq!(feed.next_event().data()["name"], "shared");
}

#[test]
fn deleting_the_key_and_reloading_rotates_it() {
    let database = FreshDatabase::new();
    let first = TestServer::with(database.config(config()));
    let second = TestServer::with(database.config(config()));
    let (old, _, _) = mint(&first, AUTH);
    let before = keys(&database);
    database
        .client()
        .execute("DELETE FROM plantstore_key", &[])
        .unwrap();
    // A reload without a token file still reads the key again.
    first.reload();
    let after = keys(&database);
    assert_eq!(after.len(), 1);
    assert_ne!(after, before, "a new key");
    assert!(!opens(&first, &old), "the old key's ticket is refused");
    assert!(opens(&second, &old), "until the other instance reloads");
    second.reload();
    assert_eq!(keys(&database), after, "read, not made again");
    assert!(!opens(&second, &old));
    let (new, _, _) = mint(&second, AUTH);
    assert!(opens(&first, &new) && opens(&second, &new));
}
