//! What a sql/postgres-15 statement can reach, through the real MCP
//! endpoint against the machine's PostgreSQL: a hidden relation answers
//! exactly like a nonexistent one in every position a name can take
//! (casts, `reg*` types and their arrays, row types, functions taking
//! names as text; Part II §10.3); relation entry ids stay unambiguous for
//! names with dots, quotes, upper case and non-ASCII letters, so each id
//! runs exactly its own relation; and the risk of UPDATE and upserts is
//! `destructive`, in the plan and in the entries introspection derives
//! from the role's privileges (Part II §5.3).

use serde_json::{Value, json};

use crate::endpoint::{Backend, postgres_url, unique};
use crate::sql_endpoint::{acme_world, call, codes, postgres, scalar};
use crate::tenancy::admin;

const REFRESH: &str = "/tenants/acme/data-sources/ledger/refresh";

/// Every form by which a statement could name `{h}.payroll` (or its
/// schema) other than a FROM item, and the FROM item itself.
fn name_positions(h: &str) -> Vec<String> {
    [
        "SELECT NULL::{h}.payroll",
        "SELECT '(1,2)'::{h}.payroll",
        "SELECT CAST(NULL AS {h}.payroll)",
        "SELECT CAST('(1,2)' AS {h}.payroll[])",
        "SELECT (NULL::{h}.payroll).salary",
        "SELECT to_json(NULL::{h}.payroll)",
        "SELECT '{h}.payroll'::regclass",
        "SELECT '{{{h}.payroll}}'::regclass[]",
        "SELECT CAST('{h}.payroll' AS regclass)",
        "SELECT regclass '{h}.payroll'",
        "SELECT '{h}.payroll'::text::regclass::oid",
        "SELECT '{h}'::regnamespace",
        "SELECT '{h}.payroll'::regtype",
        "SELECT to_regclass('{h}.payroll')",
        "SELECT pg_relation_size('{h}.payroll')",
        "SELECT has_table_privilege('{h}.payroll', 'SELECT')",
        "SELECT salary FROM {h}.payroll LIMIT 1",
        "SELECT 'x' COLLATE {h}.\"C\"",
        "SELECT 1 FROM payroll WHERE salary = (NULL::{h}.payroll).salary LIMIT 1",
    ]
    .iter()
    .map(|form| form.replace("{h}", h))
    .collect()
}

/// The regression guard for hidden relations reachable through types: a
/// caller without `hr` gets, for every form, the byte-identical
/// validation (the whole result) and the same Run outcome while the
/// hidden table exists and after it and its schema are gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hidden_relation_answers_like_a_nonexistent_one_in_every_name_position() {
    let hidden = unique("pilotage_reachhidden");
    let visible = unique("pilotage_reachvisible");
    postgres(&crate::sql_language::two_payrolls(&hidden, &visible)).await;
    let visibility = json!({format!("{hidden}.payroll"): ["hr"]});
    let (world, _) = acme_world(Backend::Sqlite, &[&hidden, &visible], visibility).await;
    let ann = world.acme("ann", &[]).await;
    let forms = name_positions(&hidden);

    let mut while_hidden: Vec<(String, Value)> = Vec::new();
    for form in &forms {
        let validated = call(&ann, "validate_sql", json!({"query": form})).await;
        assert_eq!(validated["valid"], false, "{form} validated: {validated}");
        let run = call(&ann, "run_sql", json!({"query": form})).await;
        assert_eq!(run["outcome"]["status"], "validation_error", "{form} ran: {run}");
        assert!(!validated.to_string().contains("900001"), "{validated}");
        while_hidden.push((validated.to_string(), json!([run["outcome"], run["diagnostics"]])));
    }

    postgres(&format!("DROP SCHEMA {hidden} CASCADE")).await;
    let (status, refreshed) = admin(&world.server, reqwest::Method::POST, REFRESH, None).await;
    assert_eq!(status, 200, "{refreshed}");
    assert_eq!(refreshed["catalog"]["removed"], json!([format!("{hidden}.payroll")]), "{refreshed}");
    for (form, (validated_before, run_before)) in forms.iter().zip(&while_hidden) {
        let validated = call(&ann, "validate_sql", json!({"query": form})).await;
        assert_eq!(&validated.to_string(), validated_before, "{form}: the answer told hidden from nonexistent");
        let run = call(&ann, "run_sql", json!({"query": form})).await;
        assert_eq!(&json!([run["outcome"], run["diagnostics"]]), run_before, "{form}");
    }

    // The good polarity: built-in casts on the visible table run.
    let fine =
        "SELECT salary::bigint AS s, CAST(id AS text) AS i, '{1,2}'::int[] AS a FROM payroll ORDER BY id LIMIT 2";
    let run = call(&ann, "run_sql", json!({"query": fine})).await;
    assert_eq!(run["outcome"]["status"], "success", "{run}");
    assert_eq!(run["output"], json!([{"s": 100, "i": "1", "a": [1, 2]}, {"s": 200, "i": "2", "a": [1, 2]}]));
    ann.close().await;
    world.server.stop().await;
    postgres(&format!("DROP SCHEMA {visible} CASCADE")).await;
}

