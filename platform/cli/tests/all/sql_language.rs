//! sql/postgres-15 through the real component, the host's guarantees and
//! the machine's PostgreSQL (`PILOTAGE_TEST_POSTGRES`, else
//! postgres://postgres@127.0.0.1:5432/test): the Part I story, every
//! diagnostic code in both polarities, the known bypasses refused before
//! any transaction opens, invisible tables kept out of hints and out of
//! reach of unqualified names, rollback on failure and at commit, caps,
//! the Run's wall time stopping a statement, introspection, and the
//! figures (validate latency, introspection time for 500 tables).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use pilotage_engine::bounds::{Bounds, CallBounds};
use pilotage_engine::catalog::CatalogSnapshot;
use pilotage_engine::description::ProgramKind;
use pilotage_engine::effects::{DataSource, SqlError, SqlSession};
use pilotage_engine::execution::{self, Execution, ExecutionRequest};
use pilotage_engine::host::{CommitError, SqlResult};
use pilotage_engine::lint::lint;
use pilotage_engine::validation::{self, Program, Validated};
use pilotage_engine::{Component, Engine};
use pilotage_protocol::catalog::CatalogEntry;
use pilotage_protocol::diagnostic::Locator;
use pilotage_protocol::risk::RiskHints;
use pilotage_protocol::trace::{TraceLevel, at_level};
use pilotage_server::datasource::attached::{AttachedSource, DataSourceSpec};
use pilotage_server::datasource::demo::ensure_demo_database;
use pilotage_server::datasource::{PostgresConfig, PostgresDataSource};
use pilotage_server::tenancy::Tenant;
use serde_json::{Value, json};

use crate::endpoint::unique;
use crate::support::{FnInvoker, assert_schema, engine, test_bounds};

fn admin_url() -> String {
    std::env::var("PILOTAGE_TEST_POSTGRES").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("a runtime")
    })
}

/// Drives one of the engine's calls to completion on the tests' runtime
/// (the data sources' connections live there).
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    runtime().block_on(future)
}

fn sql() -> &'static Component {
    static COMPONENT: OnceLock<Component> = OnceLock::new();
    COMPONENT.get_or_init(|| engine().load(pilotage_bundled::SQL).expect("sql loads"))
}

/// The demo database, read through its read-only role.
fn demo() -> &'static Arc<PostgresDataSource> {
    static DEMO: OnceLock<Arc<PostgresDataSource>> = OnceLock::new();
    DEMO.get_or_init(|| {
        let config = runtime().block_on(ensure_demo_database(&admin_url())).expect("the demo database is set up");
        Arc::new(PostgresDataSource::new(config, runtime().handle().clone()).expect("a data source"))
    })
}

fn demo_entries() -> &'static Vec<CatalogEntry> {
    static ENTRIES: OnceLock<Vec<CatalogEntry>> = OnceLock::new();
    ENTRIES.get_or_init(|| runtime().block_on(demo().introspect()).expect("introspection"))
}

fn demo_catalog() -> CatalogSnapshot {
    CatalogSnapshot::hashed(demo_entries().clone())
}

const SCRATCH_SETUP: &str = "
SELECT pg_advisory_xact_lock(4242);
CREATE SCHEMA IF NOT EXISTS pilotage_sqltest;
CREATE TABLE IF NOT EXISTS pilotage_sqltest.notes (id integer PRIMARY KEY, body text NOT NULL, created date);
CREATE TABLE IF NOT EXISTS pilotage_sqltest.sentinel (id integer PRIMARY KEY);
INSERT INTO pilotage_sqltest.sentinel VALUES (1) ON CONFLICT DO NOTHING;
CREATE SEQUENCE IF NOT EXISTS pilotage_sqltest.counter;
";

/// A writable schema, through the administrator role (entries are
/// `destructive`: it may do anything).
fn scratch() -> &'static Arc<PostgresDataSource> {
    static SCRATCH: OnceLock<Arc<PostgresDataSource>> = OnceLock::new();
    SCRATCH.get_or_init(|| {
        admin(&format!("BEGIN; {SCRATCH_SETUP} COMMIT;"));
        let config = PostgresConfig::new(admin_url(), ["pilotage_sqltest"]);
        Arc::new(PostgresDataSource::new(config, runtime().handle().clone()).expect("a data source"))
    })
}

fn scratch_catalog() -> CatalogSnapshot {
    CatalogSnapshot::hashed(runtime().block_on(scratch().introspect()).expect("introspection"))
}

/// Runs host-side SQL as the administrator.
fn admin(statements: &str) {
    runtime().block_on(async {
        use sqlx::Connection;
        let mut connection = sqlx::PgConnection::connect(&admin_url()).await.expect("PostgreSQL is reachable");
        sqlx::raw_sql(sqlx::AssertSqlSafe(statements.to_owned())).execute(&mut connection).await.expect("admin SQL");
    });
}

/// One value read as the administrator.
fn admin_value(query: &str) -> i64 {
    runtime().block_on(async {
        use sqlx::Connection;
        let mut connection = sqlx::PgConnection::connect(&admin_url()).await.expect("PostgreSQL is reachable");
        sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(query.to_owned()))
            .fetch_one(&mut connection)
            .await
            .expect("admin query")
    })
}

fn program(text: &str) -> Program {
    Program::from_argument(ProgramKind::Text, &json!(text), 1 << 20, 64).unwrap()
}

fn validate_in(text: &str, catalog: &CatalogSnapshot) -> Validated {
    let validated = block_on(validation::validate(sql(), &program(text), None, catalog)).expect("validation runs");
    assert_schema("ValidateResponse", &serde_json::to_value(&validated.response).unwrap());
    validated
}

fn validate(text: &str) -> Validated {
    validate_in(text, &demo_catalog())
}

fn codes(validated: &Validated) -> Vec<&str> {
    validated.response.diagnostics.iter().map(|d| d.code.as_str()).collect()
}

/// A data source that counts the transactions it opens.
struct Counting {
    inner: Arc<PostgresDataSource>,
    begins: AtomicUsize,
}

#[async_trait::async_trait]
impl DataSource for Counting {
    async fn begin(&self, read_only: bool, deadline: Option<Instant>) -> Result<Box<dyn SqlSession>, SqlError> {
        self.begins.fetch_add(1, Ordering::SeqCst);
        self.inner.begin(read_only, deadline).await
    }
}

fn no_invoker() -> Arc<dyn pilotage_engine::effects::Invoker> {
    Arc::new(FnInvoker(|_: &CatalogEntry, _: &Value| {
        Err(pilotage_engine::effects::InvokeError::Unavailable("sql/postgres-15 invokes no entries".to_owned()))
    }))
}

