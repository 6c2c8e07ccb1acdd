//! The specification's 54 conformance vectors, bound to every bundled
//! Language and run through the real HTTP endpoint on both backends, and
//! the completeness gate of Part IV §4.2 for each Language.
//!
//! workflow/v1 and automation/1 run as the demo tenant; side effects are
//! the calls its capability service counts (automation/1's catalog is the
//! demo home). sql/postgres-15 runs as a second tenant,
//! [`SQL_TENANT`], at `/t/conformance/mcp`: its data source is a role that
//! reads the demo sales tables and writes a scratch schema (Part IV §4.3:
//! a real database, not a substitute), and every row a Run writes there is
//! logged by a trigger under the name of the server that ran it, so side
//! effects are counted per test even while tests share the database.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use pilotage_client::Connection;
use pilotage_client::conformance::binding::Binding;
use pilotage_client::conformance::{
    Operator, OperatorError, OperatorFuture, Runner, VectorFile, VectorResult, Verdict, summary,
};
use pilotage_server::datasource::attached::{AttachedSource, DataSourceSpec};
use pilotage_server::datasource::postgres::quote_identifier;
use pilotage_server::start::Server;
use pilotage_server::tenancy::{LanguageSlot, Tenant};
use pilotage_store::RunRow;
use serde_json::json;

use crate::endpoint::{Backend, postgres_url, server, settings, unique};
use crate::support::{schema_document, spec_dir};

/// Stores a Run of another subject of `tenant` (PIL-TRACE-FETCH-INDISTINGUISHABLE-B).
pub async fn insert_foreign_run(server: &Server, tenant: &str, language: &str) -> Result<String, OperatorError> {
    let run_id = format!("run_{}", unique("foreign"));
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    let record = json!({"run_id": run_id, "outcome": {"ok": true, "status": "success", "error": null},
                        "trace": {"run_id": run_id, "level": "full", "steps": []}});
    server
        .platform
        .store()
        .run_insert(&RunRow {
            run_id: run_id.clone(),
            tenant: tenant.into(),
            issuer: pilotage_server::tenancy::DEV_ISSUER.into(),
            subject: "someone-else".into(),
            language: language.into(),
            session_id: None,
            recorded_level: "full".into(),
            record: record.to_string(),
            status: "success".into(),
            created_at: now,
            expires_at: Some(now + 3_600_000),
        })
        .await
        .map_err(|e| OperatorError::Failed(e.into()))?;
    Ok(run_id)
}

/// An operator's [`OperatorError::NotFound`], saying `what`.
fn not_found(what: &str) -> OperatorError {
    OperatorError::NotFound { what: what.to_owned() }
}

/// workflow/v1's operator: catalog edits on the demo tenant, foreign Runs,
/// and the calls the demo capability service has seen.
struct InProcess<'s> {
    server: &'s Server,
    edits: AtomicU64,
}

impl Operator for InProcess<'_> {
    fn change_description<'a>(&'a self, _language: &'a str, id: &'a str) -> OperatorFuture<'a, ()> {
        Box::pin(async move {
            let tenant = self.server.platform.tenant("demo").ok_or_else(|| not_found("no demo tenant"))?;
            let mut stored = tenant
                .with_catalog(|c| c.stored(id).map(|s| s.as_ref().clone()))
                .ok_or_else(|| not_found("no such entry"))?;
            let n = self.edits.fetch_add(1, Ordering::SeqCst);
            stored.entry.description = Some(format!("{} (edit {n})", stored.entry.description.unwrap_or_default()));
            tenant.put_entries(vec![stored]);
            Ok(())
        })
    }

    fn change_load_bearing<'a>(&'a self, _language: &'a str, id: &'a str) -> OperatorFuture<'a, ()> {
        Box::pin(async move {
            let tenant = self.server.platform.tenant("demo").ok_or_else(|| not_found("no demo tenant"))?;
            let mut stored = tenant
                .with_catalog(|c| c.stored(id).map(|s| s.as_ref().clone()))
                .ok_or_else(|| not_found("no such entry"))?;
            let n = self.edits.fetch_add(1, Ordering::SeqCst);
            if let Some(schema) = stored.entry.input_schema.as_mut() {
                schema["properties"][format!("added_{n}")] = json!({"type": "string"});
            }
            tenant.put_entries(vec![stored]);
            Ok(())
        })
    }

    fn foreign_run<'a>(&'a self, language: &'a str) -> OperatorFuture<'a, String> {
        Box::pin(insert_foreign_run(self.server, "demo", language))
    }

    fn effects(&self) -> u64 {
        self.server.demo_world.as_ref().map_or(0, |(_, world)| world.calls().values().sum())
    }
}

