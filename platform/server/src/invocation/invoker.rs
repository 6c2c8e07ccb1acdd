//! Invoking callable catalog entries bound to HTTP endpoints: `POST` the
//! input as JSON, read JSON back, within a timeout and a size cap, through
//! the tenant's confined client (`crate::egress`: every address the
//! endpoint resolves to, and every redirect, is checked).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::egress::{Confinement, DestinationRefused};
use pilotage_engine::catalog::HttpBinding;
use pilotage_engine::effects::{InvokeError, Invoker};
use pilotage_protocol::catalog::CatalogEntry;

/// Invokes entries over HTTP, on the runtime's workers: a Run waiting on
/// the answer is a suspended task.
pub(crate) struct HttpInvoker {
    egress: Confinement,
    bindings: Arc<BTreeMap<String, HttpBinding>>,
    max_timeout: Duration,
    max_bytes: u64,
}

impl HttpInvoker {
    /// An invoker for `bindings` (entry id → binding), confined by the
    /// tenant's `egress`.
    pub(crate) fn new(
        egress: Confinement,
        bindings: Arc<BTreeMap<String, HttpBinding>>,
        max_timeout: Duration,
        max_bytes: u64,
    ) -> HttpInvoker {
        HttpInvoker { egress, bindings, max_timeout, max_bytes }
    }

    /// Invokes the endpoint of `binding` with `input`.
    ///
    /// # Errors
    /// [`InvokeError::Failed`] when the endpoint fails, times out, answers
    /// a non-2xx status, or answers something too large or not JSON.
    pub(crate) async fn invoke_binding(&self, binding: &HttpBinding, input: &Value) -> Result<Value, InvokeError> {
        self.invoke_with_headers(binding, input, &binding.headers).await
    }

    /// Like [`HttpInvoker::invoke_binding`], with the headers already
    /// resolved (secrets substituted).
    ///
    /// # Errors
    /// As [`HttpInvoker::invoke_binding`].
    pub(crate) async fn invoke_with_headers(
        &self,
        binding: &HttpBinding,
        input: &Value,
        headers: &BTreeMap<String, String>,
    ) -> Result<Value, InvokeError> {
        self.call(binding, input, headers).await.map_err(InvokeError::Failed)
    }

    /// The call itself; its failure is the message the Run records.
    async fn call(
        &self,
        binding: &HttpBinding,
        input: &Value,
        headers: &BTreeMap<String, String>,
    ) -> Result<Value, String> {
        let timeout =
            binding.timeout_ms.map(Duration::from_millis).map_or(self.max_timeout, |t| t.min(self.max_timeout));
        // A name is checked by the client's resolver when it connects; a
        // literal address never reaches the resolver.
        if let Ok(url) = reqwest::Url::parse(&binding.url) {
            self.egress.check_literal(&url).map_err(|refused| refused.to_string())?;
        }
        let client = self.egress.http().map_err(|refused| refused.to_string())?;
        let mut request = client.post(&binding.url).json(input).timeout(timeout);
        for (name, value) in headers {
            request = request.header(name.as_str(), value.as_str());
        }
        let response = request.send().await.map_err(|error| {
            if error.is_timeout() {
                format!("no answer within {} ms", timeout.as_millis())
            } else if let Some(refused) = refusal(&error) {
                refused.to_string()
            } else {
                format!("the service is unreachable: {error}")
            }
        })?;
        let status = response.status();
        let mut body = Vec::new();
        let mut response = response;
        while let Some(chunk) = response.chunk().await.map_err(|error| format!("reading the answer failed: {error}"))? {
            body.extend_from_slice(&chunk);
            if body.len() as u64 > self.max_bytes {
                return Err(format!("the answer is larger than {} bytes", self.max_bytes));
            }
        }
        if !status.is_success() {
            let text = String::from_utf8_lossy(&body);
            let snippet: String = text.chars().take(300).collect();
            return Err(format!("HTTP {}: {snippet}", status.as_u16()));
        }
        serde_json::from_slice(&body).map_err(|error| format!("the answer is not JSON: {error}"))
    }
}

/// The confinement's refusal inside a reqwest error (from the resolver or
/// the redirect policy), if that is what failed.
fn refusal(error: &reqwest::Error) -> Option<&DestinationRefused> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = source {
        if let Some(refused) = current.downcast_ref::<DestinationRefused>() {
            return Some(refused);
        }
        source = current.source();
    }
    None
}

#[async_trait::async_trait]
impl Invoker for HttpInvoker {
    async fn invoke(&self, entry: &CatalogEntry, input: &Value) -> Result<Value, InvokeError> {
        let Some(binding) = self.bindings.get(&entry.id) else {
            return Err(InvokeError::Unavailable(format!("'{}' has no HTTP binding", entry.id)));
        };
        self.invoke_binding(binding, input).await
    }
}