/// Executes `text` as the host would after validation (input binding
/// included), on `source`.
fn execute_on(
    text: &str,
    input: Option<Value>,
    catalog: &CatalogSnapshot,
    source: Arc<dyn DataSource>,
) -> (Validated, Execution) {
    execute_with(sql(), text, input, catalog, source)
}

/// [`execute_on`] with another load of the component (other bounds).
fn execute_with(
    component: &Component,
    text: &str,
    input: Option<Value>,
    catalog: &CatalogSnapshot,
    source: Arc<dyn DataSource>,
) -> (Validated, Execution) {
    let program = program(text);
    let validated = block_on(validation::validate(component, &program, None, catalog)).expect("validation runs");
    assert_schema("ValidateResponse", &serde_json::to_value(&validated.response).unwrap());
    let bound = block_on(validation::bind_input(component, &program, input.as_ref())).expect("bind-input runs");
    assert!(bound.is_empty(), "{bound:?}");
    let execution = block_on(execution::execute(
        component,
        ExecutionRequest {
            program: &program,
            input: input.as_ref(),
            context: None,
            plan: validated.plan.as_ref(),
            references: &validated.references,
            catalog: catalog.clone(),
            invoker: no_invoker(),
            statements: &validated.statements,
            data_source: Some(source),
            test_run: false,
            deploy: false,
            clock_ms: None,
            run_id: "run_sql_test",
        },
    ));
    assert_schema("Trace", &serde_json::to_value(&execution.trace).unwrap());
    (validated, execution)
}

fn run(text: &str, input: Option<Value>) -> Execution {
    let (validated, execution) = execute_on(text, input, &demo_catalog(), demo().clone());
    assert!(validated.response.valid, "{text}: {:?}", validated.response.diagnostics);
    execution
}

#[test]
fn the_sql_component_lints_clean() {
    let findings = lint(sql().description());
    assert!(findings.is_empty(), "{findings:#?}");
    let description = sql().description();
    assert_eq!(description.name, "sql/postgres-15");
    assert_eq!(description.program_argument, "query");
}

const STORY: &str = "SELECT c.name, date_trunc('month', o.ordered_at) AS month, sum(o.total) AS revenue
FROM customers c
JOIN orders o ON o.customer_id = c.id
WHERE o.status <> 'cancelled'
GROUP BY c.name, month
ORDER BY month, revenue DESC";

#[test]
fn the_part_one_story_runs_against_the_demo_database() {
    // Lookup: the tables, read-only for the demo role.
    let ids: Vec<&str> = demo_entries().iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids, ["pilotage_demo.customers", "pilotage_demo.order_lines", "pilotage_demo.orders"]);
    assert!(demo_entries().iter().all(|e| e.risk == "safe" && e.risk_hints == RiskHints::SAFE));

    // A wrong column: unknown_column, the close-match hint, a text range.
    let wrong = validate(STORY);
    assert!(!wrong.response.valid);
    let finding = &wrong.response.diagnostics[0];
    assert_eq!(finding.code, "unknown_column");
    assert_eq!(finding.hint.as_deref(), Some("close match: total_amount"));
    let Locator::Range(range) = &finding.path else { panic!("a text range") };
    assert_eq!((range.start.line, range.start.column), (1, 64));
    assert_eq!(wrong.response.catalog_version.as_deref(), Some(demo_catalog().catalog_version()));

    // Fixed: valid, planned read-only and safe.
    let fixed = STORY.replace("sum(o.total)", "sum(o.total_amount)");
    let validated = validate(&fixed);
    assert!(validated.response.valid, "{:?}", validated.response.diagnostics);
    let plan = validated.response.plan.as_ref().unwrap();
    assert_eq!(plan.max_risk, "safe");
    assert_eq!(plan.max_risk_hints, RiskHints::SAFE);
    let planned: Vec<(&str, Option<&str>)> = plan.steps.iter().map(|s| (s.id.as_str(), s.calls.as_deref())).collect();
    assert_eq!(
        planned,
        [
            ("stmt-1", None),
            ("stmt-1.ref-1", Some("pilotage_demo.customers")),
            ("stmt-1.ref-2", Some("pilotage_demo.orders"))
        ]
    );

    // Executed: the trace shows rows_matched, even at summary.
    let execution = run(&fixed, None);
    assert!(execution.outcome.ok, "{:?} {:?}", execution.outcome, execution.faults);
    assert!(execution.faults.is_empty());
    let traced: Vec<(&str, Option<&str>)> =
        execution.trace.steps.iter().map(|s| (s.id.as_str(), s.calls.as_deref())).collect();
    assert_eq!(traced, planned);
    let statement = execution.trace.steps[0].output.as_ref().unwrap();
    let rows_matched = statement["rows_matched"].as_u64().unwrap();
    assert!(rows_matched > 50, "{rows_matched}");
    assert_eq!(statement["rows_returned"].as_u64(), Some(rows_matched));
    let output = execution.output.as_ref().unwrap().as_array().unwrap();
    assert_eq!(output.len() as u64, rows_matched);
    assert!(output[0]["revenue"].as_str().unwrap().contains('.'), "numeric renders exactly: {}", output[0]);
    assert!(output[0]["month"].as_str().unwrap().ends_with('Z'));
    let summary = at_level(&execution.trace, TraceLevel::Summary).unwrap();
    assert!(summary.steps[0].output.as_ref().unwrap().to_string().contains("rows_matched"));
    assert_schema("Trace", &serde_json::to_value(&summary).unwrap());
}

