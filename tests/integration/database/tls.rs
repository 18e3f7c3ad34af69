//! TLS to PostgreSQL: the cluster of scripts/with-postgres.sh serves TLS
//! with a certificate for 127.0.0.1 only, from a test CA
//! (`PLANTSTORE_TEST_PG_CA`). plantstore reads `sslmode` (`verify-full`,
//! `verify-ca` included) and `sslrootcert` itself; whether a connection is
//! encrypted is asked of the server (`pg_stat_ssl`).

use plantstore::database::Connect;
use plantstore::dbconfig::DatabaseConfig;

use crate::process::binary::run_to_exit;
use crate::support::{AUTH, FreshDatabase, JSON, TOKEN, TempDir, TestServer, config};

/// The test CA's certificate.
fn test_ca() -> String {
    std::env::var("PLANTSTORE_TEST_PG_CA").expect(
        "PLANTSTORE_TEST_PG_CA is not set: run the tests of the postgres feature through \
         scripts/with-postgres.sh",
    )
}

/// `database`'s URL, reached as `host`, with `query`.
fn url(database: &FreshDatabase, host: &str, query: &str) -> String {
    let url = database.url.replace("@127.0.0.1:", &format!("@{host}:"));
    format!("{url}?{query}")
}

/// Whether a connection made as `url` says is encrypted; the error text
/// if none can be made.
fn encrypted(url: &str) -> Result<bool, String> {
    let config = DatabaseConfig::parse(url, 1)?;
    let mut client = config.connect_client().map_err(|e| e.to_string())?;
    let row = client
        .query_one(
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .map_err(|e| e.to_string())?;
    Ok(row.get(0))
}

#[test]
fn verify_full_connects_by_the_certificates_name_and_the_store_works_over_it() {
    let database = FreshDatabase::new();
    let ca = test_ca();
    let verified = url(
        &database,
        "127.0.0.1",
        &format!("sslmode=verify-full&sslrootcert={ca}"),
    );
    assert_eq!(encrypted(&verified), Ok(true));
    let parsed = DatabaseConfig::parse(&verified, 2).unwrap();
    let server = TestServer::with(plantstore::config::Config {
        database: Some(parsed),
        ..config()
    });
    let made = server.send(
        "POST",
        "/plants",
        &[AUTH, JSON],
        r#"{"id":1,"name":"over TLS"}"#,
    );
    assert_eq!(made.status, 200);
    let stored: i64 = database
        .client()
        .query_one("SELECT count(*) FROM plants WHERE id = 1", &[])
        .unwrap()
        .get(0);
    assert_eq!(stored, 1);
    let read = server.send("GET", "/plants/1", &[AUTH], "");
    assert!(String::from_utf8_lossy(&read.body).contains("over TLS"));
}

#[test]
fn each_sslmode_verifies_what_libpq_would() {
    let database = FreshDatabase::new();
    let ca = test_ca();
    // The certificate names 127.0.0.1, not localhost.
    let wrong_name = url(
        &database,
        "localhost",
        &format!("sslmode=verify-full&sslrootcert={ca}"),
    );
    let refused = encrypted(&wrong_name).unwrap_err();
    assert!(refused.contains("certificate"), "{refused}");
    let any_name = url(
        &database,
        "localhost",
        &format!("sslmode=verify-ca&sslrootcert={ca}"),
    );
    assert_eq!(encrypted(&any_name), Ok(true));
    assert_eq!(
        encrypted(&url(&database, "localhost", "sslmode=require")),
        Ok(true)
    );
    assert_eq!(
        encrypted(&url(&database, "127.0.0.1", "sslmode=prefer")),
        Ok(true)
    );
    assert_eq!(
        encrypted(&url(&database, "127.0.0.1", "sslmode=disable")),
        Ok(false)
    );

    // A CA that did not sign the server's certificate.
    let other = TempDir::new("pg-other-ca");
    let made = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
        ])
        .args(["-nodes", "-days", "2", "-subj", "/CN=another CA", "-keyout"])
        .arg(other.join("ca.key"))
        .arg("-out")
        .arg(other.join("ca.pem"))
        .output()
        .expect("openssl runs");
    assert!(made.status.success());
    let other_ca = other.join("ca.pem").display().to_string();
    let untrusted = url(
        &database,
        "127.0.0.1",
        &format!("sslmode=verify-full&sslrootcert={other_ca}"),
    );
    let refused = encrypted(&untrusted).unwrap_err();
    assert!(refused.contains("certificate"), "{refused}");
    // sslrootcert with require verifies the chain, as libpq does.
    let require_root = url(
        &database,
        "127.0.0.1",
        &format!("sslmode=require&sslrootcert={other_ca}"),
    );
    assert!(encrypted(&require_root).is_err());
}

#[test]
fn a_server_that_cannot_verify_the_database_does_not_start_and_says_why() {
    let database = FreshDatabase::new();
    let wrong_name = url(
        &database,
        "localhost",
        &format!("sslmode=verify-full&sslrootcert={}", test_ca()),
    );
    let (code, stderr) = run_to_exit(
        &["--database", &wrong_name],
        Some(TOKEN),
        crate::support::PATIENCE,
    );
    assert_ne!(code, Some(0), "{stderr}");
    assert!(code.is_some(), "still running: {stderr}");
    assert!(stderr.contains("certificate"), "{stderr}");
    assert!(
        !stderr.contains(super::start::password(&database.url)),
        "{stderr}"
    );
}
