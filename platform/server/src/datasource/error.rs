//! How a data source fails at the host's end ([`DataSourceError`]): its
//! configuration, reaching PostgreSQL, or a statement of the host's own
//! (introspection, the demo set-up, the transaction envelope).

/// Why a data source could not do what was asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DataSourceError {
    /// Occurs when the configuration is unusable (a URL that does not
    /// parse, an empty schema list).
    #[error("data source configuration: {0}")]
    Config(String),
    /// Occurs when PostgreSQL cannot be reached within the connect timeout
    /// (down, refusing, wrong credentials).
    #[error("PostgreSQL is unreachable at {target}: {message}")]
    Unreachable {
        /// host:port/database, without credentials.
        target: String,
        /// The driver's message.
        message: String,
    },
    /// Occurs when PostgreSQL reports an error for a host statement
    /// (introspection, demo set-up, the transaction envelope).
    #[error("PostgreSQL error: {0}")]
    Database(String),
    /// Occurs when the tenant's egress confinement refuses the database's
    /// address (`crate::egress`).
    #[error(transparent)]
    Refused(crate::egress::DestinationRefused),
}

impl DataSourceError {
    /// Classifies a sqlx error: connection-level failures are
    /// [`DataSourceError::Unreachable`], the rest [`DataSourceError::Database`].
    pub fn from_sqlx(target: &str, error: sqlx::Error) -> DataSourceError {
        match error {
            sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::Tls(_) | sqlx::Error::PoolClosed => {
                DataSourceError::Unreachable { target: target.to_owned(), message: error.to_string() }
            }
            sqlx::Error::Database(database) => DataSourceError::Database(database_message(database.as_ref())),
            other => DataSourceError::Database(other.to_string()),
        }
    }
}

/// A database error as one line: message, SQLSTATE and detail.
pub fn database_message(error: &dyn sqlx::error::DatabaseError) -> String {
    match error.code() {
        Some(code) => format!("{} (SQLSTATE {code})", error.message()),
        None => error.message().to_owned(),
    }
}