#[test]
fn every_diagnostic_code_in_both_polarities_through_the_component() {
    let cases: [(&str, &str, &str); 15] = [
        ("syntax_error", "SELEC name FROM customers", "SELECT name FROM customers LIMIT 1"),
        ("unknown_table", "SELECT name FROM customer LIMIT 1", "SELECT name FROM customers LIMIT 1"),
        ("ambiguous_table", "SELECT id FROM pilotage_demo LIMIT 1", "SELECT id FROM orders LIMIT 1"),
        ("unknown_column", "SELECT nmae FROM customers LIMIT 1", "SELECT name FROM customers LIMIT 1"),
        (
            "ambiguous_column",
            "SELECT id FROM customers JOIN orders ON orders.customer_id = customers.id LIMIT 1",
            "SELECT orders.id FROM customers JOIN orders ON orders.customer_id = customers.id LIMIT 1",
        ),
        ("statement_not_allowed", "TRUNCATE orders", "SELECT count(*) FROM orders"),
        ("function_not_allowed", "SELECT pg_sleep(1)", "SELECT now()"),
        ("type_not_allowed", "SELECT NULL::pilotage_demo.customers", "SELECT NULL::integer"),
        ("multiple_statements", "SELECT 1; DELETE FROM orders", "SELECT 1; SELECT 2"),
        ("parameter_mismatch", "SELECT name FROM customers WHERE id = $2", "SELECT name FROM customers WHERE id = $1"),
        (
            "unsupported_syntax",
            "SELECT name, rank() OVER w FROM customers WINDOW w AS (ORDER BY id)",
            "SELECT name, rank() OVER (ORDER BY id) FROM customers",
        ),
        ("read_only_relation", "DELETE FROM orders WHERE id = 0", "SELECT id FROM orders WHERE id = 0"),
        ("select_star", "SELECT * FROM customers LIMIT 1", "SELECT id FROM customers LIMIT 1"),
        ("no_limit", "SELECT id FROM customers", "SELECT id FROM customers LIMIT 1"),
        ("missing_where", "DELETE FROM pilotage_sqltest.notes", "DELETE FROM pilotage_sqltest.notes WHERE id = 0"),
    ];
    let mut catalog_entries = demo_entries().clone();
    catalog_entries.extend(runtime().block_on(scratch().introspect()).expect("introspection"));
    // Two visible relations named `pilotage_demo` in other schemas make
    // an ambiguous name; they exist only in this snapshot.
    for schema in ["a", "b"] {
        let mut twin = demo_entries()[2].clone();
        twin.id = format!("{schema}.pilotage_demo");
        twin.name = "pilotage_demo".into();
        catalog_entries.push(twin);
    }
    let catalog = CatalogSnapshot::hashed(catalog_entries);
    let declared: Vec<String> = sql().description().diagnostic_codes.iter().map(|c| c.code.clone()).collect();
    for (code, bad, good) in cases {
        assert!(declared.iter().any(|d| d == code), "{code} is declared");
        let earned = validate_in(bad, &catalog);
        assert!(codes(&earned).contains(&code), "{bad}: expected {code}, got {:?}", earned.response.diagnostics);
        let clean = validate_in(good, &catalog);
        assert!(!codes(&clean).contains(&code), "{good}: {:?}", clean.response.diagnostics);
        assert!(clean.response.valid, "{good}: {:?}", clean.response.diagnostics);
    }
    // The reserved codes: context_binding from the host, input_binding
    // from bind-input.
    let with_context =
        block_on(validation::validate(sql(), &program("SELECT 1"), Some(&json!({"x": 1})), &demo_catalog())).unwrap();
    assert_eq!(codes(&with_context), ["context_binding"]);
    let bound =
        block_on(validation::bind_input(sql(), &program("SELECT name FROM customers WHERE id = $1"), Some(&json!([]))))
            .unwrap();
    assert_eq!(bound[0].code, "input_binding");
    assert_eq!(bound[0].path, Locator::Pointer(String::new()));
    let fine = block_on(validation::bind_input(
        sql(),
        &program("SELECT name FROM customers WHERE id = $1"),
        Some(&json!([3])),
    ))
    .unwrap();
    assert!(fine.is_empty());
}

#[test]
fn every_guide_example_validates_and_runs_on_the_demo_database() {
    let mut count = 0;
    for guide in &sql().description().guides {
        let mut lines = guide.body.lines().peekable();
        let mut examples: Vec<(String, Option<Value>)> = Vec::new();
        let mut after_sql = false;
        while let Some(line) = lines.next() {
            let fence = line.trim();
            if fence == "```sql" || fence == "```json" {
                let block: Vec<&str> = lines.by_ref().take_while(|l| l.trim() != "```").collect();
                let block = block.join("\n");
                if fence == "```sql" {
                    examples.push((block, None));
                    after_sql = true;
                } else if after_sql {
                    examples.last_mut().unwrap().1 = Some(serde_json::from_str(&block).expect("example input is JSON"));
                    after_sql = false;
                }
            } else if !fence.is_empty() {
                after_sql = false;
            }
        }
        for (text, input) in examples {
            count += 1;
            let execution = run(&text, input);
            assert!(execution.outcome.ok, "{text}: {:?} {:?}", execution.outcome, execution.faults);
            let last = execution.trace.steps.iter().rev().find(|s| s.calls.is_none()).unwrap();
            assert!(last.output.as_ref().unwrap()["rows_matched"].as_u64().unwrap() > 0, "{text} returns rows");
        }
    }
    assert!(count >= 6, "{count} examples");
}

/// The bypasses other SQL servers fell for: each is invalid, no
/// transaction is ever opened for it, and the database is unchanged.
#[test]
fn known_bypasses_are_refused_before_reaching_the_database() {
    let catalog = scratch_catalog();
    let before = admin_value("SELECT count(*) FROM pilotage_sqltest.sentinel");
    let counter_before = admin_value("SELECT last_value FROM pilotage_sqltest.counter");
    let bypasses = [
        "-- list the sentinel\nSELECT id FROM sentinel LIMIT 1; DROP TABLE pilotage_sqltest.sentinel",
        "/* harmless */ SELECT 1; DELETE FROM sentinel",
        "SELECT id FROM sentinel LIMIT 1; DELETE FROM sentinel WHERE id = 1",
        "SET TRANSACTION READ WRITE; DELETE FROM sentinel",
        "SELECT id FROM sentinel LIMIT 1; SET TRANSACTION READ WRITE",
        "COMMIT; DROP TABLE pilotage_sqltest.sentinel",
        "SELECT nextval('pilotage_sqltest.counter')",
        "SELECT set_config('default_transaction_read_only', 'off', false)",
        "WITH gone AS (DELETE FROM sentinel RETURNING id) SELECT count(*) FROM gone",
        "SELECT id FROM sentinel FOR UPDATE",
        "SET ROLE postgres",
        "SELECT id FROM sentinel; COPY sentinel TO STDOUT",
        "SELECT dblink_exec('dbname=test', 'DROP TABLE pilotage_sqltest.sentinel')",
    ];
    for text in bypasses {
        let counting = Arc::new(Counting { inner: scratch().clone(), begins: AtomicUsize::new(0) });
        let program = program(text);
        let validated = validate_in(text, &catalog);
        assert!(!validated.response.valid, "{text} must be invalid");
        assert!(validated.statements.is_empty(), "{text}: no statement may run");
        // Even a host that executed it anyway could run nothing.
        let execution = block_on(execution::execute(
            sql(),
            ExecutionRequest {
                program: &program,
                input: None,
                context: None,
                plan: validated.plan.as_ref(),
                references: &validated.references,
                catalog: catalog.clone(),
                invoker: no_invoker(),
                statements: &validated.statements,
                data_source: Some(counting.clone()),
                test_run: false,
                deploy: false,
                clock_ms: None,
                run_id: "run_bypass",
            },
        ));
        assert!(!execution.outcome.ok, "{text}");
        assert_eq!(counting.begins.load(Ordering::SeqCst), 0, "{text} opened a transaction");
    }
    assert_eq!(admin_value("SELECT count(*) FROM pilotage_sqltest.sentinel"), before);
    assert_eq!(admin_value("SELECT last_value FROM pilotage_sqltest.counter"), counter_before);
}

