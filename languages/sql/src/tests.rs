//! Native tests of sql/postgres-15 over a catalog shaped like the demo
//! sales schema: every diagnostic code with a program that earns it and
//! one that does not, plan derivation and step ids, the known bypasses,
//! and execution over a scripted database.

use std::collections::BTreeMap;

use pilotage_guest_sdk::diag::{DESTRUCTIVE, SAFE, WRITE};
use pilotage_guest_sdk::{
    Catalog, CatalogEntry, Column, Diagnostic, Effects, InvokeError, Language, Locator, QueryResult, RiskHints,
    RunRequest, Severity, SqlError, Validation,
};
use serde_json::{Value, json};

use crate::Sql;
use crate::codes;
use crate::entry_id::relation_id;
use crate::execute::execute;
use crate::validate::{bind_input, validate};

struct TestCatalog(BTreeMap<String, CatalogEntry>);

fn table(id: &str, kind: &str, columns: &[&str], hints: RiskHints) -> CatalogEntry {
    let properties: serde_json::Map<String, Value> =
        columns.iter().map(|c| ((*c).to_owned(), json!({"type": ["string", "null"]}))).collect();
    CatalogEntry {
        id: id.into(),
        kind: kind.into(),
        name: crate::entry_id::split(id).unwrap().1,
        description: None,
        input_schema: None,
        output_schema: Some(json!({"type": "object", "properties": properties}).to_string()),
        risk: codes::risk_label(hints.read_only, hints.destructive).into(),
        risk_hints: hints,
        tags: vec![],
    }
}

/// The demo schema as a read-only role sees it, plus a writable scratch
/// table, a write-only table, and a same-named table in another schema.
fn catalog() -> TestCatalog {
    let entries = [
        table("pilotage_demo.customers", "table", &["id", "name", "email", "country", "created_at"], SAFE),
        table("pilotage_demo.orders", "table", &["id", "customer_id", "ordered_at", "status", "total_amount"], SAFE),
        table("pilotage_demo.order_lines", "table", &["id", "order_id", "product", "quantity", "unit_price"], SAFE),
        table("pilotage_demo.revenue_by_month", "view", &["month", "revenue"], SAFE),
        table("scratch.notes", "table", &["id", "body"], DESTRUCTIVE),
        table("scratch.audit", "table", &["id", "note"], WRITE),
        table("archive.audit", "table", &["id", "note"], SAFE),
    ];
    TestCatalog(entries.into_iter().map(|e| (e.id.clone(), e)).collect())
}

impl Catalog for TestCatalog {
    fn entry(&self, id: &str) -> Option<CatalogEntry> {
        self.0.get(id).cloned()
    }
    fn ids(&self) -> Vec<String> {
        self.0.keys().cloned().collect()
    }
}

fn check(text: &str) -> Validation {
    validate(text, &catalog())
}

fn codes_of(validation: &Validation) -> Vec<String> {
    validation.diagnostics.iter().map(|d| d.code.clone()).collect()
}

fn errors(validation: &Validation) -> Vec<&Diagnostic> {
    validation.diagnostics.iter().filter(|d| d.severity == Severity::Error).collect()
}

fn assert_valid(text: &str) -> Validation {
    let validation = check(text);
    assert!(errors(&validation).is_empty(), "{text}: {:#?}", validation.diagnostics);
    assert!(validation.plan.is_some());
    validation
}

fn assert_code(text: &str, code: &str) -> Validation {
    let validation = check(text);
    assert!(
        codes_of(&validation).iter().any(|c| c == code),
        "{text}: expected {code}, got {:#?}",
        validation.diagnostics
    );
    validation
}

const STORY_WRONG: &str = "SELECT c.name, date_trunc('month', o.ordered_at) AS month, sum(o.total) AS revenue\nFROM customers c JOIN orders o ON o.customer_id = c.id\nGROUP BY c.name, month\nORDER BY month, revenue DESC";

#[test]
fn the_story_query_gets_the_close_match_hint_then_plans_safe() {
    let wrong = assert_code(STORY_WRONG, codes::UNKNOWN_COLUMN);
    let finding = &errors(&wrong)[0];
    assert_eq!(finding.hint.as_deref(), Some("close match: total_amount"));
    let Locator::Range(range) = &finding.path else { panic!("text-range locator") };
    assert_eq!((range.start.line, range.start.column), (1, 64));
    assert!(wrong.plan.is_none() && wrong.statements.is_empty());

    let fixed = assert_valid(&STORY_WRONG.replace("o.total)", "o.total_amount)"));
    let plan = fixed.plan.unwrap();
    let ids: Vec<&str> = plan.steps.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["stmt-1", "stmt-1.ref-1", "stmt-1.ref-2"]);
    assert_eq!(plan.steps[1].calls.as_deref(), Some("pilotage_demo.customers"));
    assert_eq!(plan.steps[2].calls.as_deref(), Some("pilotage_demo.orders"));
    assert_eq!(plan.max_risk, "safe");
    assert!(plan.steps.iter().all(|s| s.risk_hints == SAFE));
    assert_eq!(fixed.references, ["pilotage_demo.customers", "pilotage_demo.orders"]);
    assert_eq!(fixed.statements.len(), 1);
    assert!(fixed.statements[0].starts_with("SELECT c.name"));
}

#[test]
fn syntax_error_in_both_polarities() {
    assert_code("SELEC name FROM customers", codes::SYNTAX_ERROR);
    assert_valid("SELECT name FROM customers LIMIT 1");
}

