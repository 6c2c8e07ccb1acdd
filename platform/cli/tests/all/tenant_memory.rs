//! Loads of the same component bytes share one loaded component (compiled
//! code, pre-instantiation, description), so a tenant that publishes a
//! Language another tenant already uses costs no code; different bytes are
//! never shared; a shared component still runs every call in its own store
//! against the caller's own catalog (Part II §10.1 bounded evaluation).

use futures::executor::block_on;
use pilotage_engine::catalog::CatalogSnapshot;
use pilotage_engine::description::ProgramKind;
use pilotage_engine::validation::{self, Program};
use pilotage_engine::{Component, Engine};
use pilotage_protocol::catalog::CatalogEntry;
use serde_json::json;

use crate::support::{HOSTILE, test_bounds};

fn capability(id: &str) -> CatalogEntry {
    serde_json::from_value(json!({
        "id": id, "kind": "capability", "name": id, "input_schema": {"type": "object"},
        "risk": "safe", "risk_hints": {"readOnly": true, "destructive": false, "openWorld": false}
    }))
    .unwrap()
}

fn calls(capability_id: &str) -> Program {
    let value = json!({"steps": [{"id": "s", "kind": "call", "capability": capability_id}]});
    Program::from_argument(ProgramKind::Json, &value, 1 << 20, 64).unwrap()
}

fn valid(component: &Component, program: &Program, catalog: &CatalogSnapshot) -> bool {
    block_on(validation::validate(component, program, None, catalog)).expect("validation runs").response.valid
}

#[test]
fn the_same_bytes_share_one_loaded_component_and_different_bytes_do_not() {
    let engine = Engine::new(test_bounds(), None).unwrap();
    assert_eq!(engine.code_loads(), 0);
    let first = engine.load(pilotage_bundled::WORKFLOW).unwrap();
    assert_eq!(engine.code_loads(), 1);
    // A second tenant publishing the very same bytes: nothing compiled,
    // read or described again; one component in memory.
    // A copy elsewhere in memory: sharing goes by content, not address.
    let copy = pilotage_bundled::WORKFLOW.to_vec();
    let second = engine.load(&copy).unwrap();
    assert_eq!(engine.code_loads(), 1);
    assert!(first.shares_code_with(&second));
    assert_eq!(first.sha256(), second.sha256());
    // Different bytes are a different component.
    let other = engine.load(HOSTILE).unwrap();
    assert_eq!(engine.code_loads(), 2);
    assert!(!other.shares_code_with(&first));
    assert_ne!(other.sha256(), first.sha256());
    // Another engine (other bounds, other compiled code) shares nothing.
    let elsewhere = Engine::new(test_bounds(), None).unwrap().load(pilotage_bundled::WORKFLOW).unwrap();
    assert!(!elsewhere.shares_code_with(&first));
}

#[test]
fn the_last_user_dropping_a_component_frees_it() {
    let engine = Engine::new(test_bounds(), None).unwrap();
    let first = engine.load(HOSTILE).unwrap();
    let kept = first.clone();
    drop(first);
    // Still in use through `kept`: shared.
    assert!(engine.load(HOSTILE).unwrap().shares_code_with(&kept));
    assert_eq!(engine.code_loads(), 1);
    drop(kept);
    // Nobody uses it any more: the next load loads it again.
    let reloaded = engine.load(HOSTILE).unwrap();
    assert_eq!(engine.code_loads(), 2);
    assert!(reloaded.shares_code_with(&engine.load(HOSTILE).unwrap()));
}

#[test]
fn a_shared_component_runs_each_tenants_calls_against_its_own_catalog() {
    let engine = Engine::new(test_bounds(), None).unwrap();
    let tenant_a = engine.load(pilotage_bundled::WORKFLOW).unwrap();
    let tenant_b = engine.load(pilotage_bundled::WORKFLOW).unwrap();
    assert!(tenant_a.shares_code_with(&tenant_b));
    let catalog_a = CatalogSnapshot::hashed(vec![capability("cap_only_a")]);
    let catalog_b = CatalogSnapshot::hashed(vec![capability("cap_only_b")]);
    let uses_a = calls("cap_only_a");
    let uses_b = calls("cap_only_b");
    // Interleaved: no call sees another call's catalog or state.
    for _ in 0..3 {
        assert!(valid(&tenant_a, &uses_a, &catalog_a));
        assert!(!valid(&tenant_b, &uses_a, &catalog_b));
        assert!(valid(&tenant_b, &uses_b, &catalog_b));
        assert!(!valid(&tenant_a, &uses_b, &catalog_a));
    }
}
