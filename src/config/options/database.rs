//! The PostgreSQL store's flags (the `postgres` feature): `--database`
//! or `--database-file`, and `--database-pool`.

use std::fmt;
use std::path::PathBuf;

use super::super::Args;
use crate::dbconfig::{DEFAULT_POOL, DatabaseConfig};

/// A database flag that cannot be used.
#[derive(Debug)]
pub enum DatabaseError {
    /// `--database-pool 0`.
    Zero(&'static str),
    /// `--database` cannot be used (why; never the password).
    Url(String),
    /// A flag that needs `--database` without it.
    NeedsDatabase(&'static str),
    /// `--database-file` cannot be used (the file, why; never its text).
    File(PathBuf, String),
    /// `--database` with `--database-file`.
    TwoSources,
    /// `--database` with `--data`.
    DataAndDatabase,
}

impl fmt::Display for DatabaseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DatabaseError::Zero(flag) => write!(f, "{flag} must be greater than 0"),
            DatabaseError::Url(why) => write!(f, "--database: {why}"),
            DatabaseError::File(p, why) => write!(f, "database file {}: {why}", p.display()),
            DatabaseError::TwoSources => {
                f.write_str("give --database or --database-file, not both")
            }
            DatabaseError::NeedsDatabase(flag) => write!(f, "{flag} needs --database URL"),
            DatabaseError::DataAndDatabase => f.write_str(
                "give --data or --database, not both: the plants are in a journal file or in \
                 the database",
            ),
        }
    }
}

/// `--database` (or `--database-file`) and `--database-pool`, and that
/// `--data` is not given too; with a warning when the file is readable by
/// others than its owner.
pub(in super::super) fn database(
    args: &Args,
) -> Result<(Option<DatabaseConfig>, Option<String>), DatabaseError> {
    let pool = match args.database_pool {
        Some(0) => return Err(DatabaseError::Zero("--database-pool")),
        Some(n) => Some(n),
        None => None,
    };
    let (url, warning) = match (&args.database, &args.database_file) {
        (Some(_), Some(_)) => return Err(DatabaseError::TwoSources),
        (Some(url), None) => (url.clone(), None),
        (None, Some(path)) => {
            let (url, warning) = database_file(path)?;
            let pool = pool.unwrap_or(DEFAULT_POOL);
            DatabaseConfig::parse(&url, pool)
                .map_err(|why| DatabaseError::File(path.clone(), why))?;
            (url, warning)
        }
        (None, None) => {
            return match pool {
                Some(_) => Err(DatabaseError::NeedsDatabase("--database-pool")),
                None => Ok((None, None)),
            };
        }
    };
    let pool = pool.unwrap_or(DEFAULT_POOL);
    let database = DatabaseConfig::parse(&url, pool).map_err(DatabaseError::Url)?;
    if args.data.is_some() {
        return Err(DatabaseError::DataAndDatabase);
    }
    Ok((Some(database), warning))
}

/// The URL in `--database-file`: its one line that is neither blank nor a
/// `#` comment, read as every file taken at start (a regular file, at
/// most 16 MiB); and a warning when group or others may read it.
fn database_file(path: &std::path::Path) -> Result<(String, Option<String>), DatabaseError> {
    use std::os::unix::fs::PermissionsExt;
    let refused = |why: String| DatabaseError::File(path.to_path_buf(), why);
    let text = crate::os::read_text(path).map_err(|e| refused(e.to_string()))?;
    let mut lines = text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'));
    let url = match (lines.next(), lines.next()) {
        (Some(url), None) => url.to_string(),
        (None, _) => return Err(refused("holds no URL".into())),
        (Some(_), Some(_)) => {
            return Err(refused("holds more than one line besides comments".into()));
        }
    };
    let mode = std::fs::metadata(path).map_or(0, |m| m.permissions().mode());
    let warning = (mode & 0o077 != 0).then(|| {
        format!(
            "database file {} may be read by others (mode {:o}); chmod 600 it, since it holds \
             the database password",
            path.display(),
            mode & 0o777
        )
    });
    Ok((url, warning))
}