#[test]
fn unknown_table_in_both_polarities_with_visible_hints_only() {
    let validation = assert_code("SELECT name FROM customer LIMIT 1", codes::UNKNOWN_TABLE);
    assert_eq!(errors(&validation)[0].hint.as_deref(), Some("close match: customers"));
    // An unknown alias qualifier is an unknown FROM item too.
    assert_code("SELECT x.name FROM customers c LIMIT 1", codes::UNKNOWN_TABLE);
    // A name no visible entry resembles gets no hint at all.
    let far = assert_code("SELECT 1 FROM payroll_secrets", codes::UNKNOWN_TABLE);
    assert_eq!(errors(&far)[0].hint, None);
    assert_valid("SELECT c.name FROM pilotage_demo.customers c LIMIT 1");
    assert_valid("SELECT month, revenue FROM revenue_by_month");
}

#[test]
fn ambiguous_table_in_both_polarities() {
    assert_code("SELECT note FROM audit LIMIT 1", codes::AMBIGUOUS_TABLE);
    assert_valid("SELECT note FROM archive.audit LIMIT 1");
}

#[test]
fn unknown_column_in_both_polarities() {
    assert_code("SELECT nme FROM customers LIMIT 1", codes::UNKNOWN_COLUMN);
    assert_code("SELECT name FROM customers WHERE counrty = 'FR' LIMIT 1", codes::UNKNOWN_COLUMN);
    assert_code("INSERT INTO scratch.notes (id, bdy) VALUES (1, 'x')", codes::UNKNOWN_COLUMN);
    assert_valid("SELECT name FROM customers WHERE country = 'FR' LIMIT 1");
    // Output aliases count in ORDER BY and GROUP BY, correlated names reach outer levels.
    assert_valid(
        "SELECT c.country AS land, count(*) AS n FROM customers c WHERE EXISTS (SELECT 1 FROM orders o WHERE o.customer_id = c.id) GROUP BY land ORDER BY n",
    );
    // A CTE's and a subquery's columns are their select lists.
    assert_valid("WITH t AS (SELECT id AS key FROM customers) SELECT key FROM t LIMIT 1");
    assert_code("WITH t AS (SELECT id AS key FROM customers) SELECT id FROM t LIMIT 1", codes::UNKNOWN_COLUMN);
    assert_valid("SELECT s.total FROM (SELECT sum(total_amount) AS total FROM orders) s");
}

#[test]
fn ambiguous_column_in_both_polarities() {
    let validation = assert_code(
        "SELECT id FROM customers JOIN orders ON orders.customer_id = customers.id LIMIT 1",
        codes::AMBIGUOUS_COLUMN,
    );
    assert!(errors(&validation)[0].hint.as_deref().unwrap().contains("customers.id"));
    assert_valid("SELECT customers.id FROM customers JOIN orders ON orders.customer_id = customers.id LIMIT 1");
    assert_valid("SELECT id, note FROM scratch.audit JOIN archive.audit a USING (id, note) LIMIT 1");
}

#[test]
fn statement_classes_outside_the_language_are_refused() {
    for text in [
        "DROP TABLE customers",
        "CREATE TABLE x (id int)",
        "ALTER TABLE customers ADD COLUMN x int",
        "TRUNCATE orders",
        "COPY customers TO STDOUT",
        "BEGIN",
        "COMMIT",
        "ROLLBACK",
        "SET TRANSACTION READ WRITE",
        "SET ROLE postgres",
        "SET SESSION AUTHORIZATION postgres",
        "SET statement_timeout = 0",
        "RESET ALL",
        "SHOW search_path",
        "GRANT SELECT ON customers TO public",
        "EXPLAIN ANALYZE SELECT 1",
        "SELECT * INTO copy_of_customers FROM customers",
        "SELECT name FROM customers FOR UPDATE",
        "SELECT name FROM customers LIMIT 1 FOR SHARE",
    ] {
        let validation = assert_code(text, codes::STATEMENT_NOT_ALLOWED);
        assert!(validation.statements.is_empty() && validation.plan.is_none(), "{text}");
    }
    // The parser does not know DO blocks: refused all the same.
    assert_code("DO $$ BEGIN PERFORM 1; END $$", codes::SYNTAX_ERROR);
}

#[test]
fn writable_ctes_are_refused() {
    assert_code(
        "WITH gone AS (DELETE FROM scratch.notes RETURNING id) SELECT count(*) FROM gone",
        codes::STATEMENT_NOT_ALLOWED,
    );
    assert_code(
        "WITH added AS (INSERT INTO scratch.notes (id, body) VALUES (1, 'x') RETURNING id) SELECT id FROM added",
        codes::STATEMENT_NOT_ALLOWED,
    );
    assert_code(
        "SELECT 1 FROM customers WHERE EXISTS (WITH u AS (UPDATE scratch.notes SET body = 'x' RETURNING 1) SELECT 1 FROM u)",
        codes::STATEMENT_NOT_ALLOWED,
    );
}