/// The tenant sql/postgres-15 conformance runs as.
const SQL_TENANT: &str = "conformance";

/// The login role of its data source.
const SQL_ROLE: &str = "pilotage_conformance_agent";

/// The scope that would reveal `pilotage_conformance.payroll`; the
/// suite's caller does not hold it (PIL-AUTHZ-INVISIBLE-ENTRY-B).
const PAYROLL_SCOPE: &str = "conformance:payroll";

/// The scratch database of sql/postgres-15 conformance, created
/// idempotently under an advisory lock (tests of both backends set it up
/// at once). Entries follow the role's privileges (introspection):
/// `tickets` is `write` (INSERT only), `notes` (UPDATE) and `events`
/// (DELETE) are `destructive`, `labels`
/// (in two schemas, so an unqualified `labels` is ambiguous) and
/// `payroll` are `safe`, and the demo sales tables are `safe`.
/// `tickets.event_id` is a deferred foreign key, so a bad one fails at
/// commit, after every statement succeeded (`rolled_back`). Row writes to the writable
/// tables are logged, outside the data source's schemas, with the
/// `pilotage_conformance.run` setting of the connection that made them.
/// The second advisory lock is the demo database's own set-up lock
/// (`datasource::demo`): a GRANT on `pilotage_demo` racing with its GRANTs
/// would fail with "tuple concurrently updated", so they are serialized,
/// and made only when missing.
const SQL_SETUP: &str = r#"
SELECT pg_advisory_xact_lock(7340298617);
SELECT pg_advisory_xact_lock(5785239099933804357);
CREATE SCHEMA IF NOT EXISTS pilotage_conformance;
CREATE SCHEMA IF NOT EXISTS pilotage_conformance_archive;
CREATE SCHEMA IF NOT EXISTS pilotage_conformance_log;
CREATE TABLE IF NOT EXISTS pilotage_conformance_log.writes (
    run text NOT NULL,
    relation text NOT NULL,
    operation text NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE OR REPLACE FUNCTION pilotage_conformance_log.count_write() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
BEGIN
    INSERT INTO pilotage_conformance_log.writes (run, relation, operation)
    VALUES (coalesce(current_setting('pilotage_conformance.run', true), ''), TG_TABLE_NAME, TG_OP);
    RETURN NULL;
END
$$;
CREATE TABLE IF NOT EXISTS pilotage_conformance.notes (
    id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    body text NOT NULL,
    written_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS pilotage_conformance.events (id integer PRIMARY KEY, name text NOT NULL);
INSERT INTO pilotage_conformance.events VALUES (1, 'launch') ON CONFLICT DO NOTHING;
CREATE TABLE IF NOT EXISTS pilotage_conformance.tickets (
    id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id integer NOT NULL REFERENCES pilotage_conformance.events (id) DEFERRABLE INITIALLY DEFERRED,
    seat text NOT NULL
);
CREATE TABLE IF NOT EXISTS pilotage_conformance.labels (id integer PRIMARY KEY, name text NOT NULL);
CREATE TABLE IF NOT EXISTS pilotage_conformance_archive.labels (id integer PRIMARY KEY, name text NOT NULL);
CREATE TABLE IF NOT EXISTS pilotage_conformance.payroll (id integer PRIMARY KEY, salary numeric(10, 2) NOT NULL);
CREATE OR REPLACE TRIGGER notes_writes AFTER INSERT OR UPDATE OR DELETE ON pilotage_conformance.notes
    FOR EACH ROW EXECUTE FUNCTION pilotage_conformance_log.count_write();
CREATE OR REPLACE TRIGGER events_writes AFTER INSERT OR UPDATE OR DELETE ON pilotage_conformance.events
    FOR EACH ROW EXECUTE FUNCTION pilotage_conformance_log.count_write();
CREATE OR REPLACE TRIGGER tickets_writes AFTER INSERT OR UPDATE OR DELETE ON pilotage_conformance.tickets
    FOR EACH ROW EXECUTE FUNCTION pilotage_conformance_log.count_write();
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'pilotage_conformance_agent') THEN
        CREATE ROLE pilotage_conformance_agent LOGIN;
    END IF;
END
$$;
GRANT USAGE ON SCHEMA pilotage_conformance, pilotage_conformance_archive TO pilotage_conformance_agent;
GRANT SELECT, INSERT, UPDATE ON pilotage_conformance.notes TO pilotage_conformance_agent;
GRANT SELECT, INSERT, UPDATE, DELETE ON pilotage_conformance.events TO pilotage_conformance_agent;
GRANT SELECT, INSERT ON pilotage_conformance.tickets TO pilotage_conformance_agent;
GRANT SELECT ON pilotage_conformance.labels, pilotage_conformance_archive.labels, pilotage_conformance.payroll
    TO pilotage_conformance_agent;
DO $$
BEGIN
    IF NOT has_schema_privilege('pilotage_conformance_agent', 'pilotage_demo', 'USAGE')
        OR NOT has_table_privilege('pilotage_conformance_agent', 'pilotage_demo.orders', 'SELECT') THEN
        GRANT USAGE ON SCHEMA pilotage_demo TO pilotage_conformance_agent;
        GRANT SELECT ON ALL TABLES IN SCHEMA pilotage_demo TO pilotage_conformance_agent;
    END IF;
END
$$;
"#;

/// sql/postgres-15's operator: the [`SQL_TENANT`] tenant, its data source,
/// an administrator pool for catalog changes and the write log.
struct SqlWorld<'s> {
    server: &'s Server,
    tenant: Arc<Tenant>,
    source: Arc<AttachedSource>,
    admin: sqlx::PgPool,
    /// This server's name in the write log.
    run: String,
    edits: AtomicU64,
}