#[test]
fn a_read_only_plan_runs_in_a_read_only_transaction() {
    let session = block_on(scratch().begin(true, None)).expect("a transaction");
    let mut session = session;
    let refused = block_on(session.query("INSERT INTO pilotage_sqltest.notes (id, body) VALUES (-1, 'x')", &json!([])));
    assert!(refused.unwrap_err().to_string().contains("read-only transaction"));
    block_on(session.rollback());
    assert_eq!(admin_value("SELECT count(*) FROM pilotage_sqltest.notes WHERE id = -1"), 0);
}

#[test]
fn invisible_tables_are_never_named_in_hints() {
    let visible: Vec<CatalogEntry> =
        demo_entries().iter().filter(|e| e.id != "pilotage_demo.order_lines").cloned().collect();
    let without = CatalogSnapshot::hashed(visible);
    for text in ["SELECT product FROM order_line LIMIT 1", "SELECT product FROM order_lines LIMIT 1"] {
        let validated = validate_in(text, &without);
        assert_eq!(codes(&validated), ["unknown_table"], "{text}");
        let finding = &validated.response.diagnostics[0];
        assert!(!finding.message.contains("order_lines") || text.contains("order_lines"));
        assert!(finding.hint.as_deref().is_none_or(|h| !h.contains("order_lines")), "{finding:?}");
    }
    // Visible, the same mistake is hinted.
    let validated = validate("SELECT product FROM order_line LIMIT 1");
    assert_eq!(validated.response.diagnostics[0].hint.as_deref(), Some("close match: order_lines"));
}

#[test]
fn writes_commit_on_success_and_roll_back_on_failure() {
    let catalog = scratch_catalog();
    let notes = catalog.get("pilotage_sqltest.notes").unwrap();
    assert_eq!(notes.risk, "destructive");
    assert!(notes.input_schema.as_ref().unwrap()["required"].as_array().unwrap().contains(&json!("body")));
    admin("DELETE FROM pilotage_sqltest.notes WHERE id BETWEEN 1000 AND 1099");

    let insert = "INSERT INTO notes (id, body, created) VALUES ($1, $2, $3) RETURNING id, body, created";
    let (validated, execution) =
        execute_on(insert, Some(json!([1001, "first", "2025-02-03"])), &catalog, scratch().clone());
    assert_eq!(validated.response.plan.as_ref().unwrap().max_risk, "write");
    assert!(execution.outcome.ok, "{:?} {:?}", execution.outcome, execution.faults);
    assert_eq!(execution.output, Some(json!([{"id": 1001, "body": "first", "created": "2025-02-03"}])));
    assert_eq!(admin_value("SELECT count(*) FROM pilotage_sqltest.notes WHERE id = 1001"), 1);

    // The second row violates NOT NULL: the statement fails, the Run is
    // rolled_back with its trace, and the first row is not kept.
    let failing = "INSERT INTO notes (id, body) VALUES (1002, 'kept?'), (1003, NULL)";
    let (_, execution) = execute_on(failing, None, &catalog, scratch().clone());
    assert_eq!(execution.outcome.status, "rolled_back", "{:?}", execution.outcome);
    assert!(!execution.outcome.ok);
    assert!(execution.outcome.error.as_deref().unwrap().contains("23502"), "{:?}", execution.outcome);
    assert_eq!(execution.trace.steps[0].id, "stmt-1");
    assert!(!execution.trace.steps[0].outcome.ok);
    assert!(execution.faults.is_empty(), "{:?}", execution.faults);
    assert_eq!(admin_value("SELECT count(*) FROM pilotage_sqltest.notes WHERE id IN (1002, 1003)"), 0);

    // A value that does not fit its parameter's type fails the same way.
    let (_, execution) = execute_on(insert, Some(json!(["x", "y", "z"])), &catalog, scratch().clone());
    assert_eq!(execution.outcome.status, "rolled_back");
    assert!(execution.outcome.error.as_deref().unwrap().contains("$1"));

    let delete = "DELETE FROM notes WHERE id = $1 RETURNING id";
    let (validated, execution) = execute_on(delete, Some(json!([1001])), &catalog, scratch().clone());
    let plan = validated.response.plan.unwrap();
    assert_eq!(plan.max_risk, "destructive");
    assert!(plan.max_risk_hints.requires_approval());
    assert!(execution.outcome.ok);
    assert_eq!(execution.trace.steps[0].output.as_ref().unwrap()["rows_matched"], 1);
    assert_eq!(admin_value("SELECT count(*) FROM pilotage_sqltest.notes WHERE id = 1001"), 0);
}

#[test]
fn caps_and_the_statement_timeout_bound_each_statement() {
    let mut config = demo().config().clone();
    config.max_rows = 5;
    config.statement_timeout = Duration::from_millis(300);
    let capped = Arc::new(PostgresDataSource::new(config, runtime().handle().clone()).unwrap());
    let (_, execution) = execute_on("SELECT id FROM order_lines ORDER BY id", None, &demo_catalog(), capped.clone());
    assert!(execution.outcome.ok);
    let output = execution.trace.steps[0].output.as_ref().unwrap();
    assert_eq!(output["rows_matched"], 750);
    assert_eq!(output["rows_returned"], 5);
    assert_eq!(output["truncated"], true);
    assert_eq!(execution.output.as_ref().unwrap().as_array().unwrap().len(), 5);

    let started = Instant::now();
    let slow = "SELECT count(*) FROM orders a, orders b, orders c, order_lines d";
    let (_, execution) = execute_on(slow, None, &demo_catalog(), capped);
    assert_eq!(execution.outcome.status, "rolled_back", "{:?}", execution.outcome);
    assert!(execution.outcome.error.as_deref().unwrap().contains("statement timeout"));
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn a_failure_in_a_script_keeps_the_trace_so_far() {
    let text = "SELECT count(*) AS n FROM customers; SELECT 1 / (count(*) - count(*)) FROM orders";
    let execution = run(text, None);
    assert_eq!(execution.outcome.status, "rolled_back");
    let ids: Vec<&str> = execution.trace.steps.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["stmt-1", "stmt-1.ref-1", "stmt-2", "stmt-2.ref-1"]);
    assert!(execution.trace.steps[0].outcome.ok && !execution.trace.steps[2].outcome.ok);
    assert!(execution.faults.is_empty(), "{:?}", execution.faults);
    assert!(execution.output.is_none());
}