#[test]
fn function_allow_list_in_both_polarities() {
    for text in [
        "SELECT pg_sleep(10)",
        "SELECT set_config('statement_timeout', '0', false)",
        "SELECT nextval('scratch.notes_id_seq')",
        "SELECT dblink('host=elsewhere', 'DROP TABLE x')",
        "SELECT lo_import('/etc/passwd')",
        "SELECT pg_read_file('/etc/passwd')",
        "SELECT pg_catalog.upper(name) FROM customers",
        "SELECT name FROM customers WHERE id = (SELECT pg_terminate_backend(1))",
        "SELECT * FROM generate_series(1, 10)",
    ] {
        let validation = assert_code(text, codes::FUNCTION_NOT_ALLOWED);
        assert!(validation.statements.is_empty(), "{text}");
    }
    assert_valid("SELECT upper(name), coalesce(country, '?'), date_trunc('day', now()) FROM customers LIMIT 1");
    assert_valid(
        "SELECT customer_id, sum(total_amount) FILTER (WHERE status <> 'cancelled'), rank() OVER (ORDER BY sum(total_amount) DESC) FROM orders GROUP BY customer_id",
    );
}

#[test]
fn multiple_statements_in_both_polarities() {
    // The bypasses: a comment hiding a second statement, a smuggled write.
    let hidden = assert_code(
        "-- list customers\nSELECT name FROM customers LIMIT 1; DELETE FROM scratch.notes",
        codes::MULTIPLE_STATEMENTS,
    );
    assert!(hidden.statements.is_empty());
    assert_code("SELECT 1; /* harmless */ INSERT INTO scratch.notes VALUES (1, 'x')", codes::MULTIPLE_STATEMENTS);
    let commit_drop = check("COMMIT; DROP TABLE orders");
    assert!(codes_of(&commit_drop).contains(&codes::STATEMENT_NOT_ALLOWED.to_owned()));
    assert!(codes_of(&commit_drop).contains(&codes::MULTIPLE_STATEMENTS.to_owned()));
    // A script of queries is allowed, with ids in order.
    let script = assert_valid("SELECT count(*) FROM customers; SELECT count(*) FROM orders");
    let ids: Vec<String> = script.plan.unwrap().steps.into_iter().map(|s| s.id).collect();
    assert_eq!(ids, ["stmt-1", "stmt-1.ref-1", "stmt-2", "stmt-2.ref-1"]);
    assert_eq!(script.statements.len(), 2);
    let too_many = vec!["SELECT 1"; codes::MAX_STATEMENTS + 1].join("; ");
    assert_code(&too_many, codes::MULTIPLE_STATEMENTS);
}

#[test]
fn parameter_mismatch_in_both_polarities() {
    let question = assert_code("SELECT name FROM customers WHERE id = ?", codes::SYNTAX_ERROR);
    assert!(question.diagnostics[0].hint.as_deref().unwrap().contains("$1"));
    assert_code("SELECT name FROM customers WHERE id = $2", codes::PARAMETER_MISMATCH);
    assert_code("SELECT name FROM customers WHERE id = :id", codes::PARAMETER_MISMATCH);
    assert_valid("SELECT name FROM customers WHERE id = $1 AND country = $2");
}

#[test]
fn unsupported_syntax_in_both_polarities() {
    assert_code(
        "SELECT name, rank() OVER w FROM customers WINDOW w AS (ORDER BY id) LIMIT 1",
        codes::UNSUPPORTED_SYNTAX,
    );
    assert_valid("SELECT name FROM customers WHERE id = ANY (SELECT customer_id FROM orders) FETCH FIRST 1 ROWS ONLY");
    assert_code("SELECT x FROM customers, LATERAL unnest(ARRAY[1]) AS x", codes::UNSUPPORTED_SYNTAX);
    assert_valid("SELECT name FROM customers ORDER BY name OFFSET 2 LIMIT 3");
}

#[test]
fn read_only_relation_in_both_polarities() {
    assert_code("INSERT INTO customers (id, name) VALUES (1, 'x')", codes::READ_ONLY_RELATION);
    assert_code("UPDATE orders SET status = 'x' WHERE id = 1", codes::READ_ONLY_RELATION);
    assert_code("DELETE FROM scratch.audit WHERE id = 1", codes::READ_ONLY_RELATION);
    let insert = assert_valid("INSERT INTO scratch.audit (id, note) VALUES ($1, $2) RETURNING id");
    let plan = insert.plan.unwrap();
    assert_eq!(plan.max_risk, "write");
    assert_eq!(plan.steps[1].calls.as_deref(), Some("scratch.audit"));
    assert_eq!(plan.steps[1].risk_hints, WRITE);
    let delete = assert_valid("DELETE FROM scratch.notes n USING customers c WHERE n.id = c.id");
    let plan = delete.plan.unwrap();
    assert_eq!(plan.max_risk, "destructive");
    let ids: Vec<(&str, Option<&str>, &str)> =
        plan.steps.iter().map(|s| (s.id.as_str(), s.calls.as_deref(), s.risk.as_str())).collect();
    assert_eq!(
        ids,
        [
            ("stmt-1", None, "destructive"),
            ("stmt-1.ref-1", Some("scratch.notes"), "destructive"),
            ("stmt-1.ref-2", Some("pilotage_demo.customers"), "safe")
        ]
    );
}

#[test]
fn warnings_keep_programs_valid() {
    let star = assert_valid("SELECT * FROM customers LIMIT 5");
    assert_eq!(codes_of(&star), [codes::SELECT_STAR]);
    let unlimited = assert_valid("SELECT name FROM customers");
    assert_eq!(codes_of(&unlimited), [codes::NO_LIMIT]);
    assert!(check("SELECT count(*) FROM customers").diagnostics.is_empty());
    assert!(check("SELECT name FROM customers LIMIT 3").diagnostics.is_empty());
    let everything = assert_valid("DELETE FROM scratch.notes");
    assert_eq!(codes_of(&everything), [codes::MISSING_WHERE]);
    assert_valid("UPDATE scratch.notes SET body = upper(body) WHERE id = 1");
    assert!(check("UPDATE scratch.notes SET body = upper(body) WHERE id = 1").diagnostics.is_empty());
}

