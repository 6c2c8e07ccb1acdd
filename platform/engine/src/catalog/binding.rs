//! Where a callable catalog entry is served: the HTTP binding an operator
//! gives an entry (the server's invoker calls it; Part II §6.5.4).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Where a callable entry is served.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HttpBinding {
    /// The endpoint; the entry's input is POSTed here as JSON.
    pub url: String,
    /// Timeout in milliseconds (capped by the platform's
    /// `invocation_timeout_ms`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Extra request headers; a value may reference tenant secrets as
    /// `{secret:NAME}`, resolved at call time and never stored in clear.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
}