#[test]
fn parameters_bind_by_inferred_type() {
    let text = "SELECT count(*) AS n FROM orders WHERE customer_id = $1 AND ordered_at >= $2 AND total_amount > $3";
    let execution = run(text, Some(json!({"params": [1, "2025-01-01T00:00:00Z", "10.50"]})));
    assert!(execution.outcome.ok, "{:?}", execution.outcome);
    let count = execution.output.as_ref().unwrap()[0]["n"].as_i64().unwrap();
    let expected = admin_value(
        "SELECT count(*) FROM pilotage_demo.orders WHERE customer_id = 1 AND ordered_at >= '2025-01-01Z' AND total_amount > 10.50",
    );
    assert_eq!(count, expected);
}

#[test]
fn catalog_version_moves_with_columns_not_rows() {
    admin(
        "BEGIN; SELECT pg_advisory_xact_lock(4343); DROP SCHEMA IF EXISTS pilotage_sqldrift CASCADE; CREATE SCHEMA pilotage_sqldrift; CREATE TABLE pilotage_sqldrift.items (id integer PRIMARY KEY); COMMIT;",
    );
    let source =
        PostgresDataSource::new(PostgresConfig::new(admin_url(), ["pilotage_sqldrift"]), runtime().handle().clone())
            .unwrap();
    let version =
        || CatalogSnapshot::hashed(runtime().block_on(source.introspect()).unwrap()).catalog_version().to_owned();
    let first = version();
    admin("INSERT INTO pilotage_sqldrift.items VALUES (1), (2)");
    assert_eq!(version(), first, "a row insert does not move catalog_version");
    admin("ALTER TABLE pilotage_sqldrift.items ADD COLUMN label text");
    let second = version();
    assert_ne!(second, first, "a new column moves catalog_version");
    let entry = runtime().block_on(source.introspect()).unwrap().remove(0);
    assert!(entry.output_schema.unwrap()["properties"].get("label").is_some());
}

#[test]
fn an_unreachable_database_is_a_clear_error() {
    let mut config = PostgresConfig::new("postgres://postgres@127.0.0.1:1/test", ["public"]);
    config.connect_timeout = Duration::from_millis(500);
    let source = PostgresDataSource::new(config, runtime().handle().clone()).unwrap();
    let error = runtime().block_on(source.check()).unwrap_err();
    assert!(error.to_string().contains("unreachable at 127.0.0.1:1/test"), "{error}");
    let demo = runtime().block_on(ensure_demo_database("postgres://postgres@127.0.0.1:1/test")).unwrap_err();
    assert!(demo.to_string().contains("unreachable"), "{demo}");
    assert!(block_on(source.begin(true, None)).is_err());
}

#[test]
fn long_operator_chains_validate_within_the_component_bounds() {
    // Just under the Language's operator bound: valid, no trap.
    let long = format!("SELECT id FROM orders WHERE id > 0{} LIMIT 1", " AND total_amount > 0".repeat(480));
    let validated = validate(&long);
    assert!(validated.response.valid, "{:?}", validated.response.diagnostics);
    let chain = format!("SELECT 1{} AS n", " + 1".repeat(999));
    assert!(validate(&chain).response.valid);
    // Beyond it: a diagnostic, not a crash or a request error.
    let beyond = format!("SELECT 1{} AS n", " + 1".repeat(20_000));
    assert_eq!(codes(&validate(&beyond)), ["unsupported_syntax"]);
}

/// Figure: validation latency of a three-join query through the
/// component (median of many calls; printed for the closing note).
#[test]
fn validate_latency_of_a_three_join_query() {
    let text = "SELECT c.name, o.id, l.product, l.quantity * l.unit_price AS amount
FROM customers c
JOIN orders o ON o.customer_id = c.id
JOIN order_lines l ON l.order_id = o.id
WHERE c.country = $1 AND o.status <> 'cancelled'
ORDER BY amount DESC
LIMIT 10";
    let catalog = demo_catalog();
    let program = program(text);
    let first = block_on(validation::validate(sql(), &program, None, &catalog)).unwrap();
    assert!(first.response.valid);
    assert_eq!(first.response.plan.as_ref().unwrap().steps.len(), 4);
    let mut samples: Vec<Duration> = (0..60)
        .map(|_| {
            let started = Instant::now();
            let validated = block_on(validation::validate(sql(), &program, None, &catalog)).unwrap();
            assert!(validated.response.valid);
            started.elapsed()
        })
        .collect();
    samples.sort();
    let median = samples[samples.len() / 2];
    eprintln!(
        "FIGURE validate latency, 3-join query through the component: median {median:?} over {} calls",
        samples.len()
    );
    assert!(median < Duration::from_millis(500), "median {median:?}");
}

/// Figure: catalog introspection time for a schema with 500 tables.
#[test]
fn introspection_of_500_tables() {
    admin(
        "BEGIN; SELECT pg_advisory_xact_lock(4444); CREATE SCHEMA IF NOT EXISTS pilotage_sqlbench;
         DO $$ BEGIN FOR i IN 1..500 LOOP
           EXECUTE format('CREATE TABLE IF NOT EXISTS pilotage_sqlbench.t%s (id integer PRIMARY KEY, name text NOT NULL, amount numeric(10,2), created timestamptz)', i);
         END LOOP; END $$; COMMIT;",
    );
    let source =
        PostgresDataSource::new(PostgresConfig::new(admin_url(), ["pilotage_sqlbench"]), runtime().handle().clone())
            .unwrap();
    runtime().block_on(source.check()).unwrap();
    let started = Instant::now();
    let entries = runtime().block_on(source.introspect()).unwrap();
    let elapsed = started.elapsed();
    assert_eq!(entries.len(), 500);
    assert!(entries.iter().all(|e| e.output_schema.as_ref().unwrap()["properties"].as_object().unwrap().len() == 4));
    eprintln!("FIGURE introspection of a 500-table schema: {elapsed:?}");
    assert!(elapsed < Duration::from_secs(10));
}