#[test]
fn upserts_resolve_excluded_and_conflict_columns() {
    assert_valid(
        "INSERT INTO scratch.notes (id, body) VALUES (1, 'a') ON CONFLICT (id) DO UPDATE SET body = excluded.body RETURNING id",
    );
    assert_code(
        "INSERT INTO scratch.notes (id, body) VALUES (1, 'a') ON CONFLICT (idd) DO NOTHING",
        codes::UNKNOWN_COLUMN,
    );
}

#[test]
fn statements_run_rendered_without_comments() {
    let validation = assert_valid("SELECT name /* the name */ FROM customers -- trailing\nLIMIT 1");
    assert_eq!(validation.statements, ["SELECT name FROM \"pilotage_demo\".\"customers\" LIMIT 1"]);
}

/// The statement that runs for `text`, which must be valid.
fn runs_as(text: &str) -> String {
    let validation = assert_valid(text);
    assert_eq!(validation.statements.len(), 1, "{text}");
    validation.statements[0].clone()
}

#[test]
fn emitted_statements_name_every_relation_schema_qualified() {
    let cases = [
        // FROM, with and without alias; column qualifiers keep binding.
        (
            "SELECT customers.name FROM customers WHERE customers.id = 1 LIMIT 1",
            "SELECT customers.name FROM \"pilotage_demo\".\"customers\" WHERE customers.id = 1 LIMIT 1",
        ),
        (
            "SELECT c.name FROM customers AS c LIMIT 1",
            "SELECT c.name FROM \"pilotage_demo\".\"customers\" AS c LIMIT 1",
        ),
        // Written qualified: quoted as it resolved.
        (
            "SELECT name FROM pilotage_demo.customers LIMIT 1",
            "SELECT name FROM \"pilotage_demo\".\"customers\" LIMIT 1",
        ),
        (
            "SELECT c.name, o.id FROM customers c JOIN orders o ON o.customer_id = c.id LEFT JOIN order_lines ON order_lines.order_id = o.id LIMIT 1",
            "SELECT c.name, o.id FROM \"pilotage_demo\".\"customers\" c JOIN \"pilotage_demo\".\"orders\" o ON o.customer_id = c.id LEFT JOIN \"pilotage_demo\".\"order_lines\" ON order_lines.order_id = o.id LIMIT 1",
        ),
        // Subqueries: IN, EXISTS, scalar, derived tables.
        (
            "SELECT name FROM customers WHERE id IN (SELECT customer_id FROM orders) AND EXISTS (SELECT 1 FROM order_lines) LIMIT 1",
            "SELECT name FROM \"pilotage_demo\".\"customers\" WHERE id IN (SELECT customer_id FROM \"pilotage_demo\".\"orders\") AND EXISTS (SELECT 1 FROM \"pilotage_demo\".\"order_lines\") LIMIT 1",
        ),
        (
            "SELECT (SELECT count(*) FROM orders) AS n, t.id FROM (SELECT id FROM customers) AS t LIMIT 1",
            "SELECT (SELECT count(*) FROM \"pilotage_demo\".\"orders\") AS n, t.id FROM (SELECT id FROM \"pilotage_demo\".\"customers\") AS t LIMIT 1",
        ),
        // CTE names stay unqualified; the relations inside them do not.
        (
            "WITH recent AS (SELECT id FROM orders) SELECT recent.id FROM recent LIMIT 1",
            "WITH recent AS (SELECT id FROM \"pilotage_demo\".\"orders\") SELECT recent.id FROM recent LIMIT 1",
        ),
        // A non-recursive CTE named like a table reads the table inside.
        (
            "WITH orders AS (SELECT id FROM orders) SELECT id FROM orders LIMIT 1",
            "WITH orders AS (SELECT id FROM \"pilotage_demo\".\"orders\") SELECT id FROM orders LIMIT 1",
        ),
        (
            "SELECT id FROM customers UNION SELECT id FROM orders",
            "SELECT id FROM \"pilotage_demo\".\"customers\" UNION SELECT id FROM \"pilotage_demo\".\"orders\"",
        ),
        // Targets of INSERT, UPDATE and DELETE, and their sources.
        (
            "INSERT INTO notes (id, body) SELECT id, name FROM customers WHERE id = 1",
            "INSERT INTO \"scratch\".\"notes\" (id, body) SELECT id, name FROM \"pilotage_demo\".\"customers\" WHERE id = 1",
        ),
        (
            "INSERT INTO notes (id, body) VALUES (1, 'a') ON CONFLICT (id) DO UPDATE SET body = notes.body || excluded.body",
            "INSERT INTO \"scratch\".\"notes\" (id, body) VALUES (1, 'a') ON CONFLICT(id) DO UPDATE SET body = notes.body || excluded.body",
        ),
        (
            "UPDATE notes SET body = customers.name FROM customers WHERE notes.id = customers.id",
            "UPDATE \"scratch\".\"notes\" SET body = customers.name FROM \"pilotage_demo\".\"customers\" WHERE notes.id = customers.id",
        ),
        (
            "DELETE FROM notes USING customers WHERE notes.id = customers.id RETURNING notes.id",
            "DELETE FROM \"scratch\".\"notes\" USING \"pilotage_demo\".\"customers\" WHERE notes.id = customers.id RETURNING notes.id",
        ),
        ("DELETE FROM scratch.notes AS n WHERE n.id = 1", "DELETE FROM \"scratch\".\"notes\" AS n WHERE n.id = 1"),
    ];
    for (text, expected) in cases {
        assert_eq!(runs_as(text), expected, "{text}");
    }
}