impl<'s> SqlWorld<'s> {
    /// Sets up the scratch database and the [`SQL_TENANT`] tenant on
    /// `server`, whose demo tenant must have sql/postgres-15 (its
    /// `demo_postgres` set): the tenant gets the same Language and a data
    /// source reading the scratch and demo schemas as [`SQL_ROLE`].
    async fn attach(server: &'s Server) -> SqlWorld<'s> {
        let admin = sqlx::postgres::PgPoolOptions::new()
            .max_connections(2)
            .connect(&postgres_url())
            .await
            .expect("PostgreSQL at 127.0.0.1:5432 (see .ci/run)");
        let mut connection = admin.begin().await.expect("a transaction");
        sqlx::raw_sql(SQL_SETUP).execute(&mut *connection).await.expect("the scratch database is set up");
        connection.commit().await.expect("the set-up commits");

        let demo = server.platform.tenant("demo").expect("the demo tenant");
        let language = demo.language("sql/postgres-15").expect("the demo tenant has sql/postgres-15 (demo_postgres)");
        let tenant = server.platform.add_tenant(SQL_TENANT);
        tenant.install_language(LanguageSlot::new(language.component.clone(), server.platform.retention().clone()));

        // The connection names this server in the write log; the Language
        // cannot change the setting (SET is not in the subset).
        let run = unique("sqlconf");
        let mut url = reqwest::Url::parse(&postgres_url()).expect("the PostgreSQL URL parses");
        url.set_username(SQL_ROLE).expect("a user name");
        url.set_password(None).expect("no password");
        url.query_pairs_mut().append_pair("options", &format!("-c pilotage_conformance.run={run}"));
        let spec: DataSourceSpec = serde_json::from_value(json!({
            "schemas": ["pilotage_conformance", "pilotage_conformance_archive", "pilotage_demo"],
            "visibility": {"pilotage_conformance.payroll": [PAYROLL_SCOPE]},
            // The statement timeout is above the platform's wall-time
            // bound (1.5 s here): a statement gets the lower of the two,
            // so a slow Run is stopped at 1.5 s and ends `timeout`, not
            // `rolled_back`. Rows are kept generously enough to exceed
            // the component's memory (`resource_exhausted`).
            "bounds": {"statement_timeout_ms": 2_500, "max_rows": 100_000, "max_bytes": 16 << 20},
            "refresh_interval_s": 3_600
        }))
        .expect("the data source spec");
        let source = Arc::new(
            AttachedSource::new(
                "conformance",
                spec,
                url.as_str(),
                server.platform.runtime().clone(),
                server.platform.clock().clone(),
                Some(tenant.egress().clone()),
            )
            .expect("the data source"),
        );
        tenant.attach_data_source(source.clone());
        source.refresh(tenant.catalog()).await.expect("the scratch catalog is introspected");
        SqlWorld { server, tenant, source, admin, run, edits: AtomicU64::new(0) }
    }

    /// The tenant's MCP endpoint.
    fn endpoint(&self) -> String {
        format!("http://{}/t/{SQL_TENANT}/mcp", self.server.addr)
    }
}

impl Operator for SqlWorld<'_> {
    /// A new `COMMENT ON TABLE` (the entry's description), then a catalog
    /// refresh: the path a database change takes in production.
    fn change_description<'a>(&'a self, _language: &'a str, id: &'a str) -> OperatorFuture<'a, ()> {
        Box::pin(async move {
            let (schema, relation) = id.split_once('.').ok_or_else(|| not_found("not a schema.relation id"))?;
            let n = self.edits.fetch_add(1, Ordering::SeqCst);
            let statement = format!(
                "COMMENT ON TABLE {}.{} IS 'edited by {} ({n})'",
                quote_identifier(schema),
                quote_identifier(relation),
                self.run
            );
            sqlx::query(sqlx::AssertSqlSafe(statement))
                .execute(&self.admin)
                .await
                .map_err(|e| OperatorError::Failed(e.into()))?;
            let report =
                self.source.refresh(self.tenant.catalog()).await.map_err(|e| OperatorError::Failed(e.into()))?;
            if report.modified.iter().any(|m| m == id) {
                Ok(())
            } else {
                Err(OperatorError::NotObserved { what: format!("the refresh did not see {id}") })
            }
        })
    }

    /// An edit of the stored entry's `output_schema` in this server only
    /// (altering the shared table would move other tests' catalogs).
    fn change_load_bearing<'a>(&'a self, _language: &'a str, id: &'a str) -> OperatorFuture<'a, ()> {
        Box::pin(async move {
            let mut stored = self
                .tenant
                .with_catalog(|c| c.stored(id).map(|s| s.as_ref().clone()))
                .ok_or_else(|| not_found("no such entry"))?;
            let n = self.edits.fetch_add(1, Ordering::SeqCst);
            if let Some(schema) = stored.entry.output_schema.as_mut() {
                schema["properties"][format!("added_{n}")] = json!({"type": "string"});
            }
            self.tenant.put_entries(vec![stored]);
            Ok(())
        })
    }

    fn foreign_run<'a>(&'a self, language: &'a str) -> OperatorFuture<'a, String> {
        Box::pin(insert_foreign_run(self.server, SQL_TENANT, language))
    }

    /// Rows this server's Runs wrote and committed.
    fn effects(&self) -> u64 {
        let count = tokio::task::block_in_place(|| {
            tokio::runtime::Handle::current().block_on(
                sqlx::query_scalar::<_, i64>("SELECT count(*) FROM pilotage_conformance_log.writes WHERE run = $1")
                    .bind(&self.run)
                    .fetch_one(&self.admin),
            )
        });
        count.expect("the write log is readable") as u64
    }
}

