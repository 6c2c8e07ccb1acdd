//! What every operation works with ([`Context`]: the platform, the caller
//! and the caller's tenant) and how it fails ([`OpError`]: a request error
//! of Part III §7.2, or a structural fault the binding reports as a carrier
//! error, §7.1).

use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::tenancy::{LanguageSlot, Platform, Principal, Tenant};
use pilotage_engine::Component;
use pilotage_engine::admission::{Permit, Pool, Refused};
use pilotage_protocol::request_error::{RequestError, RequestErrorKind};

/// Why an operation produced no ordinary result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpError {
    /// A request error (`isError: true`, Part III §7.2).
    Request(RequestError),
    /// A structural fault: a missing required member or a wrong JSON type
    /// (a JSON-RPC -32602, Part III §7.1).
    Structural(String),
}

impl From<RequestError> for OpError {
    fn from(error: RequestError) -> Self {
        OpError::Request(error)
    }
}

/// A request error of `kind`.
pub fn request_error(kind: RequestErrorKind, message: impl Into<String>) -> OpError {
    OpError::Request(RequestError::new(kind, message))
}

/// The retry hint, in milliseconds, of a call refused because a pool was
/// full where admission could not see it coming (a sub-Run, a call outside
/// admission).
pub(crate) const CAPACITY_RETRY_MS: u64 = 1_000;

/// The request error of a call the node's admission refused: retryable,
/// `bounds_exceeded` with `retry_after_ms` (Part II §10.1: validation's
/// resource bounds are request errors; nothing ran).
pub(crate) fn capacity_error(refused: &Refused) -> OpError {
    OpError::Request(
        RequestError::new(RequestErrorKind::BoundsExceeded, refused.to_string())
            .with_retry_after(refused.retry_after_ms),
    )
}

/// The retry hint, in milliseconds, of a call refused because the
/// store's database could not be reached.
pub(crate) const STORAGE_RETRY_MS: u64 = 2_000;

/// The request error of a call whose store read or write failed before
/// anything ran, logged with `during`: when the database could not be
/// reached ([`pilotage_store::StoreError::is_unreachable`]), `internal` with
/// `retry_after_ms` and a message saying nothing ran, so a client knows a
/// retry is safe and when to try; any other failure, plain `internal`.
pub(crate) fn storage_error(error: &pilotage_store::StoreError, during: &str) -> OpError {
    if error.is_unreachable() {
        tracing::warn!(%error, during, "the store's database is unreachable: the call was refused as retryable");
        return OpError::Request(
            RequestError::new(
                RequestErrorKind::Internal,
                "the server's storage is unreachable for the moment; nothing ran; retry shortly",
            )
            .with_retry_after(STORAGE_RETRY_MS),
        );
    }
    tracing::error!(%error, during, "store failure");
    request_error(RequestErrorKind::Internal, "the server's storage failed; the failure was logged")
}

/// The caller of one operation.
#[derive(Clone, Debug)]
pub struct Caller {
    /// Who.
    pub principal: Principal,
    /// The MCP session the call arrived on, if any.
    pub session_id: Option<String>,
    /// The address the request came from (the connection's peer), when it
    /// came over the network: what an approval request records.
    pub address: Option<String>,
}

/// What every operation works with: the platform, the caller's tenant.
#[derive(Clone, Debug)]
pub struct Context {
    /// The platform.
    pub platform: Platform,
    /// The caller.
    pub caller: Caller,
    /// The caller's tenant.
    pub tenant: Arc<Tenant>,
}

impl Context {
    /// A place in the node's `pool` for one call of `component` by this
    /// tenant, after its fair turn (`pilotage_engine::admission`).
    ///
    /// # Errors
    /// A retryable `bounds_exceeded` ([`capacity_error`]) when the queue
    /// is full or no place freed in time.
    pub(crate) async fn admit(&self, pool: Pool, component: &Component) -> Result<Permit, OpError> {
        self.platform
            .engine()
            .admission()
            .admit(pool, &self.tenant.id, component.need())
            .await
            .map_err(|refused| capacity_error(&refused))
    }

    /// A Language of the caller's tenant, or `not_found` naming the
    /// Languages there are (Part IV §9: name the choices when few).
    ///
    /// # Errors
    /// `not_found` when the tenant has no such Language.
    pub fn language(&self, name: &str) -> Result<Arc<LanguageSlot>, OpError> {
        self.tenant.language(name).ok_or_else(|| {
            let names: Vec<String> = self.tenant.languages().iter().map(|slot| slot.entry.name.clone()).collect();
            request_error(
                RequestErrorKind::NotFound,
                format!("unknown language '{name}'; languages here: {}", names.join(", ")),
            )
        })
    }
}

/// Parses tool arguments into `T`. A missing required member or a member
/// of the wrong JSON type is structural (Part III §7.1).
///
/// # Errors
/// [`OpError::Structural`] with serde's message.
pub fn arguments<T: DeserializeOwned>(arguments: &Value) -> Result<T, OpError> {
    // Read through the reference: members `T` ignores (an execute's whole
    // program) are skipped, not copied.
    T::deserialize(arguments).map_err(|error| OpError::Structural(format!("invalid arguments: {error}")))
}

/// Members present in `arguments` other than `allowed`.
pub fn members_outside(arguments: &Value, allowed: &[&str]) -> Vec<String> {
    arguments
        .as_object()
        .map(|map| map.keys().filter(|key| !allowed.contains(&key.as_str())).cloned().collect())
        .unwrap_or_default()
}