#[test]
fn data_source_results_render_by_column_type() {
    let mut session = block_on(demo().begin(true, None)).unwrap();
    let result: SqlResult = block_on(session.query(
            "SELECT 1::int2 AS a, 2::int8 AS b, 1.5::float8 AS c, 12.30::numeric AS d, true AS e, 'x'::text AS f, \
             DATE '2025-01-02' AS g, TIMESTAMP '2025-01-02 03:04:05.5' AS h, TIMESTAMPTZ '2025-01-02 03:04:05+02' AS i, \
             '{\"k\": [1]}'::jsonb AS j, '123e4567-e89b-12d3-a456-426614174000'::uuid AS k, ARRAY[1, NULL, 3] AS l, \
             NULL::text AS m, '1 day'::interval AS n, ARRAY['a', 'b'] AS o",
            &json!([]),
        ))
        .unwrap();
    block_on(session.rollback());
    assert_eq!(
        result.rows,
        json!([[
            1,
            2,
            1.5,
            "12.30",
            true,
            "x",
            "2025-01-02",
            "2025-01-02T03:04:05.500000",
            "2025-01-02T01:04:05Z",
            {"k": [1]},
            "123e4567-e89b-12d3-a456-426614174000",
            [1, null, 3],
            null,
            "P0M1DT0S",
            ["a", "b"]
        ]])
    );
    assert_eq!(result.columns[3], ("d".to_owned(), "numeric".to_owned()));
    assert_eq!(result.rows_matched, 1);
}

/// Two schemas holding a `payroll` each, the `hidden` one first in the
/// data source's schemas (so first on the `search_path` the data source
/// used to set) and its table visible only with the scope `hr:payroll`
/// (or left out by `relations`); the `visible` one second. Salaries tell
/// the tables apart: 100, 200 visible, 900001, 900002 hidden.
struct Payrolls {
    hidden: String,
    visible: String,
    tenant: Tenant,
    source: Arc<AttachedSource>,
}

/// The SQL that creates `payroll` in two schemas with different salaries
/// (hidden: 900001, 900002; visible: 100, 200), so a test can tell which
/// one a statement reached.
pub fn two_payrolls(hidden: &str, visible: &str) -> String {
    format!(
        "CREATE SCHEMA {hidden}; CREATE SCHEMA {visible};
         CREATE TABLE {hidden}.payroll (id integer PRIMARY KEY, salary integer NOT NULL);
         CREATE TABLE {visible}.payroll (id integer PRIMARY KEY, salary integer NOT NULL);
         INSERT INTO {hidden}.payroll VALUES (1, 900001), (2, 900002);
         INSERT INTO {visible}.payroll VALUES (1, 100), (2, 200);"
    )
}

impl Payrolls {
    fn new(allow_list: bool) -> Payrolls {
        let hidden = unique("pilotage_sqlpathhidden");
        let visible = unique("pilotage_sqlpathvisible");
        admin(&two_payrolls(&hidden, &visible));
        let mut spec = json!({"schemas": [hidden, visible]});
        if allow_list {
            spec["relations"] = json!([format!("{visible}.payroll")]);
        } else {
            spec["visibility"] = json!({format!("{hidden}.payroll"): ["hr:payroll"]});
        }
        let spec: DataSourceSpec = serde_json::from_value(spec).unwrap();
        let source = Arc::new(
            AttachedSource::new(
                "payroll",
                spec,
                &admin_url(),
                runtime().handle().clone(),
                pilotage_engine::Clock::system(),
                None,
            )
            .expect("a source"),
        );
        let tenant = Tenant::new(
            "payrolls",
            pilotage_server::egress::Confinement::new(&pilotage_server::egress::EgressSettings::default()),
        );
        tenant.attach_data_source(source.clone());
        runtime().block_on(source.refresh(tenant.catalog())).expect("introspection");
        Payrolls { hidden, visible, tenant, source }
    }

    /// The catalog of a caller without `hr:payroll`.
    fn catalog(&self) -> CatalogSnapshot {
        self.tenant.with_catalog(|catalog| catalog.snapshot(&BTreeSet::new(), "sql/postgres-15"))
    }

    fn run(&self, text: &str) -> Execution {
        let (validated, execution) = execute_on(text, None, &self.catalog(), self.source.source.clone());
        assert!(validated.response.valid, "{text}: {:?}", validated.response.diagnostics);
        assert!(execution.outcome.ok, "{text}: {:?} {:?}", execution.outcome, execution.faults);
        execution
    }

    fn salaries(&self, schema: &str) -> Vec<i64> {
        runtime().block_on(async {
            use sqlx::Connection;
            let mut connection = sqlx::PgConnection::connect(&admin_url()).await.expect("PostgreSQL is reachable");
            let query = format!("SELECT salary::int8 FROM {schema}.payroll ORDER BY id");
            sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(query)).fetch_all(&mut connection).await.unwrap()
        })
    }
}

impl Drop for Payrolls {
    /// Best effort, never a panic (it may run while a failed test
    /// unwinds); what is left is swept by the next test process.
    fn drop(&mut self) {
        let statements = format!(
            "SET lock_timeout = '2s'; DROP SCHEMA {} CASCADE; DROP SCHEMA {} CASCADE;",
            self.hidden, self.visible
        );
        runtime().block_on(async {
            use sqlx::Connection;
            if let Ok(mut connection) = sqlx::PgConnection::connect(&admin_url()).await {
                let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(statements)).execute(&mut connection).await;
            }
        });
    }
}

fn salaries_of(execution: &Execution) -> Vec<i64> {
    let rows = execution.output.as_ref().unwrap().as_array().unwrap();
    rows.iter().map(|row| row["salary"].as_i64().unwrap()).collect()
}

/// The conformance finding: `payroll` validated as the visible table ran
/// as the hidden one that PostgreSQL's `search_path` found first, and the
/// trace named the visible one.
#[test]
fn an_unqualified_name_reads_the_table_validation_resolved_not_the_search_path_one() {
    let payrolls = Payrolls::new(false);
    let (hidden, visible) = (&payrolls.hidden, &payrolls.visible);
    let ids = payrolls.catalog().ids(None);
    assert_eq!(ids, [format!("{visible}.payroll")], "the caller sees only the visible table");

    let execution = payrolls.run("SELECT salary FROM payroll ORDER BY salary LIMIT 5");
    assert_eq!(salaries_of(&execution), [100, 200]);
    assert_eq!(execution.trace.steps[1].calls.as_deref(), Some(format!("{visible}.payroll").as_str()));
    let statement = execution.trace.steps[0].input.as_ref().unwrap()["statement"].as_str().unwrap();
    assert_eq!(statement, format!("SELECT salary FROM \"{visible}\".\"payroll\" ORDER BY salary LIMIT 5"));

    // Column references through the table name still bind, qualified or
    // not; subqueries and joins are qualified too.
    let execution = payrolls.run(&format!(
        "SELECT payroll.salary FROM payroll WHERE payroll.id = 1 AND {visible}.payroll.salary > 0 LIMIT 1"
    ));
    assert_eq!(salaries_of(&execution), [100]);
    let execution = payrolls.run(
        "SELECT p.salary FROM payroll p JOIN payroll q ON q.id = p.id \
         WHERE p.salary = (SELECT max(salary) FROM payroll) LIMIT 1",
    );
    assert_eq!(salaries_of(&execution), [200]);
    // A CTE named like the table stays a CTE.
    let execution = payrolls.run(
        "WITH payroll AS (SELECT salary + 1 AS salary FROM payroll) SELECT salary FROM payroll ORDER BY salary LIMIT 5",
    );
    assert_eq!(salaries_of(&execution), [101, 201]);
    assert_eq!(payrolls.salaries(hidden), [900001, 900002]);
}