pub fn vectors() -> VectorFile {
    let text =
        std::fs::read_to_string(spec_dir().join("conformance-vectors.json")).expect("the vector file is readable");
    let file: VectorFile = serde_json::from_str(&text).expect("the vector file parses");
    assert_eq!(file.vectors.len(), file.count);
    assert_eq!(file.count, 54);
    file
}

pub fn binding(name: &str) -> Binding {
    let path = crate::support::repository().join("tests/conformance").join(name);
    Binding::from_file(&path).expect("the binding parses")
}

/// A server for conformance: `retention`, a short execution bound so the
/// timeout cases are quick, and the demo's sql/postgres-15 when `sql`.
async fn conformance_server(backend: Backend, retention: &str, sql: bool) -> Server {
    let mut settings = settings(backend).await;
    settings.retention = retention.to_owned();
    settings.bounds.execution.wall_time_ms = 1_500;
    settings.request_timeout_ms = 12_000;
    if sql {
        settings.demo_postgres = postgres_url();
    }
    let server = server(settings).await;
    if sql {
        assert!(matches!(server.demo_sql, Some(Ok(_))), "the demo's SQL part: {:?}", server.demo_sql);
    }
    server
}

/// Checks a Language's results: nothing failed, every skip has a reason,
/// every vector is reported, and at least `passed_at_least` passed.
pub fn assert_results(backend: Backend, results: &[VectorResult], passed_at_least: usize) {
    eprintln!("{} on {backend:?}", summary(results));
    let failed: Vec<String> = results
        .iter()
        .filter_map(|r| match &r.verdict {
            Verdict::Failed { failures } => Some(format!("{}: {failures:?}", r.id)),
            _ => None,
        })
        .collect();
    for result in results {
        if let Verdict::Skipped { reason } = &result.verdict {
            eprintln!("skipped {}: {reason}", result.id);
            assert!(!reason.is_empty());
        }
    }
    assert!(failed.is_empty(), "failed vectors:\n{}", failed.join("\n"));
    let passed = results.iter().filter(|r| r.verdict == Verdict::Passed).count();
    assert_eq!(results.len(), 54, "every vector is reported");
    assert!(passed >= passed_at_least, "only {passed} vectors passed");
}

