//! A fresh PostgreSQL schema for a bench that measures the PostgreSQL
//! store, on the machine's server (`PILOTAGE_TEST_POSTGRES`, default
//! `postgres://postgres@127.0.0.1:5432/test`, as the tests use). Shared by
//! the catalog and deployments benches (`mod pg_schema;`).

use sqlx::Connection as _;

/// The server's URL.
pub fn server_url() -> String {
    std::env::var("PILOTAGE_TEST_POSTGRES").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// A schema for this process named `pilotage_bench_<name>_<pid>`, made
/// empty (dropped first if a killed run left it); returns a database URL
/// whose connections use it, and the schema's name for [`drop`].
///
/// # Errors
/// A message when the server cannot be reached or refuses the statements.
pub async fn fresh(name: &str) -> Result<(String, String), String> {
    let server = server_url();
    let schema = format!("pilotage_bench_{name}_{}", std::process::id());
    let mut connection = sqlx::PgConnection::connect(&server).await.map_err(|e| e.to_string())?;
    for statement in [format!("DROP SCHEMA IF EXISTS {schema} CASCADE"), format!("CREATE SCHEMA {schema}")] {
        sqlx::query(sqlx::AssertSqlSafe(statement)).execute(&mut connection).await.map_err(|e| e.to_string())?;
    }
    let separator = if server.contains('?') { '&' } else { '?' };
    Ok((format!("{server}{separator}options=-c%20search_path%3D{schema}"), schema))
}

/// Drops `schema`; a failure is printed, not returned (a bench's figures
/// stand without its clean-up).
pub async fn drop(schema: &str) {
    let dropped = match sqlx::PgConnection::connect(&server_url()).await {
        Ok(mut connection) => sqlx::query(sqlx::AssertSqlSafe(format!("DROP SCHEMA IF EXISTS {schema} CASCADE")))
            .execute(&mut connection)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string()),
        Err(error) => Err(error.to_string()),
    };
    if let Err(error) = dropped {
        eprintln!("could not drop schema {schema}: {error}");
    }
}