#[test]
fn a_recursive_cte_reads_itself_unqualified() {
    let text = "WITH RECURSIVE n (k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM n WHERE k < 3) SELECT k FROM n";
    assert_eq!(runs_as(text), text);
}

#[test]
fn relations_are_qualified_with_their_exact_names() {
    // A schema and a table whose names need quoting.
    let entries = [
        table(&relation_id("Payroll Data", "staff"), "table", &["id", "salary"], SAFE),
        table(&relation_id("public", "We\"ird"), "table", &["id"], SAFE),
    ];
    let catalog = TestCatalog(entries.into_iter().map(|e| (e.id.clone(), e)).collect());
    let validation = validate("SELECT staff.salary FROM staff; SELECT id FROM \"We\"\"ird\"", &catalog);
    assert!(errors(&validation).is_empty(), "{:#?}", validation.diagnostics);
    assert_eq!(
        validation.statements,
        ["SELECT staff.salary FROM \"Payroll Data\".\"staff\"", "SELECT id FROM \"public\".\"We\"\"ird\""]
    );
}

#[test]
fn execution_sends_the_qualified_statements() {
    let mut database = scripted(vec![Ok(rows(&["name"], json!([["Ada"]])))]);
    let result = execute("SELECT name FROM customers LIMIT 1", None, &mut database);
    assert!(result.outcome.ok, "{:?}", result.outcome);
    assert_eq!(database.calls[0].1, "SELECT name FROM \"pilotage_demo\".\"customers\" LIMIT 1");
    let input: Value = serde_json::from_str(result.steps[0].input.as_deref().unwrap()).unwrap();
    assert_eq!(input["statement"], database.calls[0].1);
}

#[test]
fn input_binding_follows_the_documented_convention() {
    let text = "SELECT name FROM customers WHERE id = $1 AND country = $2";
    assert!(bind_input(text, Some(&json!([1, "FR"]))).is_empty());
    assert!(bind_input(text, Some(&json!({"params": [1, "FR"]}))).is_empty());
    let missing = bind_input(text, Some(&json!([1])));
    assert_eq!(missing[0].code, "input_binding");
    let extra = bind_input(text, Some(&json!([1, "FR", 3])));
    assert_eq!(extra[0].path, Locator::Pointer("/2".into()));
    assert!(bind_input("SELECT 1", None).is_empty());
    assert!(!bind_input("SELECT 1", Some(&json!([1]))).is_empty());
}

/// The exports as the host calls them, through the SDK's `Language`:
/// input arrives as JSON text; text that is not JSON is a finding at
/// binding and runs as absent.
#[test]
fn the_exports_read_input_as_json_text() {
    let text = "SELECT name FROM customers WHERE id = $1";
    assert!(Sql::bind_input(text, Some("[1]")).is_empty());
    let broken = Sql::bind_input(text, Some("[1"));
    assert_eq!((broken.len(), broken[0].code.as_str()), (1, "input_binding"));
    assert_eq!(broken[0].path, Locator::Pointer(String::new()));
    assert!(broken[0].message.starts_with("input is not JSON: "), "{}", broken[0].message);
    let run = |input: &str| {
        let request = RunRequest {
            program: text.into(),
            input: Some(input.into()),
            context: None,
            test_run: false,
            deploy: false,
        };
        let mut database = scripted(vec![Ok(rows(&["name"], json!([["Ada"]])))]);
        (Sql::execute(&request, &mut database), database.calls)
    };
    let (result, calls) = run("[7]");
    assert!(result.outcome.ok, "{:?}", result.outcome);
    assert_eq!(calls[0].2, json!([7]));
    let (result, calls) = run("[7");
    assert_eq!(result.outcome.error.as_deref(), Some("the input does not bind to the program's parameters"));
    assert!(calls.is_empty());
    assert_eq!(Sql::describe(), crate::describe::language_info());
    assert_eq!(Sql::validate(text, None, &catalog()), check(text));
}

/// A scripted database over the test catalog: answers each statement in
/// turn, recording calls.
struct Scripted {
    catalog: TestCatalog,
    answers: Vec<Result<QueryResult, SqlError>>,
    calls: Vec<(String, String, Value)>,
}

fn scripted(answers: Vec<Result<QueryResult, SqlError>>) -> Scripted {
    Scripted { catalog: catalog(), answers, calls: vec![] }
}

impl Catalog for Scripted {
    fn entry(&self, id: &str) -> Option<CatalogEntry> {
        self.catalog.entry(id)
    }
    fn ids(&self) -> Vec<String> {
        self.catalog.ids()
    }
}

impl Effects for Scripted {
    fn invoke(&mut self, _step_id: &str, entry_id: &str, _input: &Value) -> Result<Value, InvokeError> {
        Err(InvokeError::Refused(format!("sql/postgres-15 calls no entry, not even {entry_id}")))
    }
    fn now(&self) -> u64 {
        0
    }
    fn query(&mut self, step_id: &str, statement: &str, params: &Value) -> Result<QueryResult, SqlError> {
        self.calls.push((step_id.into(), statement.into(), params.clone()));
        self.answers.remove(0)
    }
}