#[test]
fn an_unqualified_write_lands_in_the_table_validation_resolved() {
    let payrolls = Payrolls::new(false);
    let (hidden, visible) = (&payrolls.hidden, &payrolls.visible);
    let inserted = payrolls.run("INSERT INTO payroll (id, salary) VALUES (3, 300) RETURNING salary");
    assert_eq!(salaries_of(&inserted), [300]);
    payrolls.run("UPDATE payroll SET salary = payroll.salary + 1 WHERE id = 1");
    payrolls.run("DELETE FROM payroll WHERE id = 2");
    assert_eq!(payrolls.salaries(visible), [101, 300]);
    assert_eq!(payrolls.salaries(hidden), [900001, 900002], "the hidden table is untouched");
    // An upsert's target, and `excluded`, resolve the same way.
    payrolls.run(
        "INSERT INTO payroll (id, salary) VALUES (3, 7) ON CONFLICT (id) DO UPDATE SET salary = payroll.salary + excluded.salary",
    );
    assert_eq!(payrolls.salaries(visible), [101, 307]);
    assert_eq!(payrolls.salaries(hidden), [900001, 900002]);
}

#[test]
fn the_relations_allow_list_cannot_be_bypassed_through_the_search_path() {
    let payrolls = Payrolls::new(true);
    let (hidden, visible) = (&payrolls.hidden, &payrolls.visible);
    assert_eq!(payrolls.catalog().ids(None), [format!("{visible}.payroll")]);
    let execution = payrolls.run("SELECT salary FROM payroll ORDER BY salary LIMIT 5");
    assert_eq!(salaries_of(&execution), [100, 200]);
    payrolls.run("UPDATE payroll SET salary = 0 WHERE id = 1");
    assert_eq!(payrolls.salaries(visible), [0, 200]);
    assert_eq!(payrolls.salaries(hidden), [900001, 900002]);
}

/// Defence in depth: even a statement the Language never emits, with an
/// unqualified name, reaches no tenant schema, while built-in functions
/// and types keep resolving.
#[test]
fn a_runs_search_path_holds_no_tenant_schema() {
    let payrolls = Payrolls::new(false);
    let mut session = block_on(payrolls.source.source.begin(true, None)).unwrap();
    let unqualified = block_on(session.query("SELECT salary FROM payroll", &json!([]))).unwrap_err();
    assert!(unqualified.to_string().contains("does not exist"), "{unqualified}");
    block_on(session.rollback());
    let mut session = block_on(payrolls.source.source.begin(true, None)).unwrap();
    let path = block_on(session.query("SELECT current_setting('search_path') AS p", &json!([]))).unwrap();
    assert_eq!(path.rows, json!([["pg_catalog, pg_temp"]]));
    let builtins = block_on(session.query(
        "SELECT lower('A') AS l, '1 day'::interval AS i, now()::date <= current_date AS d, $1::int4 + 1 AS n",
        &json!([1]),
    ))
    .unwrap();
    assert_eq!(builtins.rows, json!([["a", "P0M1DT0S", true, 2]]));
    block_on(session.rollback());
}

/// The sql component on an engine whose execution wall time is 1.5 s.
fn sql_with_short_wall_time() -> &'static Component {
    static COMPONENT: OnceLock<Component> = OnceLock::new();
    COMPONENT.get_or_init(|| {
        let bounds = Bounds {
            execution: CallBounds { fuel: test_bounds().execution.fuel, wall_time_ms: 1_500 },
            ..test_bounds()
        };
        Engine::new(bounds, None).unwrap().load(pilotage_bundled::SQL).expect("sql loads")
    })
}

/// The slow statement of the wall-time tests, after a quick one.
const SLOW_SCRIPT: &str =
    "SELECT count(*) AS n FROM customers; SELECT count(*) AS n FROM orders a, orders b, orders c, order_lines d";

/// Checks a Run stopped at its 1.5 s wall time during `stmt-2`: `timeout`
/// with the trace so far.
fn assert_stopped_at_the_deadline(execution: &Execution) {
    assert_eq!(execution.outcome.status, "timeout", "{:?}", execution.outcome);
    assert!(!execution.outcome.ok && execution.output.is_none());
    let error = execution.outcome.error.as_deref().unwrap();
    assert!(error.contains("wall-time bound of 1500 ms: stmt-2 was stopped"), "{error}");
    assert!(
        execution.faults.is_empty() || execution.faults.iter().all(|f| f.contains("time")),
        "{:?}",
        execution.faults
    );
    let step = |id: &str| execution.trace.steps.iter().find(|s| s.id == id).unwrap_or_else(|| panic!("{id}"));
    assert!(step("stmt-1").outcome.ok);
    assert!(!step("stmt-2").outcome.ok);
    assert!(step("stmt-2").outcome.error.as_deref().unwrap().contains("statement timeout"), "{:?}", step("stmt-2"));
}

/// The conformance finding: with a 1.5 s execution wall time and a 4 s
/// statement timeout, a slow statement ran 4 s. Now the data source's
/// timeout is the time the Run has left.
#[test]
fn the_runs_wall_time_stops_a_running_statement() {
    let component = sql_with_short_wall_time();
    let mut config = demo().config().clone();
    config.statement_timeout = Duration::from_secs(4);
    let source = Arc::new(PostgresDataSource::new(config, runtime().handle().clone()).unwrap());
    // pg_sleep is not on the allow-list: a cross join that takes minutes.
    let started = Instant::now();
    let (validated, execution) = execute_with(component, SLOW_SCRIPT, None, &demo_catalog(), source);
    let elapsed = started.elapsed();
    assert!(validated.response.valid);
    assert!(elapsed >= Duration::from_millis(1_400) && elapsed < Duration::from_millis(2_500), "{elapsed:?}");
    assert_stopped_at_the_deadline(&execution);
    assert!(execution.faults.is_empty(), "{:?}", execution.faults);
    // The data source's own timeout still bounds a Run with time to spare.
    let mut config = demo().config().clone();
    config.statement_timeout = Duration::from_millis(300);
    let quick = Arc::new(PostgresDataSource::new(config, runtime().handle().clone()).unwrap());
    let (_, execution) = execute_with(component, SLOW_SCRIPT, None, &demo_catalog(), quick);
    assert_eq!(execution.outcome.status, "rolled_back", "{:?}", execution.outcome);
}