/// The regression guard for ambiguous entry ids: schema `a` holding table
/// `b.c` and schema `a.b` holding table `c` joined to the same `a.b.c`.
/// Each now has its own id, and every spelling runs exactly its own
/// relation, for quotes, upper case and non-ASCII names too; the
/// visibility rule keyed by the quoted id hides exactly that relation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entry_ids_with_dots_quotes_case_and_unicode_run_exactly_their_own_relation() {
    let a = unique("pilotage_reachids");
    let dotted = format!("{a}.b");
    postgres(&format!(
        "CREATE SCHEMA {a};
         CREATE SCHEMA \"{dotted}\";
         CREATE TABLE {a}.\"b.c\" (marker text NOT NULL);
         CREATE TABLE \"{dotted}\".c (marker text NOT NULL);
         CREATE TABLE {a}.\"Mixed\" (marker text NOT NULL);
         CREATE TABLE {a}.mixed (marker text NOT NULL);
         CREATE TABLE {a}.\"say \"\"hi\"\"\" (marker text NOT NULL);
         CREATE TABLE {a}.\"café\" (marker text NOT NULL);
         INSERT INTO {a}.\"b.c\" VALUES ('inner dot');
         INSERT INTO \"{dotted}\".c VALUES ('outer dot');
         INSERT INTO {a}.\"Mixed\" VALUES ('upper');
         INSERT INTO {a}.mixed VALUES ('lower');
         INSERT INTO {a}.\"say \"\"hi\"\"\" VALUES ('quoted');
         INSERT INTO {a}.\"café\" VALUES ('unicode');"
    ))
    .await;
    let outer_id = format!("\"{dotted}\".c");
    let visibility = json!({outer_id.clone(): ["hr"]});
    let (world, body) = acme_world(Backend::Sqlite, &[&a, &dotted], visibility).await;
    let mut added: Vec<String> =
        body["catalog"]["added"].as_array().unwrap().iter().map(|id| id.as_str().unwrap().to_owned()).collect();
    added.sort();
    let mut expected = vec![
        format!("{a}.\"b.c\""),
        format!("{a}.\"Mixed\""),
        format!("{a}.mixed"),
        format!("{a}.\"say \"\"hi\"\"\""),
        format!("{a}.\"café\""),
        outer_id.clone(),
    ];
    expected.sort();
    assert_eq!(added, expected, "{body}");

    let hanna = world.acme("hanna", &["hr"]).await;
    let reads = [
        (format!("{a}.\"b.c\""), format!("{a}.\"b.c\""), "inner dot"),
        ("\"b.c\"".to_owned(), format!("{a}.\"b.c\""), "inner dot"),
        (format!("\"{dotted}\".c"), outer_id.clone(), "outer dot"),
        ("c".to_owned(), outer_id.clone(), "outer dot"),
        ("\"Mixed\"".to_owned(), format!("{a}.\"Mixed\""), "upper"),
        ("Mixed".to_owned(), format!("{a}.mixed"), "lower"),
        ("\"say \"\"hi\"\"\"".to_owned(), format!("{a}.\"say \"\"hi\"\"\""), "quoted"),
        ("café".to_owned(), format!("{a}.\"café\""), "unicode"),
    ];
    for (name, id, marker) in &reads {
        let query = format!("SELECT marker FROM {name} LIMIT 1");
        let run = call(&hanna, "run_sql", json!({"query": query, "trace_level": "full"})).await;
        assert_eq!(run["outcome"]["status"], "success", "{query}: {run}");
        assert_eq!(run["output"], json!([{"marker": marker}]), "{query}");
        assert_eq!(run["trace"]["steps"][1]["calls"], json!(id), "{query}: {run}");
        let entry =
            call(&hanna, "pilotage_catalog", json!({"language": "sql/postgres-15", "verb": "get", "id": id})).await;
        assert_eq!(entry["entry"]["id"], json!(id), "{entry}");
    }
    // The dot-joined spellings name nothing.
    for name in [format!("{a}.b.c"), format!("\"{a}.b.c\""), format!("{a}.b")] {
        let query = format!("SELECT marker FROM {name} LIMIT 1");
        let validated = call(&hanna, "validate_sql", json!({"query": query})).await;
        assert_eq!(validated["valid"], false, "{query}: {validated}");
    }

    // Without `hr`, the quoted visibility key hides exactly `"a.b".c`:
    // the unqualified `c` is unknown, and `"b.c"` still runs its own.
    let ann = world.acme("ann", &[]).await;
    for query in ["SELECT marker FROM c LIMIT 1".to_owned(), format!("SELECT marker FROM \"{dotted}\".c LIMIT 1")] {
        let validated = call(&ann, "validate_sql", json!({"query": query})).await;
        assert_eq!(codes(&validated), ["unknown_table"], "{query}: {validated}");
        assert!(!validated.to_string().contains("outer"), "{validated}");
    }
    let run = call(&ann, "run_sql", json!({"query": "SELECT marker FROM \"b.c\" LIMIT 1"})).await;
    assert_eq!(run["output"], json!([{"marker": "inner dot"}]), "{run}");
    let hidden =
        call(&ann, "pilotage_catalog", json!({"language": "sql/postgres-15", "verb": "get", "id": outer_id})).await;
    assert!(hidden.get("error").is_some(), "{hidden}");
    ann.close().await;
    hanna.close().await;
    world.server.stop().await;
    postgres(&format!("DROP SCHEMA {a} CASCADE; DROP SCHEMA \"{dotted}\" CASCADE")).await;
}

