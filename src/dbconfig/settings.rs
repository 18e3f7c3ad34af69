//! `--database URL` and `--database-pool N`, checked into a
//! [`DatabaseConfig`]: the client's timeouts set, TLS as the URL asks for
//! it (`sslmode.rs`), the password never shown (`describe`, `Debug`).

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use super::sslmode::SslSettings;
use rustls::ClientConfig;

/// The longest any statement may run (PostgreSQL's `statement_timeout`).
pub const STATEMENT_TIMEOUT: Duration = Duration::from_secs(5);
/// Connecting gives up after this.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Data unacknowledged by the server for this long ends the connection
/// (`TCP_USER_TIMEOUT`).
pub const TCP_TIMEOUT: Duration = Duration::from_secs(5);

/// Default `--database-pool`.
pub const DEFAULT_POOL: usize = 8;

/// `--database` and `--database-pool`, checked.
#[derive(Clone)]
pub struct DatabaseConfig {
    client: postgres::Config,
    /// Workers, one connection each.
    pub pool: usize,
    /// TLS as `sslmode` and `sslrootcert` say (see `sslmode.rs`).
    tls: Arc<ClientConfig>,
}

impl DatabaseConfig {
    /// Parses a `postgres://user:pass@host:port/db` URL (or a libpq
    /// `key=value` string); the client's timeouts are set here.
    pub fn parse(url: &str, pool: usize) -> Result<DatabaseConfig, String> {
        // The parser's own words may quote part of the text, password
        // included: never shown.
        // The client library keeps a malformed escape (`%+a`) as text,
        // so a password or name would silently be something else.
        let is_url = url.starts_with("postgres://") || url.starts_with("postgresql://");
        if is_url && !crate::percent::well_formed(url) {
            return Err("a % in the URL must start an escape of two hex digits \
                 (write a % itself as %25)"
                .into());
        }
        let (url, ssl) = SslSettings::take(url)?;
        let tls = ssl.client_config()?;
        let mut client = postgres::Config::from_str(&url).map_err(|_| {
            "cannot be read as postgres://user:password@host:port/dbname or as key=value \
             settings (the text is not shown: it may hold the password)"
                .to_string()
        })?;
        if client.get_hosts().is_empty() {
            return Err("no host in it".into());
        }
        // An `@` left in a password ends the credentials early and puts the
        // rest of the password in the host: never log that.
        let at_in_host = client.get_hosts().iter().any(|host| match host {
            postgres::config::Host::Tcp(name) => name.contains('@'),
            postgres::config::Host::Unix(_) => false,
        });
        let at_in_name = client.get_dbname().is_some_and(|name| name.contains('@'));
        if at_in_host || at_in_name {
            return Err("an @ in the password must be written %40".into());
        }
        let timeout = format!("-c statement_timeout={}", STATEMENT_TIMEOUT.as_millis());
        let options = match client.get_options() {
            Some(theirs) => format!("{theirs} {timeout}"),
            None => timeout,
        };
        client
            .options(&options)
            .application_name("plantstore")
            .connect_timeout(CONNECT_TIMEOUT)
            .tcp_user_timeout(TCP_TIMEOUT)
            .keepalives_idle(Duration::from_secs(10))
            .keepalives_interval(Duration::from_secs(2))
            .keepalives_retries(3);
        Ok(DatabaseConfig { client, pool, tls })
    }

    /// Where it points, without the password: `user@host:port/db`.
    pub fn describe(&self) -> String {
        let host = match self.client.get_hosts().first() {
            Some(postgres::config::Host::Tcp(name)) => name.clone(),
            Some(postgres::config::Host::Unix(path)) => path.display().to_string(),
            None => String::new(),
        };
        let port = self.client.get_ports().first().copied().unwrap_or(5432);
        format!(
            "{}@{host}:{port}/{}",
            self.client.get_user().unwrap_or(""),
            self.client
                .get_dbname()
                .or(self.client.get_user())
                .unwrap_or("")
        )
    }

    /// The client library's configuration: the URL's, timeouts set.
    pub fn client(&self) -> &postgres::Config {
        &self.client
    }

    /// The TLS client configuration the URL's `sslmode` and `sslrootcert`
    /// make.
    pub fn tls(&self) -> Arc<ClientConfig> {
        Arc::clone(&self.tls)
    }
}

impl fmt::Debug for DatabaseConfig {
    // Never the password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DatabaseConfig")
            .field("at", &self.describe())
            .field("pool", &self.pool)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_is_checked_and_its_password_never_shown() {
        let config = DatabaseConfig::parse("postgres://ann:s3cret@db.example:6543/plants", 3)
            .expect("a good URL");
        assert_eq!(config.describe(), "ann@db.example:6543/plants");
        assert_eq!(config.pool, 3);
        assert!(!format!("{config:?}").contains("s3cret"));
        for bad in [
            "postgres://qqu:pw1@xq@db/x",
            "postgres://qqu:pw2@zq/w@db/x",
            "postgres://qqu@db:notaport/x",
            "mysql://x",
            "host=/tmp user=",
            "host=db password=se cret=1",
            // Regression: a sign is no hex digit (`%+a` was a line feed
            // in sslrootcert, and kept as text by the client library).
            "postgres://qqu:xq%+a@db/x",
            "postgres://qqu@db/x?sslrootcert=%+0",
        ] {
            let why = DatabaseConfig::parse(bad, 1).expect_err(bad);
            // No part of the text, the password's included, in the message.
            for part in ["xq", "zq", "qqu", "cret", "notaport", "mysql"] {
                assert!(!why.contains(part), "{bad}: {why}");
            }
        }
    }
}