/// A data source whose slow statement answers only after the Run's
/// deadline has passed, so the engine stops the component before it can
/// report: the host's own trace then shows the statements.
struct LateAnswer(Arc<PostgresDataSource>);

struct LateAnswerSession(Box<dyn SqlSession>, Option<Instant>);

#[async_trait::async_trait]
impl DataSource for LateAnswer {
    async fn begin(&self, read_only: bool, deadline: Option<Instant>) -> Result<Box<dyn SqlSession>, SqlError> {
        Ok(Box::new(LateAnswerSession(self.0.begin(read_only, deadline).await?, deadline)))
    }
}

#[async_trait::async_trait]
impl SqlSession for LateAnswerSession {
    async fn query(&mut self, statement: &str, params: &Value) -> Result<SqlResult, SqlError> {
        if statement.contains("order_lines") {
            let late = self.1.expect("a deadline") + Duration::from_millis(100);
            tokio::time::sleep(late.saturating_duration_since(Instant::now())).await;
            return Err(SqlError::Statement("canceling statement due to statement timeout (SQLSTATE 57014)".into()));
        }
        self.0.query(statement, params).await
    }
    async fn commit(self: Box<Self>) -> Result<(), CommitError> {
        self.0.commit().await
    }
    async fn rollback(self: Box<Self>) {
        self.0.rollback().await;
    }
}

#[test]
fn a_statement_stopped_after_the_engine_stopped_the_run_is_in_the_hosts_trace() {
    let source = Arc::new(LateAnswer(demo().clone()));
    let (_, execution) = execute_with(sql_with_short_wall_time(), SLOW_SCRIPT, None, &demo_catalog(), source);
    assert_stopped_at_the_deadline(&execution);
    let ids: Vec<&str> = execution.trace.steps.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["stmt-1", "stmt-2"], "the host's record: statements, without reference sub-steps");
    assert_eq!(execution.trace.stats, Some(json!({"recorded_by": "host"})));
    let input = execution.trace.steps[1].input.as_ref().unwrap();
    assert!(input["statement"].as_str().unwrap().contains("\"pilotage_demo\".\"order_lines\""), "{input}");
}

/// A scratch schema whose `tickets.event_id` is a deferred foreign key: a
/// bad one fails at COMMIT, after the statement succeeded.
fn deferred_schema() -> (String, Arc<PostgresDataSource>) {
    let schema = unique("pilotage_sqlcommit");
    admin(&format!(
        "CREATE SCHEMA {schema};
         CREATE TABLE {schema}.events (id integer PRIMARY KEY);
         INSERT INTO {schema}.events VALUES (1);
         CREATE TABLE {schema}.tickets (id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
             event_id integer NOT NULL REFERENCES {schema}.events (id) DEFERRABLE INITIALLY DEFERRED, seat text NOT NULL);"
    ));
    let source =
        PostgresDataSource::new(PostgresConfig::new(admin_url(), [schema.clone()]), runtime().handle().clone());
    (schema, Arc::new(source.unwrap()))
}

/// The conformance finding: a commit the database refused was reported
/// `error` ("side effects possible") though nothing persisted.
#[test]
fn a_commit_the_database_refuses_ends_the_run_rolled_back() {
    let (schema, source) = deferred_schema();
    let catalog = CatalogSnapshot::hashed(runtime().block_on(source.introspect()).unwrap());
    let insert = "INSERT INTO tickets (event_id, seat) VALUES ($1, $2) RETURNING id";
    let (_, execution) = execute_on(insert, Some(json!([999, "A1"])), &catalog, source.clone());
    assert_eq!(execution.outcome.status, "rolled_back", "{:?}", execution.outcome);
    assert!(!execution.outcome.ok && execution.output.is_none());
    let error = execution.outcome.error.as_deref().unwrap();
    assert!(error.contains("23503") && error.contains("nothing persists"), "{error}");
    assert!(execution.faults.is_empty(), "{:?}", execution.faults);
    // The trace so far: the statement itself ran.
    let ids: Vec<&str> = execution.trace.steps.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["stmt-1", "stmt-1.ref-1"]);
    assert!(execution.trace.steps[0].outcome.ok);
    assert_eq!(admin_value(&format!("SELECT count(*) FROM {schema}.tickets")), 0);
    // The good polarity commits.
    let (_, execution) = execute_on(insert, Some(json!([1, "A1"])), &catalog, source.clone());
    assert_eq!(execution.outcome.status, "success", "{:?}", execution.outcome);
    assert_eq!(admin_value(&format!("SELECT count(*) FROM {schema}.tickets")), 1);
    admin(&format!("DROP SCHEMA {schema} CASCADE"));
}

/// A data source whose COMMIT never answers (the connection failed): the
/// transaction is rolled back underneath, but the platform cannot know.
struct LostCommit(Arc<PostgresDataSource>);

struct LostCommitSession(Box<dyn SqlSession>);

#[async_trait::async_trait]
impl DataSource for LostCommit {
    async fn begin(&self, read_only: bool, deadline: Option<Instant>) -> Result<Box<dyn SqlSession>, SqlError> {
        Ok(Box::new(LostCommitSession(self.0.begin(read_only, deadline).await?)))
    }
}

#[async_trait::async_trait]
impl SqlSession for LostCommitSession {
    async fn query(&mut self, statement: &str, params: &Value) -> Result<SqlResult, SqlError> {
        self.0.query(statement, params).await
    }
    async fn commit(self: Box<Self>) -> Result<(), CommitError> {
        self.0.rollback().await;
        Err(CommitError::Unknown("connection reset during COMMIT".into()))
    }
    async fn rollback(self: Box<Self>) {
        self.0.rollback().await;
    }
}

#[test]
fn a_commit_whose_outcome_is_unknown_ends_the_run_error() {
    let (schema, source) = deferred_schema();
    let catalog = CatalogSnapshot::hashed(runtime().block_on(source.introspect()).unwrap());
    let insert = "INSERT INTO tickets (event_id, seat) VALUES (1, 'B2')";
    let (_, execution) = execute_on(insert, None, &catalog, Arc::new(LostCommit(source)));
    assert_eq!(execution.outcome.status, "error", "{:?}", execution.outcome);
    assert!(execution.outcome.error.as_deref().unwrap().contains("may or may not have been committed"));
    assert_eq!(execution.trace.steps[0].id, "stmt-1");
    admin(&format!("DROP SCHEMA {schema} CASCADE"));
}
