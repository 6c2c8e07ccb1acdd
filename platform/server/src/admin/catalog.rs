//! `/admin/v1/tenants/{tenant}/catalog`: operator catalog entries one by
//! one and in bulk (`apply` makes the catalog exactly a file's entries);
//! entries a data source owns are not the operator's to change.

use std::sync::Arc;

use axum::Extension;
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::Deserialize;
use serde_json::{Value, json};

use super::admission::AdminBody;
use super::api::{Admin, AdminState, ApiError, ApiResult, audit, live_tenant, parse_json};
use crate::changes::{Change, announce};
use crate::tenancy::Tenant;
use pilotage_engine::catalog::tenant::ApplyReport;
use pilotage_engine::catalog::{HttpBinding, StoredEntry};
use pilotage_protocol::catalog::CatalogEntry;

/// A catalog entry as the admin API takes it: the protocol entry, plus
/// `visibility` scopes and an HTTP `binding`.
#[derive(Debug, Deserialize)]
pub(crate) struct EntryInput {
    /// The entry.
    #[serde(flatten)]
    pub entry: CatalogEntry,
    /// Scopes a caller must hold to see it.
    #[serde(default)]
    pub visibility: Vec<String>,
    /// Where a callable entry is served.
    #[serde(default)]
    pub binding: Option<HttpBinding>,
}

pub(super) fn check_entry(input: &EntryInput, field: &str) -> Result<(), ApiError> {
    let entry = &input.entry;
    if entry.id.is_empty() || entry.id.len() > 200 {
        return Err(ApiError::field(&format!("{field}.id"), "1 to 200 characters"));
    }
    if let Some(problem) = entry.risk_hints.inconsistency_with(&entry.risk) {
        return Err(ApiError::field(&format!("{field}.risk"), problem));
    }
    for (name, schema) in [("input_schema", &entry.input_schema), ("output_schema", &entry.output_schema)] {
        if let Some(schema) = schema
            && !schema.is_null()
            && (!schema.is_object() || jsonschema::validator_for(schema).is_err())
        {
            return Err(ApiError::field(&format!("{field}.{name}"), "not a JSON Schema object"));
        }
    }
    if let Some(binding) = &input.binding {
        match reqwest::Url::parse(&binding.url) {
            Ok(url) if url.scheme() == "http" || url.scheme() == "https" => {}
            _ => return Err(ApiError::field(&format!("{field}.binding.url"), "an http or https URL")),
        }
    }
    Ok(())
}

/// Refuses a binding whose URL the tenant's egress confinement refuses
/// (403 `destination_refused` at `{field}.binding.url`); run after
/// [`check_entry`], which made sure the URL parses.
pub(super) async fn check_destination(tenant: &Tenant, input: &EntryInput, field: &str) -> Result<(), ApiError> {
    if let Some(binding) = &input.binding
        && let Ok(url) = reqwest::Url::parse(&binding.url)
    {
        tenant
            .egress()
            .check_url(&url)
            .await
            .map_err(|refused| ApiError::refused(&format!("{field}.binding.url"), &refused))?;
    }
    Ok(())
}

/// Refuses to change an entry a data source owns (409): it comes from the
/// database and the next refresh would undo the change.
pub(super) fn owned_by_operator(tenant: &Tenant, id: &str) -> Result<(), ApiError> {
    if tenant.entry_from_data_source(id) {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "owned_by_data_source",
            format!("'{id}' comes from a data source; change the database or the data source instead"),
        ));
    }
    Ok(())
}

pub(super) async fn persist(state: &AdminState, tenant: &str, stored: &[StoredEntry]) -> Result<(), ApiError> {
    let rows: Vec<(String, String)> =
        stored.iter().map(|s| (s.entry.id.clone(), serde_json::to_string(s).unwrap_or_default())).collect();
    state.platform.store().catalog_put(tenant, &rows, state.platform.clock().now_ms()).await?;
    Ok(())
}

pub(super) fn entry_json(stored: &StoredEntry) -> Value {
    let mut value = serde_json::to_value(&stored.entry).unwrap_or_default();
    value["visibility"] = json!(stored.visibility);
    if let Some(binding) = &stored.binding {
        value["binding"] = serde_json::to_value(binding).unwrap_or_default();
    }
    value
}

pub(super) async fn catalog_put(
    State(state): State<AdminState>,
    Extension(admin): Extension<Admin>,
    Path((tenant, id)): Path<(String, String)>,
    AdminBody(body): AdminBody,
) -> ApiResult {
    admin.may(&tenant)?;
    let live = live_tenant(&state, &tenant).await?;
    let input: EntryInput = parse_json(&body)?;
    if input.entry.id != id {
        return Err(ApiError::field("id", format!("the body's id '{}' is not the path's '{id}'", input.entry.id)));
    }
    check_entry(&input, "entry")?;
    check_destination(&live, &input, "entry").await?;
    owned_by_operator(&live, &id)?;
    let stored = StoredEntry::new(input.entry, input.visibility, input.binding);
    persist(&state, &tenant, std::slice::from_ref(&stored)).await?;
    let report = live.with_catalog(|catalog| catalog.apply(vec![stored.clone()], &[]));
    announce(&state.platform, vec![Change::CatalogEntry { tenant: tenant.clone(), id: id.clone() }]).await;
    audit(&state, &admin, "catalog.put", &format!("{tenant}/{id}"), json!(report)).await;
    let status = if report.added.is_empty() { StatusCode::OK } else { StatusCode::CREATED };
    Ok((status, Json(entry_json(&stored))).into_response())
}

