//! `lookup` (Part II §6.3, Part III §4.2): `list`, `get` and
//! `changed_since` over the caller's visible catalog.

use serde::Deserialize;
use serde_json::Value;

use super::{Context, OpError, arguments, members_outside, request_error};
use pilotage_engine::catalog::lookup::{ListQuery, list};
use pilotage_protocol::capabilities::{Capability, SubFeature};
use pilotage_protocol::catalog::{CatalogChangedResult, CatalogGetResult};
use pilotage_protocol::request_error::{RequestError, RequestErrorKind};

/// `pilotage_catalog` arguments.
#[derive(Debug, Deserialize)]
struct CatalogArguments {
    language: String,
    verb: String,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    tag: Option<String>,
    #[serde(default)]
    q: Option<String>,
    #[serde(default)]
    cursor: Option<String>,
    #[serde(default)]
    limit: Option<u64>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    catalog_version: Option<String>,
}

/// The message of a failed `get`: the same for a missing and an invisible
/// entry (Part II §10.3).
pub const UNKNOWN_ENTRY: &str = "unknown catalog entry: list the catalog to see the entries you can use";

/// Serves `pilotage_catalog`.
///
/// # Errors
/// A structural fault for a verb outside the schema's enum or a `limit`
/// below 1; `not_found` for an unknown Language or entry (with
/// `catalog_version` beside it); `invalid_request` for a member not
/// applicable to the verb, or a verb or filter needing an undeclared
/// sub-feature; `unknown_baseline` when `changed_since` cannot be computed.
pub fn catalog(context: &Context, raw: &Value) -> Result<Value, OpError> {
    let args: CatalogArguments = arguments(raw)?;
    if args.limit == Some(0) {
        return Err(OpError::Structural("invalid arguments: limit must be at least 1".into()));
    }
    let slot = context.language(&args.language)?;
    let map = slot.entry.effective_capabilities(&context.tenant.manifest().manifest);
    let declares = |capability| map.as_ref().is_some_and(|m| m.declares(capability));
    let declares_sub = |feature| map.as_ref().is_some_and(|m| m.declares_sub(feature));
    if !declares(Capability::Catalog) {
        return Err(request_error(
            RequestErrorKind::InvalidRequest,
            format!("{} declares no catalog: its programs reference no live names", args.language),
        ));
    }
    let applicable: &[&str] = match args.verb.as_str() {
        "list" => &["language", "verb", "kind", "tag", "q", "cursor", "limit"],
        "get" => &["language", "verb", "id"],
        "changed_since" => &["language", "verb", "catalog_version"],
        // `verb` is enumerated in the binding-defined schema: a value
        // outside it is a schema violation, carrier-level (Part III §7.1).
        other => {
            return Err(OpError::Structural(format!(
                "invalid arguments: unknown verb '{other}'; verbs: list, get, changed_since"
            )));
        }
    };
    let outside = members_outside(raw, applicable);
    if !outside.is_empty() {
        return Err(request_error(
            RequestErrorKind::InvalidRequest,
            format!(
                "'{}' does not apply to verb '{}' (it takes: {})",
                outside.join("', '"),
                args.verb,
                applicable[2..].join(", ")
            ),
        ));
    }
    let snapshot = context.tenant.snapshot(&context.caller.principal, &args.language);
    match args.verb.as_str() {
        "list" => {
            if args.q.is_some() && !declares_sub(SubFeature::Search) {
                return Err(request_error(
                    RequestErrorKind::InvalidRequest,
                    "'q' needs catalog.search, which is not declared: list with kind or tag instead",
                ));
            }
            let query = ListQuery {
                kind: args.kind.as_deref(),
                tag: args.tag.as_deref(),
                q: args.q.as_deref(),
                cursor: args.cursor.as_deref(),
                limit: args.limit.map(|l| l as usize),
            };
            let page = list(&snapshot, &query).map_err(|error| {
                OpError::Request(RequestError::new(RequestErrorKind::InvalidRequest, error.to_string()))
            })?;
            Ok(serde_json::to_value(page).unwrap_or(Value::Null))
        }
        "get" => {
            let Some(id) = args.id else {
                return Err(request_error(RequestErrorKind::InvalidRequest, "verb 'get' needs 'id'"));
            };
            match snapshot.get(&id) {
                Some(entry) => Ok(serde_json::to_value(CatalogGetResult {
                    entry: entry.clone(),
                    catalog_version: snapshot.catalog_version().to_owned(),
                })
                .unwrap_or(Value::Null)),
                None => Err(OpError::Request(
                    RequestError::new(RequestErrorKind::NotFound, UNKNOWN_ENTRY)
                        .with_catalog_version(snapshot.catalog_version()),
                )),
            }
        }
        _ => {
            if !declares_sub(SubFeature::ChangedSince) {
                return Err(request_error(
                    RequestErrorKind::InvalidRequest,
                    "verb 'changed_since' needs catalog.changed_since, which is not declared: use verb 'list' instead",
                ));
            }
            let Some(baseline) = args.catalog_version else {
                return Err(request_error(
                    RequestErrorKind::InvalidRequest,
                    "verb 'changed_since' needs 'catalog_version'",
                ));
            };
            let principal = &context.caller.principal;
            let current = snapshot.catalog_version().to_owned();
            let changes = context
                .tenant
                .with_catalog(|catalog| catalog.changed_since(&principal.scopes, &args.language, &baseline));
            match changes {
                Some(changes) => Ok(serde_json::to_value(CatalogChangedResult { catalog_version: current, changes })
                    .unwrap_or(Value::Null)),
                None => Err(request_error(
                    RequestErrorKind::UnknownBaseline,
                    "this catalog_version is not a baseline the server can compute changes from; list the catalog again",
                )),
            }
        }
    }
}