async fn run_workflow_vectors(backend: Backend) {
    let server = conformance_server(backend, "PT1H", false).await;
    let operator = InProcess { server: &server, edits: AtomicU64::new(0) };
    let connection = Connection::http(&server.mcp_url(), None).await.unwrap();
    let binding = binding("workflow.json");
    let runner = Runner::new(&connection, &binding, schema_document(), Some(&operator)).await.unwrap();
    assert_results(backend, &runner.run_all(&vectors()).await, 44);
    connection.close().await;
    server.stop().await;
}

async fn run_automation_vectors(backend: Backend) {
    let server = conformance_server(backend, "PT1H", false).await;
    let operator = InProcess { server: &server, edits: AtomicU64::new(0) };
    let connection = Connection::http(&server.mcp_url(), None).await.unwrap();
    let binding = binding("automation.json");
    let runner = Runner::new(&connection, &binding, schema_document(), Some(&operator)).await.unwrap();
    assert_results(backend, &runner.run_all(&vectors()).await, AUTOMATION_PASSED);
    connection.close().await;
    server.stop().await;
}

/// The vectors automation/1 passes: all 54 but the two client-target
/// ones, the five its binding lists as unreachable, and the four that do
/// not apply to it (it declares `catalog.changed_since` and
/// `execute.test_run`, has no `context_schema`, retains runs).
const AUTOMATION_PASSED: usize = 43;

async fn run_sql_vectors(backend: Backend) {
    let server = conformance_server(backend, "PT1H", true).await;
    let world = SqlWorld::attach(&server).await;
    let connection = Connection::http(&world.endpoint(), None).await.unwrap();
    let binding = binding("sql.json");
    let runner = Runner::new(&connection, &binding, schema_document(), Some(&world)).await.unwrap();
    // PIL-EXECUTE-ENGINE-ERROR-B is unreachable for sql (see the binding).
    assert_results(backend, &runner.run_all(&vectors()).await, 41);
    connection.close().await;
    server.stop().await;
}