pub(super) async fn catalog_get(
    State(state): State<AdminState>,
    Extension(admin): Extension<Admin>,
    Path((tenant, id)): Path<(String, String)>,
) -> ApiResult {
    admin.may(&tenant)?;
    let live = live_tenant(&state, &tenant).await?;
    let stored =
        live.with_catalog(|c| c.stored(&id).cloned()).ok_or_else(|| ApiError::not_found(format!("no entry '{id}'")))?;
    Ok(Json(entry_json(&stored)).into_response())
}

#[derive(Debug, Deserialize)]
pub(super) struct ListQuery {
    #[serde(default)]
    after: Option<String>,
    #[serde(default)]
    limit: Option<usize>,
}

pub(super) async fn catalog_list(
    State(state): State<AdminState>,
    Extension(admin): Extension<Admin>,
    Path(tenant): Path<String>,
    Query(query): Query<ListQuery>,
) -> ApiResult {
    admin.may(&tenant)?;
    let live = live_tenant(&state, &tenant).await?;
    let limit = query.limit.unwrap_or(100).clamp(1, 1000);
    let (items, next): (Vec<Value>, Option<String>) = live.with_catalog(|catalog| {
        let mut items: Vec<&Arc<StoredEntry>> = catalog
            .all()
            .filter(|s| query.after.as_deref().is_none_or(|after| s.entry.id.as_str() > after))
            .take(limit + 1)
            .collect();
        let next = (items.len() > limit).then(|| items[limit - 1].entry.id.clone());
        items.truncate(limit);
        (items.iter().map(|s| entry_json(s)).collect(), next)
    });
    Ok(Json(json!({"entries": items, "next_after": next})).into_response())
}

pub(super) async fn catalog_delete(
    State(state): State<AdminState>,
    Extension(admin): Extension<Admin>,
    Path((tenant, id)): Path<(String, String)>,
) -> ApiResult {
    admin.may(&tenant)?;
    let live = live_tenant(&state, &tenant).await?;
    owned_by_operator(&live, &id)?;
    state.platform.store().catalog_delete(&tenant, std::slice::from_ref(&id)).await?;
    let report = live.with_catalog(|catalog| catalog.apply(Vec::new(), std::slice::from_ref(&id)));
    if report.removed.is_empty() {
        return Err(ApiError::not_found(format!("no entry '{id}'")));
    }
    announce(&state.platform, vec![Change::CatalogEntry { tenant: tenant.clone(), id: id.clone() }]).await;
    audit(&state, &admin, "catalog.delete", &format!("{tenant}/{id}"), json!({})).await;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `POST …/catalog/apply` body: the whole catalog; entries not listed are
/// removed.
#[derive(Debug, Deserialize)]
pub(super) struct ApplyBody {
    /// Every entry the catalog must hold.
    pub entries: Vec<EntryInput>,
}

pub(super) async fn catalog_apply(
    State(state): State<AdminState>,
    Extension(admin): Extension<Admin>,
    Path(tenant): Path<String>,
    AdminBody(body): AdminBody,
) -> ApiResult {
    admin.may(&tenant)?;
    let live = live_tenant(&state, &tenant).await?;
    let request: ApplyBody = parse_json(&body)?;
    let mut seen = std::collections::BTreeSet::new();
    let mut stored = Vec::new();
    for (index, input) in request.entries.into_iter().enumerate() {
        check_entry(&input, &format!("entries[{index}]"))?;
        check_destination(&live, &input, &format!("entries[{index}]")).await?;
        if !seen.insert(input.entry.id.clone()) {
            return Err(ApiError::field(
                &format!("entries[{index}].id"),
                format!("'{}' appears twice", input.entry.id),
            ));
        }
        owned_by_operator(&live, &input.entry.id).map_err(|error| error.at(&format!("entries[{index}].id")))?;
        stored.push(StoredEntry::new(input.entry, input.visibility, input.binding));
    }
    // Entries of data sources are theirs: a bulk apply leaves them alone.
    let (report, rebound): (ApplyReport, Vec<String>) = live.with_catalog(|catalog| {
        let remove: Vec<String> = catalog
            .all()
            .map(|s| s.entry.id.clone())
            .filter(|id| !seen.contains(id) && !live.entry_from_data_source(id))
            .collect();
        // An entry whose binding alone changed is not in the report (its
        // content is the same) but is still a change for the other replicas.
        let rebound = stored
            .iter()
            .filter(|new| catalog.stored(&new.entry.id).is_some_and(|old| old.binding != new.binding))
            .map(|new| new.entry.id.clone())
            .collect();
        (catalog.apply(stored.clone(), &remove), rebound)
    });
    persist(&state, &tenant, &stored).await?;
    state.platform.store().catalog_delete(&tenant, &report.removed).await?;
    let changed: std::collections::BTreeSet<&String> =
        report.added.iter().chain(&report.modified).chain(&report.removed).chain(&rebound).collect();
    let changes =
        changed.into_iter().map(|id| Change::CatalogEntry { tenant: tenant.clone(), id: id.clone() }).collect();
    announce(&state.platform, changes).await;
    audit(&state, &admin, "catalog.apply", &tenant, json!(report)).await;
    Ok(Json(json!(report)).into_response())
}
