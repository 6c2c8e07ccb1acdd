//! The sql/postgres-15 analyzer, natively (`sql::validate::validate` over
//! a catalog shaped like the demo sales schema). Properties: no panic;
//! validation is deterministic; text ranges are 1-based with start ≤ end;
//! a program without error diagnostics has a plan with unique step ids
//! whose `calls` name catalog entries, and every statement it will run
//! (rendered schema-qualified) parses again as PostgreSQL.
#![no_main]

use std::collections::{BTreeMap, BTreeSet};

use libfuzzer_sys::fuzz_target;
use pilotage_guest_sdk::diag::{DESTRUCTIVE, SAFE, WRITE};
use pilotage_guest_sdk::{Catalog, CatalogEntry, Locator, RiskHints, Severity, TextRange};
use serde_json::{Value, json};

struct Schema(BTreeMap<String, CatalogEntry>);

impl Catalog for Schema {
    fn entry(&self, id: &str) -> Option<CatalogEntry> {
        self.0.get(id).cloned()
    }
    fn ids(&self) -> Vec<String> {
        self.0.keys().cloned().collect()
    }
}

fn table(id: &str, kind: &str, columns: &[&str], hints: RiskHints) -> CatalogEntry {
    let properties: serde_json::Map<String, Value> =
        columns.iter().map(|c| ((*c).to_owned(), json!({"type": ["string", "null"]}))).collect();
    CatalogEntry {
        id: id.into(),
        kind: kind.into(),
        name: id.rsplit('.').next().unwrap().into(),
        description: None,
        input_schema: None,
        output_schema: Some(json!({"type": "object", "properties": properties}).to_string()),
        risk: sql::codes::risk_label(hints.read_only, hints.destructive).into(),
        risk_hints: hints,
        tags: vec![],
    }
}

fn schema() -> Schema {
    let entries = [
        table("pilotage_demo.customers", "table", &["id", "name", "email", "country", "created_at"], SAFE),
        table("pilotage_demo.orders", "table", &["id", "customer_id", "ordered_at", "status", "total_amount"], SAFE),
        table("pilotage_demo.revenue_by_month", "view", &["month", "revenue"], SAFE),
        table("scratch.notes", "table", &["id", "body"], DESTRUCTIVE),
        table("scratch.audit", "table", &["id", "note"], WRITE),
    ];
    Schema(entries.into_iter().map(|e| (e.id.clone(), e)).collect())
}

fn check_range(range: &TextRange) {
    let start = (range.start.line, range.start.column);
    let end = (range.end.line, range.end.column);
    assert!(start.0 >= 1 && start.1 >= 1, "not 1-based: {range:?}");
    assert!(start <= end, "start after end: {range:?}");
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let catalog = schema();
    let validation = sql::validate::validate(text, &catalog);
    for diagnostic in &validation.diagnostics {
        if let Locator::Range(range) = &diagnostic.path {
            check_range(range);
        }
        if let Some(range) = &diagnostic.range {
            check_range(range);
        }
    }
    assert_eq!(
        format!("{validation:?}"),
        format!("{:?}", sql::validate::validate(text, &catalog)),
        "validation is deterministic"
    );
    if validation.diagnostics.iter().all(|d| d.severity != Severity::Error) {
        let plan = validation.plan.as_ref().expect("a valid program has a plan");
        let mut ids = BTreeSet::new();
        for step in &plan.steps {
            assert!(ids.insert(step.id.as_str()), "duplicate step id {}", step.id);
            if let Some(calls) = &step.calls {
                assert!(catalog.0.contains_key(calls), "step calls {calls}, not in the catalog");
            }
        }
        for statement in &validation.statements {
            if let Err(diagnostic) = sql::program::parse(statement) {
                panic!("the rendered statement {statement:?} does not parse: {diagnostic:?}");
            }
        }
    }
    let _ = sql::validate::bind_input(text, Some(&json!({"1": "a"})));
});
