//! The demo sales database: schema `pilotage_demo` with `customers`,
//! `orders` and `order_lines` (40 customers, 300 orders, 750 lines,
//! generated deterministically), and a login role `pilotage_demo_reader`
//! that may only read them, so the demo's catalog entries are `safe`.
//!
//! [`ensure_demo_database`] is idempotent and safe to call concurrently:
//! it works inside one transaction holding an advisory lock, creates what
//! is missing and fills the tables only when they are empty.

use std::time::Duration;

use sqlx::postgres::PgPoolOptions;
use sqlx::{Connection, Executor};

use super::DataSourceError;
use super::postgres::PostgresConfig;

/// The demo schema.
pub const SCHEMA: &str = "pilotage_demo";
/// The demo's read-only login role.
pub const READER: &str = "pilotage_demo_reader";
/// The administrator URL the demo uses by default: the machine's
/// PostgreSQL, database `test`, trust authentication.
pub const DEFAULT_ADMIN_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// Advisory-lock key serializing concurrent set-ups.
const LOCK_KEY: i64 = 0x5049_4c4f_5441_4745;

const SETUP: &str = r#"
CREATE SCHEMA IF NOT EXISTS pilotage_demo;
CREATE TABLE IF NOT EXISTS pilotage_demo.customers (
    id integer PRIMARY KEY,
    name text NOT NULL,
    email text NOT NULL UNIQUE,
    country text NOT NULL,
    created_at timestamptz NOT NULL
);
COMMENT ON TABLE pilotage_demo.customers IS 'Customers of the demo shop: one row per customer.';
CREATE TABLE IF NOT EXISTS pilotage_demo.orders (
    id integer PRIMARY KEY,
    customer_id integer NOT NULL REFERENCES pilotage_demo.customers (id),
    ordered_at timestamptz NOT NULL,
    status text NOT NULL CHECK (status IN ('pending', 'shipped', 'delivered', 'cancelled')),
    total_amount numeric(10, 2) NOT NULL
);
COMMENT ON TABLE pilotage_demo.orders IS 'Orders: one row per order; total_amount is the sum of its lines.';
CREATE TABLE IF NOT EXISTS pilotage_demo.order_lines (
    id integer PRIMARY KEY,
    order_id integer NOT NULL REFERENCES pilotage_demo.orders (id),
    product text NOT NULL,
    quantity integer NOT NULL CHECK (quantity > 0),
    unit_price numeric(10, 2) NOT NULL
);
COMMENT ON TABLE pilotage_demo.order_lines IS 'Order lines: one row per product in an order.';
"#;

const FILL: &str = r#"
INSERT INTO pilotage_demo.customers (id, name, email, country, created_at)
SELECT i,
       (ARRAY['Ada','Grace','Alan','Edsger','Barbara','Donald','Frances','John','Margaret','Ken'])[1 + i % 10]
         || ' ' || (ARRAY['Lovelace','Hopper','Turing','Dijkstra','Liskov','Knuth','Allen','Backus'])[1 + (i * 7) % 8],
       'customer' || i || '@example.com',
       (ARRAY['FR','DE','US','JP','BR','IN'])[1 + i % 6],
       timestamptz '2024-06-01 00:00:00+00' + i * interval '3 days'
FROM generate_series(1, 40) AS i;
INSERT INTO pilotage_demo.orders (id, customer_id, ordered_at, status, total_amount)
SELECT i,
       1 + (i * 13) % 37,
       timestamptz '2025-01-01 08:00:00+00' + i * interval '29 hours',
       (ARRAY['delivered','delivered','shipped','pending','cancelled'])[1 + i % 5],
       0
FROM generate_series(1, 300) AS i;
INSERT INTO pilotage_demo.order_lines (id, order_id, product, quantity, unit_price)
SELECT row_number() OVER (ORDER BY o.id, l.n),
       o.id,
       (ARRAY['keyboard','mouse','monitor','laptop stand','usb hub','webcam','headset','desk lamp'])[1 + (o.id + l.n) % 8],
       1 + (o.id * l.n) % 4,
       (ARRAY[49.90, 19.50, 189.00, 35.00, 24.99, 59.00, 79.90, 29.00])[1 + (o.id + l.n) % 8]
FROM pilotage_demo.orders o
CROSS JOIN LATERAL generate_series(1, 1 + o.id % 4) AS l(n);
UPDATE pilotage_demo.orders o
SET total_amount = s.total
FROM (SELECT order_id, sum(quantity * unit_price) AS total FROM pilotage_demo.order_lines GROUP BY order_id) s
WHERE s.order_id = o.id;
"#;

const READER_ROLE: &str = r#"
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'pilotage_demo_reader') THEN
        CREATE ROLE pilotage_demo_reader LOGIN;
    END IF;
END
$$;
GRANT USAGE ON SCHEMA pilotage_demo TO pilotage_demo_reader;
GRANT SELECT ON ALL TABLES IN SCHEMA pilotage_demo TO pilotage_demo_reader;
"#;

/// Creates (or completes) the demo sales database through `admin_url` (a
/// role that may create schemas and roles) and returns the configuration
/// of the demo data source: the read-only role on the same server and
/// database, schema `pilotage_demo`.
///
/// # Errors
/// [`DataSourceError::Unreachable`] when PostgreSQL cannot be reached
/// within 5 seconds (the demo prints this and skips its SQL story);
/// [`DataSourceError::Database`] when a set-up statement fails.
pub async fn ensure_demo_database(admin_url: &str) -> Result<PostgresConfig, DataSourceError> {
    let options: sqlx::postgres::PgConnectOptions =
        admin_url.parse().map_err(|error| DataSourceError::Config(format!("the URL does not parse: {error}")))?;
    let target = format!("{}:{}/{}", options.get_host(), options.get_port(), options.get_database().unwrap_or(""));
    let reader_url = format!(
        "postgres://{READER}@{}:{}/{}",
        options.get_host(),
        options.get_port(),
        options.get_database().unwrap_or("postgres")
    );
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(Duration::from_secs(5))
        .connect_with(options)
        .await
        .map_err(|error| DataSourceError::from_sqlx(&target, error))?;
    let fail = |error: sqlx::Error| DataSourceError::from_sqlx(&target, error);
    let mut connection = pool.acquire().await.map_err(fail)?;
    let mut transaction = connection.begin().await.map_err(fail)?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)").bind(LOCK_KEY).execute(&mut *transaction).await.map_err(fail)?;
    transaction.execute(sqlx::raw_sql(SETUP)).await.map_err(fail)?;
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM pilotage_demo.customers")
        .fetch_one(&mut *transaction)
        .await
        .map_err(fail)?;
    if count == 0 {
        transaction.execute(sqlx::raw_sql(FILL)).await.map_err(fail)?;
    }
    transaction.execute(sqlx::raw_sql(READER_ROLE)).await.map_err(fail)?;
    transaction.commit().await.map_err(fail)?;
    // The pool waits for its connections on close: give this one back first.
    drop(connection);
    pool.close().await;
    Ok(PostgresConfig::new(reader_url, [SCHEMA]))
}
