//! sql/postgres-15 through the real MCP endpoint against the machine's
//! PostgreSQL: the Part I story on the demo tenant; and, for a tenant whose
//! data source connects as a role that could do anything, the known
//! bypasses of other SQL MCP servers refused before reaching the database,
//! drift when a column is added (and none when rows are), invisible tables
//! never named nor reached through an unqualified name, writes that commit
//! or roll back whole, and the admin API for data sources (credentials
//! sealed, restored after a restart).

use pilotage_client::Connection;
use pilotage_server::settings::Settings;
use pilotage_server::start::Server;
use serde_json::{Value, json};

use crate::endpoint::{Backend, postgres_url, server, settings, unique};
use crate::support::assert_schema;
use crate::tenancy::{ADMIN_TOKEN, admin, result};

/// A URL with a password that trust authentication ignores: it must never
/// come back from the server nor sit in its store in clear.
fn secret_url() -> String {
    postgres_url().replacen("postgres@", "postgres:s3cret-pw-4242@", 1)
}

pub(crate) async fn postgres(statements: &str) {
    use sqlx::Connection as _;
    let mut connection = sqlx::PgConnection::connect(&postgres_url()).await.expect("PostgreSQL");
    sqlx::raw_sql(sqlx::AssertSqlSafe(statements.to_owned())).execute(&mut connection).await.expect(statements);
}

pub(crate) async fn scalar(query: &str) -> i64 {
    use sqlx::Connection as _;
    let mut connection = sqlx::PgConnection::connect(&postgres_url()).await.expect("PostgreSQL");
    sqlx::query_scalar(sqlx::AssertSqlSafe(query.to_owned())).fetch_one(&mut connection).await.expect(query)
}

/// A fresh schema with a ledger, a sentinel, a sequence and a table only
/// `hr` may see.
async fn scratch() -> String {
    let schema = unique("pilotage_sqlep");
    postgres(&format!(
        "CREATE SCHEMA {schema};
         CREATE TABLE {schema}.accounts (id integer PRIMARY KEY, owner text NOT NULL, balance numeric(10,2) NOT NULL);
         CREATE TABLE {schema}.sentinel (id integer PRIMARY KEY);
         INSERT INTO {schema}.sentinel SELECT generate_series(1, 5);
         CREATE SEQUENCE {schema}.ticket_seq;
         CREATE TABLE {schema}.secret_salaries (id integer PRIMARY KEY, amount numeric(10,2) NOT NULL);
         INSERT INTO {schema}.secret_salaries VALUES (1, 5000.00);"
    ))
    .await;
    schema
}

/// A server with the demo tenant's SQL, an operator token, and tenant
/// `acme` running sql/postgres-15 on `schema` as the superuser.
pub(crate) struct World {
    pub(crate) server: Server,
    settings: Settings,
    schema: String,
}

async fn start(settings: &Settings) -> Server {
    server(settings.clone()).await
}

async fn world(backend: Backend) -> World {
    let schema = scratch().await;
    let visibility = json!({format!("{schema}.secret_salaries"): ["hr"]});
    let (world, body) = acme_world(backend, &[&schema], visibility).await;
    assert_eq!(body["catalog"]["added"].as_array().unwrap().len(), 3, "{body}");
    world
}