fn rows(columns: &[&str], rows: Value) -> QueryResult {
    let count = rows.as_array().map_or(0, Vec::len) as u64;
    QueryResult {
        columns: columns.iter().map(|c| Column { name: (*c).into(), type_name: "text".into() }).collect(),
        rows: rows.to_string(),
        rows_matched: count,
        truncated: false,
        elapsed_ms: 2,
    }
}

#[test]
fn execution_traces_statements_and_references_as_planned() {
    let text = "SELECT count(*) AS n FROM customers; SELECT c.name, o.status FROM customers c JOIN orders o ON o.customer_id = c.id WHERE c.id = $1 LIMIT 2";
    let mut database =
        scripted(vec![Ok(rows(&["n"], json!([[3]]))), Ok(rows(&["name", "status"], json!([["Ada", "shipped"]])))]);
    let result = execute(text, Some(&json!([7])), &mut database);
    assert!(result.outcome.ok, "{:?}", result.outcome);
    let plan = check(text).plan.unwrap();
    let planned: Vec<(String, Option<String>)> = plan.steps.into_iter().map(|s| (s.id, s.calls)).collect();
    let traced: Vec<(String, Option<String>)> = result.steps.iter().map(|s| (s.id.clone(), s.calls.clone())).collect();
    assert_eq!(planned, traced);
    // Statement 1 needs no parameter; statement 2 gets $1.
    assert_eq!(database.calls[0].2, json!([]));
    assert_eq!(database.calls[1].2, json!([7]));
    assert_eq!(database.calls[1].0, "stmt-2");
    let output: Value = serde_json::from_str(result.output.as_deref().unwrap()).unwrap();
    assert_eq!(output, json!([{"name": "Ada", "status": "shipped"}]));
    let first: Value = serde_json::from_str(result.steps[0].output.as_deref().unwrap()).unwrap();
    assert_eq!(first["rows_matched"], 1);
    assert!(result.steps[0].output.as_deref().unwrap().starts_with("{\"rows_matched\""));
    assert_eq!(result.steps[0].t_ms, Some(2));
}

#[test]
fn a_failed_statement_stops_the_run_as_rolled_back_with_the_trace_so_far() {
    let text = "SELECT count(*) FROM customers; SELECT count(*) FROM orders; SELECT count(*) FROM order_lines";
    let mut database = scripted(vec![
        Ok(rows(&["count"], json!([[3]]))),
        Err(SqlError::Failed("canceling statement due to statement timeout".into())),
    ]);
    let result = execute(text, None, &mut database);
    assert_eq!(result.outcome.status, codes::ROLLED_BACK);
    assert!(!result.outcome.ok);
    let ids: Vec<&str> = result.steps.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["stmt-1", "stmt-1.ref-1", "stmt-2", "stmt-2.ref-1"]);
    assert!(!result.steps[2].outcome.ok && result.steps[3].output.is_none());
    assert_eq!(database.calls.len(), 2);
    assert!(result.output.is_none());
}

#[test]
fn duplicate_column_names_are_suffixed_in_output() {
    let result = rows(&["id", "id"], json!([[1, 2]]));
    assert_eq!(crate::execute::rows_as_objects(&result), json!([{"id": 1, "id_2": 2}]));
}

/// Every position where a statement can name a type, a relation or a
/// function that PostgreSQL resolves in its own catalogs (Part II
/// §10.3): refused whatever the name, or resolved against the visible
/// catalog.
#[test]
fn names_reached_through_types_are_refused_in_every_position() {
    for text in [
        "SELECT 'customers'::regclass",
        "SELECT CAST('pg_authid' AS regclass)",
        "SELECT 'pg_authid'::regclass::oid",
        "SELECT '{customers,orders}'::regclass[]",
        "SELECT ARRAY['customers']::regclass[]",
        "SELECT CAST('{customers}' AS regclass[])",
        "SELECT 'x'::text::regclass",
        "SELECT regclass 'customers'",
        "SELECT 'int4'::regtype, 'now'::regproc, 'now()'::regprocedure, '+'::regoper",
        "SELECT '+(int4,int4)'::regoperator, 'public'::regnamespace, 'postgres'::regrole",
        "SELECT 'english'::regconfig, 'simple'::regdictionary, '\"C\"'::regcollation",
        "SELECT 'x'::pg_catalog.regclass",
        "SELECT NULL::pilotage_demo.customers",
        "SELECT '(,,,,)'::customers",
        "SELECT CAST(NULL AS scratch.notes)",
        "SELECT to_json(NULL::pilotage_demo.customers)",
        "SELECT ('(1,x,y,z,w)'::customers).name",
        "SELECT 'x'::app.mood",
        "SELECT '1'::pg_catalog.int4",
        "SELECT name FROM customers WHERE name = CAST(NULL::hidden.secret AS text) LIMIT 1",
        "SELECT name FROM customers WHERE id IN (SELECT (NULL::hidden.secret)::int) LIMIT 1",
        "INSERT INTO scratch.audit (id, note) VALUES (1, NULL::hidden.secret::text)",
        "UPDATE scratch.notes SET body = 'x'::regclass::text WHERE id = 1",
        "DELETE FROM scratch.notes WHERE id = 1 RETURNING 'notes'::regclass",
        "SELECT name COLLATE pilotage_demo.\"C\" FROM customers LIMIT 1",
    ] {
        let validation = check(text);
        assert!(!errors(&validation).is_empty(), "{text}: {:#?}", validation.diagnostics);
        assert!(
            codes_of(&validation).iter().any(|c| c == codes::TYPE_NOT_ALLOWED || c == codes::UNSUPPORTED_SYNTAX),
            "{text}: {:#?}",
            validation.diagnostics
        );
        assert!(validation.statements.is_empty() && validation.plan.is_none(), "{text}");
    }
    // The finding names only what was written: the same whether the
    // relation is in the catalog or not.
    let mut with_secret = catalog();
    let secret = table("hidden.secret", "table", &["id", "amount"], SAFE);
    with_secret.0.insert(secret.id.clone(), secret);
    for text in ["SELECT NULL::hidden.secret", "SELECT '(1,2)'::secret", "SELECT '{hidden.secret}'::regclass[]"] {
        let present = validate(text, &with_secret);
        let absent = check(text);
        assert_eq!(format!("{:?}", present.diagnostics), format!("{:?}", absent.diagnostics), "{text}");
        assert_eq!(codes_of(&absent), [codes::TYPE_NOT_ALLOWED], "{text}");
    }

    // Functions taking relation names as text are off the allow-list.
    for text in [
        "SELECT to_regclass('hidden.secret')",
        "SELECT pg_relation_size('hidden.secret')",
        "SELECT has_table_privilege('hidden.secret', 'SELECT')",
        "SELECT currval('hidden.seq')",
        "SELECT pg_get_viewdef('hidden.v')",
        "SELECT pg_catalog.pg_get_indexdef(1)",
        "SELECT format('%s', to_regclass('x'))",
    ] {
        assert_code(text, codes::FUNCTION_NOT_ALLOWED);
    }
    // System relations resolve against the visible catalog like any other.
    for text in [
        "SELECT relname FROM pg_catalog.pg_class LIMIT 1",
        "SELECT relname FROM pg_class LIMIT 1",
        "SELECT table_name FROM information_schema.tables LIMIT 1",
    ] {
        assert_code(text, codes::UNKNOWN_TABLE);
    }
    // `TABLE name` does not parse in the Language's dialect: refused before
    // any name is looked at.
    assert_code("TABLE customers", codes::SYNTAX_ERROR);

    // The good polarity: built-in types, arrays of them, typed literals,
    // an unqualified collation.
    let fine = assert_valid(
        "SELECT id::text, CAST(id AS bigint), '{1,2}'::int[], DATE '2025-01-01', INTERVAL '1 day', \
         '1.5'::numeric(10, 2), now()::timestamptz, name COLLATE \"C\" FROM customers LIMIT 1",
    );
    assert!(fine.statements[0].contains("COLLATE \"C\""), "{:?}", fine.statements);
}