/// The regression guard for risk labels: UPDATE and `INSERT … ON
/// CONFLICT DO UPDATE` overwrite values and are `destructive` in the plan;
/// an INSERT only adds and is `write`. Introspection labels an entry by
/// what the role may destroy: INSERT only → `write`, UPDATE → `destructive`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_is_destructive_in_the_plan_and_in_the_catalog() {
    let schema = unique("pilotage_reachrisk");
    let role = unique("pilotage_reachrole");
    postgres(&format!(
        "CREATE SCHEMA {schema};
         CREATE TABLE {schema}.appended (id integer PRIMARY KEY, note text NOT NULL);
         CREATE TABLE {schema}.edited (id integer PRIMARY KEY, note text NOT NULL);
         INSERT INTO {schema}.edited VALUES (1, 'before');
         CREATE ROLE {role} LOGIN;
         GRANT USAGE ON SCHEMA {schema} TO {role};
         GRANT SELECT, INSERT ON {schema}.appended TO {role};
         GRANT SELECT, UPDATE ON {schema}.edited TO {role};"
    ))
    .await;
    let (world, body) = acme_world(Backend::Sqlite, &[&schema], json!({})).await;
    assert_eq!(body["catalog"]["added"].as_array().unwrap().len(), 2, "{body}");
    // The same tables seen through the role's privileges.
    let url = postgres_url().replacen("postgres@", &format!("{role}@"), 1);
    let path = "/tenants/acme/data-sources/ledger";
    let (status, body) =
        admin(&world.server, reqwest::Method::PUT, path, Some(json!({"url": url, "schemas": [schema]}))).await;
    assert_eq!(status, 200, "{body}");
    let ann = world.acme("ann", &[]).await;
    let risk_of = async |table: &str| {
        let id = format!("{schema}.{table}");
        let entry =
            call(&ann, "pilotage_catalog", json!({"language": "sql/postgres-15", "verb": "get", "id": id})).await;
        (entry["entry"]["risk"].clone(), entry["entry"]["risk_hints"]["destructive"].clone())
    };
    assert_eq!(risk_of("appended").await, (json!("write"), json!(false)));
    assert_eq!(risk_of("edited").await, (json!("destructive"), json!(true)));

    let plans = [
        (format!("INSERT INTO {schema}.appended (id, note) VALUES (1, 'x')"), "write", false),
        (format!("UPDATE {schema}.edited SET note = 'after' WHERE id = 1"), "destructive", true),
        (
            format!("INSERT INTO {schema}.edited (id, note) VALUES (1, 'x') ON CONFLICT (id) DO UPDATE SET note = 'y'"),
            "destructive",
            true,
        ),
    ];
    for (query, risk, destructive) in &plans {
        let validated = call(&ann, "validate_sql", json!({"query": query})).await;
        assert_eq!(validated["valid"], true, "{query}: {validated}");
        assert_eq!(validated["plan"]["max_risk"], *risk, "{query}: {validated}");
        assert_eq!(validated["plan"]["max_risk_hints"]["destructive"], *destructive, "{query}");
        assert_eq!(validated["plan"]["steps"][1]["risk"], *risk, "{query}");
    }
    // The role may only insert into `appended`: an overwrite is refused
    // before the database, an insert runs.
    let refused = format!("UPDATE {schema}.appended SET note = 'y' WHERE id = 1");
    let validated = call(&ann, "validate_sql", json!({"query": refused})).await;
    assert_eq!(codes(&validated), ["read_only_relation"], "{validated}");
    let run = call(&ann, "run_sql", json!({"query": plans[0].0, "trace_level": "full"})).await;
    assert_eq!(run["outcome"]["status"], "success", "{run}");
    assert_eq!(run["trace"]["steps"][1]["input"]["access"], "insert", "{run}");
    assert_eq!(scalar(&format!("SELECT count(*) FROM {schema}.appended")).await, 1);
    ann.close().await;
    world.server.stop().await;
    postgres(&format!("DROP SCHEMA {schema} CASCADE; DROP OWNED BY {role}; DROP ROLE {role}")).await;
}
