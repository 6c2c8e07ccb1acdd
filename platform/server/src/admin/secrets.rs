//! `/admin/v1/tenants/{tenant}/secrets`: tenant secrets, sealed at rest
//! and never returned (names only), including the deployment runtime's
//! `webhook:<source>` and `mqtt:<broker>`.

use axum::Extension;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::Deserialize;
use serde_json::json;

use super::admission::AdminBody;
use super::api::{Admin, AdminState, ApiError, ApiResult, audit, live_tenant, parse_json};

/// `PUT …/secrets/{name}` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SecretBody {
    /// The secret's value; stored encrypted, never returned.
    pub value: String,
}

pub(super) async fn secrets_put(
    State(state): State<AdminState>,
    Extension(admin): Extension<Admin>,
    Path((tenant, name)): Path<(String, String)>,
    AdminBody(body): AdminBody,
) -> ApiResult {
    admin.may(&tenant)?;
    let live = live_tenant(&state, &tenant).await?;
    check_secret_name(&name)?;
    let request: SecretBody = parse_json(&body)?;
    if name.starts_with(crate::deploy::model::MQTT_SECRET_PREFIX) {
        let broker = crate::deploy::broker::BrokerSecret::parse(&request.value)
            .map_err(|e| ApiError::field("value", e.to_string()))?;
        let (host, port) = broker.address();
        live.egress().resolve(&host, port).await.map_err(|refused| ApiError::refused("value.url", &refused))?;
    }
    let (nonce, sealed) = state.platform.secrets().seal(&tenant, &name, &request.value);
    state.platform.store().secret_put(&tenant, &name, &nonce, &sealed, state.platform.clock().now_ms()).await?;
    audit(&state, &admin, "secret.put", &format!("{tenant}/{name}"), json!({})).await;
    Ok(Json(json!({"name": name})).into_response())
}

/// A secret's name: letters, digits, '_' and '-', or one of the
/// deployment runtime's prefixed names `webhook:<source>` (a webhook
/// source's signing key) and `mqtt:<broker>` (a broker's URL and
/// credentials, JSON) with such a name after the prefix. Other prefixed
/// names (`data-source:…`) belong to the platform and are never set here.
pub(super) fn check_secret_name(name: &str) -> Result<(), ApiError> {
    let plain = |text: &str| {
        !text.is_empty() && text.len() <= 128 && text.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    };
    let rest = name
        .strip_prefix(crate::deploy::model::WEBHOOK_SECRET_PREFIX)
        .or_else(|| name.strip_prefix(crate::deploy::model::MQTT_SECRET_PREFIX))
        .unwrap_or(name);
    if plain(rest) {
        Ok(())
    } else {
        Err(ApiError::field(
            "name",
            "letters, digits, '_' and '-', optionally after 'webhook:' (a webhook source's key) or 'mqtt:' (a broker)",
        ))
    }
}

pub(super) async fn secrets_list(
    State(state): State<AdminState>,
    Extension(admin): Extension<Admin>,
    Path(tenant): Path<String>,
) -> ApiResult {
    admin.may(&tenant)?;
    Ok(Json(json!({"secrets": state.platform.store().secret_names(&tenant).await?})).into_response())
}

pub(super) async fn secrets_delete(
    State(state): State<AdminState>,
    Extension(admin): Extension<Admin>,
    Path((tenant, name)): Path<(String, String)>,
) -> ApiResult {
    admin.may(&tenant)?;
    if !state.platform.store().secret_delete(&tenant, &name).await? {
        return Err(ApiError::not_found(format!("no secret '{name}'")));
    }
    audit(&state, &admin, "secret.delete", &format!("{tenant}/{name}"), json!({})).await;
    Ok(StatusCode::NO_CONTENT.into_response())
}