#[test]
fn update_and_upsert_are_destructive_and_insert_is_a_write() {
    let update = assert_valid("UPDATE scratch.notes SET body = 'x' WHERE id = 1");
    let plan = update.plan.unwrap();
    assert_eq!(plan.max_risk, "destructive");
    assert_eq!((plan.steps[0].risk.as_str(), plan.steps[1].risk.as_str()), ("destructive", "destructive"));
    let upsert =
        assert_valid("INSERT INTO scratch.notes (id, body) VALUES (1, 'x') ON CONFLICT (id) DO UPDATE SET body = 'y'");
    assert_eq!(upsert.plan.unwrap().max_risk, "destructive");
    let insert = assert_valid("INSERT INTO scratch.notes (id, body) VALUES (1, 'x') ON CONFLICT (id) DO NOTHING");
    assert_eq!(insert.plan.unwrap().max_risk, "write");
    // A `write` entry (the role may only insert) takes inserts, not
    // overwrites.
    assert_valid("INSERT INTO scratch.audit (id, note) VALUES (1, 'x')");
    assert_code("UPDATE scratch.audit SET note = 'x' WHERE id = 1", codes::READ_ONLY_RELATION);
    assert_code(
        "INSERT INTO scratch.audit (id, note) VALUES (1, 'x') ON CONFLICT (id) DO UPDATE SET note = 'y'",
        codes::READ_ONLY_RELATION,
    );
    // The reference sub-step's access in the trace says which.
    let mut database = scripted(vec![Ok(rows(&[], json!([])))]);
    let result = execute("UPDATE scratch.notes SET body = 'x' WHERE id = 1", None, &mut database);
    let input: Value = serde_json::from_str(result.steps[1].input.as_deref().unwrap()).unwrap();
    assert_eq!(input["access"], "update");
}