/// The example Language's component (docs/writing-a-language.md).
pub fn recipe_component() -> std::path::PathBuf {
    pilotage_test_support::guest_file("recipe.wasm")
}

/// Runs `binding`'s vectors and completeness gate against the demo tenant of
/// a server serving `component` as a Language file (`serve --language`),
/// as a Language author's own component would be checked.
pub async fn run_language_file_vectors(component: std::path::PathBuf, binding: &Binding, passed_at_least: usize) {
    run_language_file_vectors_under(component, binding, passed_at_least, |_| {}).await;
}

/// As [`run_language_file_vectors`], on a server whose bounds `operator`
/// changes as an operator's configuration would (after the test settings,
/// whose execution wall time is 4 s: the binding's timeout case waits 5 s,
/// and its resource_exhausted case must reach the memory bound before the
/// wall time even in an interpreted Language on a loaded machine).
pub async fn run_language_file_vectors_under(
    component: std::path::PathBuf,
    binding: &Binding,
    passed_at_least: usize,
    operator: impl FnOnce(&mut pilotage_engine::Bounds),
) {
    let mut settings = settings(Backend::Sqlite).await;
    settings.retention = "PT1H".to_owned();
    settings.bounds.execution.wall_time_ms = 4_000;
    operator(&mut settings.bounds);
    settings.request_timeout_ms = 12_000;
    settings.languages = vec![component];
    let server = server(settings).await;
    let operator = InProcess { server: &server, edits: AtomicU64::new(0) };
    let connection = Connection::http(&server.mcp_url(), None).await.unwrap();
    let runner = Runner::new(&connection, binding, schema_document(), Some(&operator)).await.unwrap();
    assert_results(Backend::Sqlite, &runner.run_all(&vectors()).await, passed_at_least);
    let (codes, statuses) = declared_sets(&server.platform.tenant("demo").unwrap(), &binding.language);
    let gaps = runner.completeness(&codes, &statuses).await;
    assert!(gaps.is_empty(), "the completeness gate found gaps:\n{}", gaps.join("\n"));
    connection.close().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_vectors_pass_for_the_example_language_served_from_its_file() {
    run_language_file_vectors(recipe_component(), &binding("recipe.json"), 40).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_vectors_pass_for_workflow_on_sqlite() {
    run_workflow_vectors(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_vectors_pass_for_workflow_on_postgres() {
    run_workflow_vectors(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_vectors_pass_for_automation_on_sqlite() {
    run_automation_vectors(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_vectors_pass_for_automation_on_postgres() {
    run_automation_vectors(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_reachable_automation_closed_set_member_has_a_good_and_a_bad_case() {
    let server = conformance_server(Backend::Sqlite, "PT1H", false).await;
    let operator = InProcess { server: &server, edits: AtomicU64::new(0) };
    let connection = Connection::http(&server.mcp_url(), None).await.unwrap();
    let binding = binding("automation.json");
    let runner = Runner::new(&connection, &binding, schema_document(), Some(&operator)).await.unwrap();
    let (codes, statuses) = declared_sets(&server.platform.tenant("demo").unwrap(), "automation/1");
    assert!(codes.iter().any(|code| code == "trigger_needs_deploy"), "{codes:?}");
    let gaps = runner.completeness(&codes, &statuses).await;
    assert!(gaps.is_empty(), "the completeness gate found gaps:\n{}", gaps.join("\n"));
    connection.close().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_vectors_pass_for_sql_on_sqlite() {
    run_sql_vectors(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_vectors_pass_for_sql_on_postgres() {
    run_sql_vectors(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_true_is_unsupported_under_retention_none() {
    let server = conformance_server(Backend::Sqlite, "none", false).await;
    let operator = InProcess { server: &server, edits: AtomicU64::new(0) };
    let connection = Connection::http(&server.mcp_url(), None).await.unwrap();
    let binding = binding("workflow.json");
    let runner = Runner::new(&connection, &binding, schema_document(), Some(&operator)).await.unwrap();
    let vector = vectors().vectors.into_iter().find(|v| v.id == "PIL-EXECUTE-STORE-UNSUPPORTED-B").unwrap();
    assert_eq!(runner.run(&vector).await.unwrap(), Verdict::Passed);
    connection.close().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_true_is_unsupported_under_retention_none_for_sql() {
    let server = conformance_server(Backend::Sqlite, "none", true).await;
    let world = SqlWorld::attach(&server).await;
    let connection = Connection::http(&world.endpoint(), None).await.unwrap();
    let binding = binding("sql.json");
    let runner = Runner::new(&connection, &binding, schema_document(), Some(&world)).await.unwrap();
    let vector = vectors().vectors.into_iter().find(|v| v.id == "PIL-EXECUTE-STORE-UNSUPPORTED-B").unwrap();
    assert_eq!(runner.run(&vector).await.unwrap(), Verdict::Passed);
    connection.close().await;
    server.stop().await;
}

/// The declared closed sets of `language` on `tenant`.
fn declared_sets(tenant: &Tenant, language: &str) -> (Vec<String>, Vec<String>) {
    let description = tenant.language(language).unwrap().description().clone();
    let codes = description.diagnostic_codes.iter().map(|c| c.code.clone()).collect();
    let statuses = description.run_statuses.iter().map(|s| s.status.clone()).collect();
    (codes, statuses)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_reachable_closed_set_member_has_a_good_and_a_bad_case() {
    let server = conformance_server(Backend::Sqlite, "PT1H", false).await;
    let operator = InProcess { server: &server, edits: AtomicU64::new(0) };
    let connection = Connection::http(&server.mcp_url(), None).await.unwrap();
    let binding = binding("workflow.json");
    let runner = Runner::new(&connection, &binding, schema_document(), Some(&operator)).await.unwrap();
    let (codes, statuses) = declared_sets(&server.platform.tenant("demo").unwrap(), "workflow/v1");
    let gaps = runner.completeness(&codes, &statuses).await;
    assert!(gaps.is_empty(), "the completeness gate found gaps:\n{}", gaps.join("\n"));
    connection.close().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_reachable_sql_closed_set_member_has_a_good_and_a_bad_case() {
    let server = conformance_server(Backend::Sqlite, "PT1H", true).await;
    let world = SqlWorld::attach(&server).await;
    let connection = Connection::http(&world.endpoint(), None).await.unwrap();
    let binding = binding("sql.json");
    let runner = Runner::new(&connection, &binding, schema_document(), Some(&world)).await.unwrap();
    let (codes, statuses) = declared_sets(&world.tenant, "sql/postgres-15");
    let gaps = runner.completeness(&codes, &statuses).await;
    assert!(gaps.is_empty(), "the completeness gate found gaps:\n{}", gaps.join("\n"));
    connection.close().await;
    server.stop().await;
}

/// The vectors pass as before against a tenant whose policy on risk is
/// strict (issue 28): destructive plans denied, write plans within a
/// budget. No workflow vector executes a destructive plan, so every
/// result is what it is under the default policy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_vectors_pass_for_workflow_under_a_strict_policy() {
    let server = conformance_server(Backend::Sqlite, "PT1H", false).await;
    let policy: pilotage_server::policy::Policy = serde_json::from_value(serde_json::json!({
        "rules": [{"risk": "destructive", "decision": "deny"}, {"risk": "write", "decision": "allow", "open_world": true}],
        "budgets": [{"risk": "write", "runs": 1000, "window_s": 3600}]
    }))
    .unwrap();
    assert!(!policy.allows_all());
    server.platform.tenant("demo").unwrap().set_policy(policy);
    let operator = InProcess { server: &server, edits: AtomicU64::new(0) };
    let connection = Connection::http(&server.mcp_url(), None).await.unwrap();
    let binding = binding("workflow.json");
    let runner = Runner::new(&connection, &binding, schema_document(), Some(&operator)).await.unwrap();
    assert_results(Backend::Sqlite, &runner.run_all(&vectors()).await, 44);
    connection.close().await;
    server.stop().await;
}
