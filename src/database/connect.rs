//! How the database connects with a [`DatabaseConfig`] (`crate::dbconfig`,
//! which checked the URL): a worker's connection, the heartbeat's, the
//! change feed's follower's, and a plain client for start-up work, each
//! over the TLS connector of `tls_connector.rs`.

use super::tls_connector::Rustls;
use super::{Connection, DbError};
use crate::dbconfig::DatabaseConfig;

/// Connecting with a checked `--database` URL.
pub trait Connect {
    /// A worker's connection.
    fn connect(&self) -> Result<Connection, DbError>;
    /// The heartbeat's client, named apart from the workers' in
    /// `pg_stat_activity`.
    fn connect_health(&self) -> Result<postgres::Client, DbError>;
    /// The change feed's follower's connection, named apart from the
    /// workers' in `pg_stat_activity`.
    fn connect_follower(&self) -> Result<Connection, DbError>;
    /// A plain client, for start-up work (the schema, the seed).
    fn connect_client(&self) -> Result<postgres::Client, DbError>;
}

impl Connect for DatabaseConfig {
    fn connect(&self) -> Result<Connection, DbError> {
        Connection::open(self.client(), Rustls(self.tls()))
    }

    fn connect_health(&self) -> Result<postgres::Client, DbError> {
        let mut config = self.client().clone();
        config.application_name("plantstore-health");
        Ok(config.connect(Rustls(self.tls()))?)
    }

    fn connect_follower(&self) -> Result<Connection, DbError> {
        let mut config = self.client().clone();
        config.application_name("plantstore-feed");
        Connection::open(&config, Rustls(self.tls()))
    }

    fn connect_client(&self) -> Result<postgres::Client, DbError> {
        Ok(self.client().connect(Rustls(self.tls()))?)
    }
}