/// Entry ids with dots, quotes, case and non-ASCII letters: each name
/// runs exactly its own relation, never one whose dot-joined name is the
/// same.
#[test]
fn a_name_with_a_dot_runs_exactly_its_own_relation() {
    let entries = [
        table(&relation_id("a", "b.c"), "table", &["id", "inner_dot"], SAFE),
        table(&relation_id("a.b", "c"), "table", &["id", "outer_dot"], SAFE),
        table(&relation_id("S", "Straße \"x\""), "table", &["id"], SAFE),
    ];
    assert_eq!(entries[0].id, "a.\"b.c\"");
    assert_eq!(entries[1].id, "\"a.b\".c");
    let catalog = TestCatalog(entries.into_iter().map(|e| (e.id.clone(), e)).collect());
    let cases = [
        ("SELECT inner_dot FROM a.\"b.c\"", "SELECT inner_dot FROM \"a\".\"b.c\""),
        ("SELECT inner_dot FROM \"b.c\"", "SELECT inner_dot FROM \"a\".\"b.c\""),
        ("SELECT outer_dot FROM \"a.b\".c", "SELECT outer_dot FROM \"a.b\".\"c\""),
        ("SELECT outer_dot FROM c", "SELECT outer_dot FROM \"a.b\".\"c\""),
        ("SELECT \"a.b\".c.outer_dot FROM \"a.b\".c", "SELECT \"a.b\".c.outer_dot FROM \"a.b\".\"c\""),
        ("SELECT id FROM \"S\".\"Straße \"\"x\"\"\"", "SELECT id FROM \"S\".\"Straße \"\"x\"\"\""),
    ];
    for (text, runs) in cases {
        let validation = validate(text, &catalog);
        assert!(errors(&validation).is_empty(), "{text}: {:#?}", validation.diagnostics);
        assert_eq!(validation.statements, [runs], "{text}");
    }
    // The colliding spellings name nothing visible.
    for text in [
        "SELECT id FROM a.b.c",
        "SELECT id FROM \"a.b.c\"",
        "SELECT id FROM a.b",
        "SELECT id FROM s.\"Straße \"\"x\"\"\"",
    ] {
        let validation = validate(text, &catalog);
        assert!(!errors(&validation).is_empty(), "{text}");
        assert!(validation.statements.is_empty(), "{text}");
    }
    // The columns of one are never the other's.
    assert!(!errors(&validate("SELECT outer_dot FROM \"b.c\"", &catalog)).is_empty());
    let plan = validate("SELECT inner_dot FROM \"b.c\"", &catalog).plan.unwrap();
    assert_eq!(plan.steps[1].calls.as_deref(), Some("a.\"b.c\""));
}

/// `c0` has one column and each `ck` joins `c(k-1)` with itself under
/// `SELECT *`, so `ck` has 2^k columns (the conformance bindings' chain).
fn cte_chain(depth: usize) -> String {
    let mut text = String::from("WITH c0 AS (SELECT 1 AS x)");
    for level in 1..=depth {
        text.push_str(&format!(", c{level} AS (SELECT * FROM c{} a, c{} b)", level - 1, level - 1));
    }
    text.push_str(&format!(" SELECT 1 AS n FROM c{depth} LIMIT 1"));
    text
}

/// The analysis of one statement program.
fn analysis_of(text: &str) -> (crate::analyze::Analysis, Vec<Diagnostic>) {
    let catalog = catalog();
    let relations = crate::analyze::Relations::load(&catalog);
    let program = crate::program::parse(text).unwrap();
    let [parsed] = program.statements.as_slice() else { panic!("{text}: one statement expected") };
    crate::analyze::Analyzer::new(&relations, parsed.range).statement(&parsed.statement)
}

#[test]
fn a_chain_of_thirty_ctes_validates_in_linear_work() {
    // Part II §10.1: validation is bounded. Within the column bound the
    // stars expand to 2 + 4 + … + 2^k names, each CTE analysed once.
    let (analysis, diagnostics) = analysis_of(&cte_chain(10));
    assert!(diagnostics.iter().all(|d| d.severity != Severity::Error), "{diagnostics:#?}");
    assert_eq!(analysis.star_columns, (1..=10).map(|k| 1usize << k).sum::<usize>());
    assert_valid(&cte_chain(10));
    // Past it (2^11 = 2048 > 1664) the first too-wide level is refused once
    // (after expanding its first 1024-column side), and the levels built on
    // it expand nothing: the work stops growing with the depth.
    let bounded = analysis.star_columns + 1024;
    for depth in [11, 15, 20, 30] {
        let (analysis, diagnostics) = analysis_of(&cte_chain(depth));
        let refusals: Vec<&Diagnostic> = diagnostics.iter().filter(|d| d.severity == Severity::Error).collect();
        assert_eq!(refusals.len(), 1, "depth {depth}: {diagnostics:#?}");
        assert_eq!(refusals[0].code, codes::UNSUPPORTED_SYNTAX);
        assert!(refusals[0].message.contains("2048 columns"), "{}", refusals[0].message);
        assert!(refusals[0].message.contains(&codes::MAX_COLUMNS.to_string()));
        assert_eq!(analysis.star_columns, bounded, "depth {depth}");
    }
    // Through the validator the thirty-level chain is a finding, not a plan.
    let validation = assert_code(&cte_chain(30), codes::UNSUPPORTED_SYNTAX);
    assert!(validation.plan.is_none());
}

#[test]
fn a_star_may_carry_up_to_the_column_bound_and_no_more() {
    // Both sides of MAX_COLUMNS, without CTEs: one wide VALUES list.
    let wide = |width: usize| {
        let row = vec!["1"; width].join(", ");
        format!("SELECT * FROM (VALUES ({row})) AS v LIMIT 1")
    };
    let at_bound = check(&wide(codes::MAX_COLUMNS));
    assert!(errors(&at_bound).is_empty(), "{:#?}", at_bound.diagnostics);
    assert!(at_bound.plan.is_some());
    assert_code(&wide(codes::MAX_COLUMNS + 1), codes::UNSUPPORTED_SYNTAX);
    // A qualified star counts the same way.
    let joined = "WITH w AS (SELECT * FROM (VALUES (ROW_PLACEHOLDER)) AS v) SELECT a.*, b.* FROM w a, w b LIMIT 1";
    let half = vec!["1"; codes::MAX_COLUMNS / 2].join(", ");
    let fits = check(&joined.replace("ROW_PLACEHOLDER", &half));
    assert!(errors(&fits).is_empty(), "{:#?}", fits.diagnostics);
    let over = vec!["1"; codes::MAX_COLUMNS / 2 + 1].join(", ");
    assert_code(&joined.replace("ROW_PLACEHOLDER", &over), codes::UNSUPPORTED_SYNTAX);
}
