//! The workflow/v1 program parser and validator, natively
//! (`workflow::validate::validate` and `bind_input` over the demo catalog).
//! Properties: no panic; validation is deterministic; pointers are RFC 6901
//! (empty or starting with `/`); a program without error diagnostics has a
//! plan whose step ids are unique and free of `#` and `/` (Part II §5.8.2)
//! and whose `calls` and references name catalog entries (Part II §6.4).
#![no_main]

use std::collections::{BTreeMap, BTreeSet};

use libfuzzer_sys::fuzz_target;
use pilotage_guest_sdk::{Catalog, CatalogEntry, Locator, Severity, Validation};
use serde_json::Value;
use workflow::validate::{bind_input, validate};

struct Demo(BTreeMap<String, CatalogEntry>);

impl Catalog for Demo {
    fn entry(&self, id: &str) -> Option<CatalogEntry> {
        self.0.get(id).cloned()
    }
    fn ids(&self) -> Vec<String> {
        self.0.keys().cloned().collect()
    }
}

fn demo() -> Demo {
    let file: Value = serde_json::from_str(include_str!("../../platform/server/demo/catalog.json")).unwrap();
    let mut entries = BTreeMap::new();
    for entry in file["entries"].as_array().unwrap() {
        let hints = &entry["risk_hints"];
        let id = entry["id"].as_str().unwrap().to_owned();
        entries.insert(
            id.clone(),
            CatalogEntry {
                id,
                kind: entry["kind"].as_str().unwrap().to_owned(),
                name: entry["name"].as_str().unwrap().to_owned(),
                description: entry["description"].as_str().map(str::to_owned),
                input_schema: entry.get("input_schema").map(Value::to_string),
                output_schema: entry.get("output_schema").map(Value::to_string),
                risk: entry["risk"].as_str().unwrap().to_owned(),
                risk_hints: pilotage_guest_sdk::RiskHints {
                    read_only: hints["readOnly"].as_bool().unwrap(),
                    destructive: hints["destructive"].as_bool().unwrap(),
                    open_world: hints["openWorld"].as_bool().unwrap(),
                },
                tags: vec![],
            },
        );
    }
    Demo(entries)
}

fn check(validation: &Validation, catalog: &Demo) {
    for diagnostic in &validation.diagnostics {
        if let Locator::Pointer(pointer) = &diagnostic.path {
            assert!(pointer.is_empty() || pointer.starts_with('/'), "{diagnostic:?}");
        }
        assert!(!diagnostic.code.is_empty() && !diagnostic.message.is_empty(), "{diagnostic:?}");
    }
    if validation.diagnostics.iter().all(|d| d.severity != Severity::Error) {
        // An invalid program may reference unknown names (diagnosed as such).
        for reference in &validation.references {
            assert!(catalog.0.contains_key(reference), "reference {reference} is not in the catalog");
        }
        let plan = validation.plan.as_ref().expect("a valid program has a plan");
        let mut ids = BTreeSet::new();
        for step in &plan.steps {
            assert!(ids.insert(step.id.as_str()), "duplicate step id {}", step.id);
            assert!(!step.id.is_empty() && !step.id.contains(['#', '/']), "step id {:?}", step.id);
            if let Some(calls) = &step.calls {
                assert!(catalog.0.contains_key(calls), "step calls {calls}, not in the catalog");
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let catalog = demo();
    let validation = validate(text, &catalog);
    check(&validation, &catalog);
    assert_eq!(format!("{validation:?}"), format!("{:?}", validate(text, &catalog)), "validation is deterministic");
    // Input binding over the same text, with and without an input.
    let _ = bind_input(text, None);
    let _ = bind_input(text, Some(&serde_json::json!({"userId": "u-1", "n": 3})));
});