/// A server with the demo tenant's SQL, an operator token, and tenant
/// `acme` running sql/postgres-15 as the superuser on `schemas` (the first
/// is the world's `schema`) with `visibility`; and the registration's
/// answer.
pub(crate) async fn acme_world(backend: Backend, schemas: &[&str], visibility: Value) -> (World, Value) {
    let schema = schemas[0].to_owned();
    let mut settings = settings(backend).await;
    settings.demo_postgres = postgres_url();
    settings.admin_token = Some(ADMIN_TOKEN.into());
    let server = start(&settings).await;
    let (status, _) = admin(&server, reqwest::Method::POST, "/tenants", Some(json!({"id": "acme"}))).await;
    assert_eq!(status, 201);
    crate::tenancy::upload_language(&server, "acme", pilotage_bundled::SQL).await;
    let (status, body) = admin(
        &server,
        reqwest::Method::PUT,
        "/tenants/acme/data-sources/ledger",
        Some(json!({"url": secret_url(), "schemas": schemas, "visibility": visibility})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    (World { server, settings, schema }, body)
}

impl World {
    /// A development token for `subject` of `acme` holding `scopes`.
    pub(crate) fn acme_token(&self, subject: &str, scopes: &[&str]) -> String {
        let audience = format!("http://{}/mcp", self.server.addr);
        let dev = pilotage_server::auth::dev::DevTokens::load(&self.settings.data_dir, audience).unwrap();
        let mut held: Vec<String> = vec!["pilotage:mcp".into()];
        held.extend(scopes.iter().map(|s| (*s).to_owned()));
        dev.mint("acme", subject, &held, 600).unwrap()
    }

    /// A connection as `subject` of `acme` holding `scopes`.
    pub(crate) async fn acme(&self, subject: &str, scopes: &[&str]) -> Connection {
        let token = self.acme_token(subject, scopes);
        Connection::http(&self.server.mcp_url(), Some(&token)).await.expect("acme connects")
    }
}

pub(crate) async fn call(connection: &Connection, tool: &str, args: Value) -> Value {
    result(connection.call(tool, args).await.expect("a reply"))
}

pub(crate) fn codes(response: &Value) -> Vec<String> {
    response["diagnostics"].as_array().unwrap().iter().map(|d| d["code"].as_str().unwrap().to_owned()).collect()
}

const STORY: &str = "SELECT c.name, date_trunc('month', o.ordered_at) AS month, sum(o.total) AS revenue
FROM customers c
JOIN orders o ON o.customer_id = c.id
WHERE o.status <> 'cancelled'
GROUP BY c.name, month
ORDER BY month, revenue DESC
LIMIT 1000";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_part_one_story_through_the_endpoint() {
    let mut settings = settings(Backend::Sqlite).await;
    settings.demo_postgres = postgres_url();
    let server = server(settings).await;
    assert!(matches!(server.demo_sql, Some(Ok(_))), "{:?}", server.demo_sql);
    let connection = Connection::http(&server.mcp_url(), None).await.unwrap();
    let tools: Vec<String> = connection.tools().await.unwrap().into_iter().map(|t| t.name.to_string()).collect();
    for tool in ["validate_sql", "run_sql", "trace_sql"] {
        assert!(tools.contains(&tool.to_owned()), "{tools:?}");
    }

    // Lookup: the sales tables, read-only for the demo role.
    let listed = call(&connection, "pilotage_catalog", json!({"language": "sql/postgres-15", "verb": "list"})).await;
    let ids: Vec<&str> = listed["items"].as_array().unwrap().iter().map(|i| i["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["pilotage_demo.customers", "pilotage_demo.order_lines", "pilotage_demo.orders"]);
    assert!(listed["items"].as_array().unwrap().iter().all(|i| i["risk"] == "safe"));
    let workflow = call(&connection, "pilotage_catalog", json!({"language": "workflow/v1", "verb": "list"})).await;
    assert!(!workflow.to_string().contains("pilotage_demo."), "tables are not workflow capabilities");

    // The wrong column, its hint, its text range.
    let wrong = call(&connection, "validate_sql", json!({"query": STORY})).await;
    assert_schema("ValidateResponse", &wrong);
    assert_eq!(wrong["valid"], false);
    assert_eq!(wrong["diagnostics"][0]["code"], "unknown_column");
    assert_eq!(wrong["diagnostics"][0]["hint"], "close match: total_amount");
    assert_eq!(wrong["diagnostics"][0]["path"]["start"], json!({"line": 1, "column": 64}));
    assert_eq!(wrong["catalog_version"], listed["catalog_version"]);

    // Fixed: read-only and safe; executed; rows_matched in the trace.
    let fixed = STORY.replace("sum(o.total)", "sum(o.total_amount)");
    let valid = call(&connection, "validate_sql", json!({"query": fixed})).await;
    assert_eq!(valid["valid"], true, "{valid}");
    assert_eq!(valid["plan"]["max_risk"], "safe");
    assert_eq!(valid["plan"]["max_risk_hints"]["readOnly"], true);
    let run = call(
        &connection,
        "run_sql",
        json!({"query": fixed, "expected_catalog_version": valid["catalog_version"], "store": true, "trace_level": "summary"}),
    )
    .await;
    assert_schema("ExecuteResponse", &run);
    assert_eq!(run["outcome"]["status"], "success", "{run}");
    let statement = &run["trace"]["steps"][0];
    assert_eq!(statement["id"], "stmt-1");
    let matched =
        statement["output"]["scalars"]["rows_matched"].as_u64().expect("rows_matched is a field at summary level");
    assert!(matched > 50);
    assert_eq!(run["output"].as_array().unwrap().len() as u64, matched);
    let fetched = call(&connection, "trace_sql", json!({"run_id": run["run_id"]})).await;
    assert_eq!(fetched["run_id"], run["run_id"]);
    assert_eq!(fetched["trace"]["steps"][0]["output"]["rows_matched"], matched);
    connection.close().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn known_bypasses_never_reach_the_database() {
    let world = world(Backend::Sqlite).await;
    let s = &world.schema;
    let ann = world.acme("ann", &[]).await;
    let sequence_before = scalar(&format!("SELECT last_value FROM {s}.ticket_seq")).await;
    let bypasses = [
        format!("/* just reading */ SELECT id FROM {s}.sentinel; DROP TABLE {s}.sentinel"),
        format!("-- a comment line\nDROP TABLE {s}.sentinel"),
        format!("SELECT id FROM {s}.sentinel; DELETE FROM {s}.sentinel"),
        format!("SET TRANSACTION READ WRITE; SELECT id FROM {s}.sentinel"),
        format!("COMMIT; DROP TABLE {s}.sentinel"),
        format!("SELECT id FROM {s}.sentinel; COMMIT; DELETE FROM {s}.sentinel"),
        format!("SELECT nextval('{s}.ticket_seq')"),
        format!("SELECT setval('{s}.ticket_seq', 1000)"),
        "SELECT set_config('default_transaction_read_only', 'off', false)".to_owned(),
        "SELECT pg_catalog.pg_terminate_backend(1)".to_owned(),
        format!("WITH gone AS (DELETE FROM {s}.sentinel RETURNING id) SELECT id FROM gone"),
        format!("SELECT id FROM {s}.sentinel FOR UPDATE"),
        format!("COPY {s}.sentinel TO PROGRAM 'true'"),
        format!("SELECT id INTO {s}.copied FROM {s}.sentinel"),
        format!("DO $$ BEGIN DELETE FROM {s}.sentinel; END $$"),
        "SET ROLE postgres".to_owned(),
        format!("SELECT id FROM {s}.sentinel WHERE id = (SELECT 1 FROM pg_catalog.pg_sleep(0))"),
    ];
    for query in &bypasses {
        let validated = call(&ann, "validate_sql", json!({"query": query})).await;
        assert_eq!(validated["valid"], false, "validated: {query}\n{validated}");
        assert!(
            validated["diagnostics"].as_array().unwrap().iter().any(|d| d["severity"] == "error"),
            "{query}: {validated}"
        );
        let run = call(&ann, "run_sql", json!({"query": query})).await;
        assert_eq!(run["outcome"]["status"], "validation_error", "ran: {query}\n{run}");
        assert_eq!(run["outcome"]["ok"], false);
    }
    assert_eq!(scalar(&format!("SELECT count(*) FROM {s}.sentinel")).await, 5, "the sentinel lost rows");
    assert_eq!(scalar(&format!("SELECT last_value FROM {s}.ticket_seq")).await, sequence_before);
    assert_eq!(scalar(&format!("SELECT count(*) FROM pg_tables WHERE schemaname = '{s}'")).await, 3);
    // The same role reads fine through a plain query (the refusals are the
    // Language's, not a broken connection).
    let plain = call(&ann, "run_sql", json!({"query": format!("SELECT id FROM {s}.sentinel ORDER BY id")})).await;
    assert_eq!(plain["outcome"]["status"], "success", "{plain}");
    assert_eq!(plain["output"].as_array().unwrap().len(), 5);
    ann.close().await;
    world.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_column_is_drift_and_new_rows_are_not() {
    let world = world(Backend::Postgres).await;
    let s = &world.schema;
    let ann = world.acme("ann", &[]).await;
    let query = format!("SELECT id, owner FROM {s}.accounts ORDER BY id LIMIT 10");
    let validated = call(&ann, "validate_sql", json!({"query": query})).await;
    assert_eq!(validated["valid"], true, "{validated}");
    let before = validated["catalog_version"].clone();

    // Rows: the catalog does not move.
    postgres(&format!("INSERT INTO {s}.accounts VALUES (1, 'ann', 10.00), (2, 'bob', 20.00)")).await;
    let path = "/tenants/acme/data-sources/ledger/refresh";
    let (status, refreshed) = admin(&world.server, reqwest::Method::POST, path, None).await;
    assert_eq!(status, 200, "{refreshed}");
    assert_eq!(refreshed["catalog"], json!({"added": [], "modified": [], "removed": []}));
    let run = call(&ann, "run_sql", json!({"query": query, "expected_catalog_version": before})).await;
    assert_eq!(run["outcome"]["status"], "success", "{run}");
    assert_eq!(run["output"].as_array().unwrap().len(), 2);

    // A column: the entry changes, the old catalog_version is drift.
    postgres(&format!("ALTER TABLE {s}.accounts ADD COLUMN currency text")).await;
    let (_, refreshed) = admin(&world.server, reqwest::Method::POST, path, None).await;
    assert_eq!(refreshed["catalog"]["modified"], json!([format!("{s}.accounts")]));
    let stale = call(&ann, "run_sql", json!({"query": query, "expected_catalog_version": before})).await;
    assert_eq!(stale["outcome"]["status"], "catalog_drift", "{stale}");
    assert_eq!(stale["outcome"]["ok"], false);
    let entry = call(
        &ann,
        "pilotage_catalog",
        json!({"language": "sql/postgres-15", "verb": "get", "id": format!("{s}.accounts")}),
    )
    .await;
    assert!(entry.to_string().contains("currency"), "{entry}");
    assert_ne!(entry["catalog_version"], before);
    ann.close().await;
    world.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invisible_tables_are_never_named() {
    let world = world(Backend::Sqlite).await;
    let s = &world.schema;
    let ann = world.acme("ann", &[]).await;
    let hanna = world.acme("hanna", &["hr"]).await;
    let secret = format!("{s}.secret_salaries");

    let listed = call(&ann, "pilotage_catalog", json!({"language": "sql/postgres-15", "verb": "list"})).await;
    assert!(!listed.to_string().contains("secret_salaries"), "{listed}");
    let listed_hr = call(&hanna, "pilotage_catalog", json!({"language": "sql/postgres-15", "verb": "list"})).await;
    assert!(listed_hr.to_string().contains("secret_salaries"));
    assert_ne!(listed["catalog_version"], listed_hr["catalog_version"]);
    let hidden =
        call(&ann, "pilotage_catalog", json!({"language": "sql/postgres-15", "verb": "get", "id": secret})).await;
    let missing = call(
        &ann,
        "pilotage_catalog",
        json!({"language": "sql/postgres-15", "verb": "get", "id": format!("{s}.nothing_here")}),
    )
    .await;
    assert_eq!(hidden["error"]["kind"], missing["error"]["kind"]);

    // A near miss: the hint names the table only for whoever may see it.
    let near = format!("SELECT amount FROM {s}.secret_salary");
    let for_ann = call(&ann, "validate_sql", json!({"query": near})).await;
    assert_eq!(codes(&for_ann), ["unknown_table"]);
    assert!(!for_ann.to_string().contains("secret_salaries"), "{for_ann}");
    let for_hanna = call(&hanna, "validate_sql", json!({"query": near})).await;
    assert!(for_hanna.to_string().contains("secret_salaries"), "{for_hanna}");

    // The exact name: unknown to ann, at validation and at execution.
    let exact = format!("SELECT amount FROM {secret}");
    let validated = call(&ann, "validate_sql", json!({"query": exact})).await;
    assert_eq!(codes(&validated), ["unknown_table"]);
    let run = call(&ann, "run_sql", json!({"query": exact})).await;
    assert_eq!(run["outcome"]["status"], "validation_error");
    let allowed = call(&hanna, "run_sql", json!({"query": exact})).await;
    assert_eq!(allowed["outcome"]["status"], "success", "{allowed}");
    assert_eq!(allowed["output"][0]["amount"], "5000.00");
    ann.close().await;
    hanna.close().await;
    world.server.stop().await;
}

/// The conformance finding, as found: `payroll` in two schemas, the
/// hidden one first on the search path the data source used to set and
/// visible only with `hr`. A caller without `hr` validates an unqualified
/// `payroll` against the visible table; what runs must be that table, for
/// reads and writes, and the trace names it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unqualified_name_never_reaches_a_hidden_table() {
    let hidden = unique("pilotage_sqlephidden");
    let visible = unique("pilotage_sqlepvisible");
    postgres(&crate::sql_language::two_payrolls(&hidden, &visible)).await;
    let visibility = json!({format!("{hidden}.payroll"): ["hr"]});
    let (world, _) = acme_world(Backend::Sqlite, &[&hidden, &visible], visibility).await;
    let ann = world.acme("ann", &[]).await;
    let query = "SELECT salary FROM payroll ORDER BY salary LIMIT 5";
    let validated = call(&ann, "validate_sql", json!({"query": query})).await;
    assert_eq!(validated["plan"]["steps"][1]["calls"], format!("{visible}.payroll"), "{validated}");
    let read = call(&ann, "run_sql", json!({"query": query, "trace_level": "full"})).await;
    assert_eq!(read["outcome"]["status"], "success", "{read}");
    assert_eq!(read["output"], json!([{"salary": 100}, {"salary": 200}]));
    assert_eq!(read["trace"]["steps"][1]["calls"], format!("{visible}.payroll"));
    let ran = read["trace"]["steps"][0]["input"]["statement"].as_str().unwrap();
    assert!(ran.contains(&format!("\"{visible}\".\"payroll\"")), "{ran}");

    let update = "UPDATE payroll SET salary = salary + 1 WHERE id = 1";
    let written = call(&ann, "run_sql", json!({"query": update})).await;
    assert_eq!(written["outcome"]["status"], "success", "{written}");
    assert_eq!(scalar(&format!("SELECT sum(salary)::int8 FROM {visible}.payroll")).await, 301);
    assert_eq!(scalar(&format!("SELECT sum(salary)::int8 FROM {hidden}.payroll")).await, 1_800_003);

    // With `hr`, both tables are visible: the unqualified name is ambiguous.
    let hanna = world.acme("hanna", &["hr"]).await;
    let ambiguous = call(&hanna, "validate_sql", json!({"query": query})).await;
    assert_eq!(codes(&ambiguous), ["ambiguous_table"]);
    ann.close().await;
    hanna.close().await;
    world.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_commit_whole_or_roll_back_whole() {
    let world = world(Backend::Sqlite).await;
    let s = &world.schema;
    let ann = world.acme("ann", &[]).await;
    let insert = format!("INSERT INTO {s}.accounts (id, owner, balance) VALUES ($1, $2, $3)");
    let validated = call(&ann, "validate_sql", json!({"query": insert})).await;
    assert_eq!(validated["valid"], true, "{validated}");
    assert_ne!(validated["plan"]["max_risk"], "safe", "an insert is a write");
    assert_eq!(validated["plan"]["max_risk_hints"]["readOnly"], false);
    let written = call(&ann, "run_sql", json!({"query": insert, "input": [7, "gil", "12.50"]})).await;
    assert_eq!(written["outcome"]["status"], "success", "{written}");
    assert_eq!(scalar(&format!("SELECT count(*) FROM {s}.accounts WHERE id = 7")).await, 1);

    // A parameter mismatch is input_binding, before the database.
    let short = call(&ann, "run_sql", json!({"query": insert, "input": [8, "hal"]})).await;
    assert_eq!(short["outcome"]["status"], "validation_error", "{short}");
    assert_eq!(codes(&short), ["input_binding"]);

    // One bad row of three: nothing is written.
    let batch = format!(
        "INSERT INTO {s}.accounts (id, owner, balance) VALUES (8, 'hal', 1.00), (9, NULL, 2.00), (10, 'ivy', 3.00)"
    );
    let failed = call(&ann, "run_sql", json!({"query": batch})).await;
    assert_eq!(failed["outcome"]["ok"], false, "{failed}");
    assert_eq!(failed["outcome"]["status"], "rolled_back", "{failed}");
    assert!(failed["trace"]["steps"].as_array().is_some_and(|steps| !steps.is_empty()), "the trace so far");
    assert_eq!(scalar(&format!("SELECT count(*) FROM {s}.accounts")).await, 1);
    ann.close().await;
    world.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_api_keeps_data_source_credentials_sealed() {
    let world = world(Backend::Sqlite).await;
    let s = world.schema.clone();
    let server = &world.server;
    let put = reqwest::Method::PUT;

    // Bad registrations name their problem; nothing changes.
    let path = "/tenants/acme/data-sources/other";
    let (status, body) = admin(server, put.clone(), path, Some(json!({"schemas": [s]}))).await;
    assert_eq!((status, body["error"]["field"].as_str()), (400, Some("url")), "{body}");
    let (status, body) = admin(server, put.clone(), path, Some(json!({"url": secret_url(), "schemas": []}))).await;
    assert_eq!((status, body["error"]["field"].as_str()), (400, Some("schemas")), "{body}");
    let (status, body) =
        admin(server, put.clone(), path, Some(json!({"url": secret_url(), "schemas": ["x".repeat(64)]}))).await;
    assert_eq!(status, 400, "{body}");
    let unreachable = json!({"url": "postgres://postgres@127.0.0.1:1/test", "schemas": [s], "language": "sql/other"});
    let (status, body) = admin(server, put.clone(), path, Some(unreachable)).await;
    assert_eq!((status, body["error"]["code"].as_str()), (422, Some("unreachable")), "{body}");
    let (status, body) = admin(server, put.clone(), path, Some(json!({"url": secret_url(), "schemas": [s]}))).await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("language_taken")), "{body}");
    let (status, _) = admin(server, put.clone(), "/tenants/acme/data-sources/bad%20name", None).await;
    assert_eq!(status, 400);

    // The URL never comes back, and is not in the store in clear.
    let (status, listed) = admin(server, reqwest::Method::GET, "/tenants/acme/data-sources", None).await;
    assert_eq!(status, 200);
    assert_eq!(listed["data_sources"][0]["name"], "ledger");
    assert_eq!(listed["data_sources"][0]["last_refresh"]["entries"], 3);
    let (_, one) = admin(server, reqwest::Method::GET, "/tenants/acme/data-sources/ledger", None).await;
    let (_, audit) = admin(server, reqwest::Method::GET, "/audit", None).await;
    for text in [listed.to_string(), one.to_string(), audit.to_string()] {
        assert!(!text.contains("s3cret-pw-4242"), "{text}");
    }
    let mut store_files = 0;
    for file in std::fs::read_dir(&world.settings.data_dir).unwrap() {
        let file = file.unwrap();
        if file.file_name().to_string_lossy().starts_with("pilotage.db") {
            store_files += 1;
            let bytes = std::fs::read(file.path()).unwrap();
            assert!(
                !String::from_utf8_lossy(&bytes).contains("s3cret-pw-4242"),
                "the URL is in {:?} in clear",
                file.path()
            );
        }
    }
    assert!(store_files > 0, "the SQLite store was not found");

    // The operator's catalog and the database's stay apart.
    let (status, _) = admin(
        server,
        reqwest::Method::POST,
        "/tenants/acme/catalog/apply",
        Some(json!({"entries": [{"id": "doc_ledger", "kind": "document", "name": "Ledger notes",
                                 "languages": ["workflow/v1"], "risk": "safe",
                                 "risk_hints": {"readOnly": true, "destructive": false, "openWorld": false}}]})),
    )
    .await;
    assert_eq!(status, 200);
    let (status, body) = admin(
        server,
        put.clone(),
        &format!("/tenants/acme/catalog/entries/{s}.accounts"),
        Some(json!({"id": format!("{s}.accounts"), "kind": "table", "name": "accounts", "risk": "safe",
                    "risk_hints": {"readOnly": true, "destructive": false, "openWorld": false}})),
    )
    .await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("owned_by_data_source")), "{body}");
    let ann = world.acme("ann", &[]).await;
    let listed = call(&ann, "pilotage_catalog", json!({"language": "sql/postgres-15", "verb": "list"})).await;
    assert_eq!(listed["items"].as_array().unwrap().len(), 2, "a bulk apply left the tables alone: {listed}");
    ann.close().await;

    // A restart restores the data source from its sealed URL.
    let settings = world.settings.clone();
    world.server.stop().await;
    let server = start(&settings).await;
    let restarted = World { server, settings, schema: s.clone() };
    let ann = restarted.acme("ann", &[]).await;
    let run = call(&ann, "run_sql", json!({"query": format!("SELECT id FROM {s}.sentinel ORDER BY id")})).await;
    assert_eq!(run["outcome"]["status"], "success", "after a restart: {run}");
    ann.close().await;

    // Deleting it takes its tables out of the catalog.
    let (status, _) =
        admin(&restarted.server, reqwest::Method::DELETE, "/tenants/acme/data-sources/ledger", None).await;
    assert_eq!(status, 204);
    let ann = restarted.acme("ann", &[]).await;
    let listed = call(&ann, "pilotage_catalog", json!({"language": "sql/postgres-15", "verb": "list"})).await;
    assert_eq!(listed["items"].as_array().unwrap().len(), 0, "{listed}");
    let run = call(&ann, "run_sql", json!({"query": format!("SELECT id FROM {s}.sentinel")})).await;
    assert_eq!(run["outcome"]["status"], "validation_error", "{run}");
    let (status, _) = admin(&restarted.server, reqwest::Method::GET, "/tenants/acme/data-sources/ledger", None).await;
    assert_eq!(status, 404);
    ann.close().await;
    restarted.server.stop().await;
}

/// `pilotage datasource add|ls|refresh|rm` drive the same admin API.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_datasource_commands_drive_the_admin_api() {
    let world = world(Backend::Sqlite).await;
    let base = format!("http://{}", world.server.addr);
    let schema = world.schema.clone();
    let pilotage = move |args: Vec<String>| {
        let base = base.clone();
        tokio::task::spawn_blocking(move || {
            std::process::Command::new(env!("CARGO_BIN_EXE_pilotage"))
                .args(&args)
                .args(["--server", &base, "--admin-token", ADMIN_TOKEN])
                .output()
                .expect("the pilotage binary runs")
        })
    };
    let words = |text: &str| text.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
    let (status, _) = admin(&world.server, reqwest::Method::POST, "/tenants", Some(json!({"id": "globex"}))).await;
    assert_eq!(status, 201);
    let added = pilotage(words(&format!(
        "datasource add globex books --url {} --schema {schema} --language sql/books --visible-to hr={schema}.secret_salaries",
        secret_url()
    )))
    .await
    .unwrap();
    assert!(added.status.success(), "{}", String::from_utf8_lossy(&added.stderr));
    let added: Value = serde_json::from_slice(&added.stdout).unwrap();
    assert_eq!(added["spec"]["visibility"][format!("{schema}.secret_salaries")], json!(["hr"]));
    assert!(!added.to_string().contains("s3cret-pw-4242"));
    let listed = pilotage(words("datasource ls globex")).await.unwrap();
    assert!(String::from_utf8_lossy(&listed.stdout).contains("\"books\""));
    let refreshed = pilotage(words("datasource refresh globex books")).await.unwrap();
    assert!(refreshed.status.success());
    let removed = pilotage(words("datasource rm globex books")).await.unwrap();
    assert!(removed.status.success(), "{}", String::from_utf8_lossy(&removed.stderr));
    let missing = pilotage(words("datasource refresh globex books")).await.unwrap();
    assert!(!missing.status.success(), "refreshing a removed data source must fail");
    assert!(String::from_utf8_lossy(&missing.stderr).contains("404"), "{}", String::from_utf8_lossy(&missing.stderr));
    world.server.stop().await;
}
