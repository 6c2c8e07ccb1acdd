//! Promotion (Part II §3.5, §5.4): validate a program, store its body
//! immutably under a content-derived `program_ref`, record the baseline of
//! every entry it references, and publish a catalog entry whose risk is at
//! least the body's. Promotion executes nothing.

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use super::validate::{program_argument, validation_of};
use super::{Context, OpError, request_error, storage_error};
use crate::invocation::promotion::{PromotedProgram, baseline, program_ref};
use crate::tenancy::LanguageSlot;
use pilotage_engine::catalog::StoredEntry;
use pilotage_protocol::catalog::CatalogEntry;
use pilotage_protocol::request_error::RequestErrorKind;
use pilotage_protocol::risk::aggregate;
use pilotage_store::PromotedRow;

/// A successful promotion.
#[derive(Debug, Serialize)]
pub(crate) struct Promoted {
    /// The reference `execute` takes.
    pub program_ref: String,
    /// The published catalog entry.
    pub entry: CatalogEntry,
    /// The caller's catalog version after publication.
    pub catalog_version: String,
}

/// Serves a promote tool. An invalid program is answered with its
/// validation response (`valid: false`), as a result, not an error.
///
/// # Errors
/// A structural fault without the program or with a non-object
/// `input_schema`; `invalid_request` when `input_schema` is not a JSON
/// Schema; validation's `bounds_exceeded`/`internal`.
pub(crate) async fn promote(context: &Context, slot: &Arc<LanguageSlot>, args: &Value) -> Result<Value, OpError> {
    let program = program_argument(slot, args)?.clone();
    let input_schema = match args.get("input_schema") {
        None => serde_json::json!({"type": "object"}),
        Some(schema @ Value::Object(_)) => schema.clone(),
        Some(_) => {
            return Err(OpError::Structural(
                "invalid arguments: 'input_schema' must be an object (a JSON Schema)".into(),
            ));
        }
    };
    if jsonschema::validator_for(&input_schema).is_err() {
        return Err(request_error(RequestErrorKind::InvalidRequest, "'input_schema' is not a valid JSON Schema"));
    }
    let text = |name: &str| args.get(name).and_then(Value::as_str).map(str::to_owned);
    let language = slot.entry.name.clone();
    let snapshot = context.tenant.snapshot(&context.caller.principal, &language);
    let result = validation_of(context, slot, &program, None, &snapshot).await?;
    if !result.response.valid {
        return Ok(serde_json::to_value(&result.response).unwrap_or(Value::Null));
    }
    let mut references = result.references.clone();
    if let Some(plan) = &result.plan {
        for call in plan.calls() {
            if !references.iter().any(|id| id == call) {
                references.push(call.to_owned());
            }
        }
    }
    let (risk, risk_hints) = match &result.plan {
        Some(plan) => (plan.max_risk.clone(), plan.max_risk_hints),
        None => {
            let hints = aggregate(references.iter().filter_map(|id| snapshot.get(id)).map(|entry| entry.risk_hints));
            (if hints.read_only { "safe".into() } else { "write".into() }, hints)
        }
    };
    let baseline = baseline(&snapshot, &references);
    let reference = program_ref(&language, &program, &input_schema, &baseline);
    let mut visibility: Vec<String> = references
        .iter()
        .filter_map(|id| snapshot.get_stored(id))
        .flat_map(|stored| stored.visibility.clone())
        .collect();
    visibility.sort();
    visibility.dedup();
    let entry = CatalogEntry {
        id: reference.clone(),
        kind: slot.promoted_kind(),
        name: text("name").unwrap_or_else(|| format!("Promoted {language} program {reference}")),
        description: text("description"),
        input_schema: Some(input_schema),
        output_schema: None,
        risk,
        risk_hints,
        tags: vec!["promoted".to_owned()],
        languages: Some(vec![language.clone()]),
        revision: None,
    };
    let promoted = PromotedProgram {
        program_ref: reference.clone(),
        language: language.clone(),
        body: program,
        baseline,
        entry: entry.clone(),
        promoter: context.caller.principal.subject.clone(),
    };
    let row = PromotedRow {
        tenant: context.tenant.id.clone(),
        program_ref: reference.clone(),
        language: language.clone(),
        entry: serde_json::to_string(&StoredEntry::new(entry.clone(), visibility.clone(), None)).unwrap_or_default(),
        body: serde_json::to_string(&promoted.body).unwrap_or_default(),
        baseline: serde_json::to_string(&promoted.baseline).unwrap_or_default(),
        promoter: promoted.promoter.clone(),
        created_at: context.platform.clock().now_ms(),
    };
    context.platform.store().promoted_insert(&row).await.map_err(|error| storage_error(&error, "promotion"))?;
    if context.tenant.promoted(&reference).is_none() {
        context.tenant.add_promoted(promoted);
        context.tenant.put_entries(vec![StoredEntry::new(entry.clone(), visibility, None)]);
        let change =
            crate::changes::Change::Promoted { tenant: context.tenant.id.clone(), program_ref: reference.clone() };
        crate::changes::announce(&context.platform, vec![change]).await;
    }
    let catalog_version = context.tenant.snapshot(&context.caller.principal, &language).catalog_version().to_owned();
    Ok(serde_json::to_value(Promoted { program_ref: reference, entry, catalog_version }).unwrap_or(Value::Null))
}
