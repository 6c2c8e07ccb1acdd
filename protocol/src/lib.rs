//! The Pilotage protocol model: serde types for every shape of the
//! specification and the pure rules over them. No IO lives here, and the
//! crate depends on nothing of the platform: the engine, the client and the
//! server build on it, and the fuzz targets of its deserializers build without
//! the WebAssembly runtime.
//!
//! Each module is one spec concept:
//!
//! - [`manifest`]: the manifest and Language entries (Part II §5.1);
//! - [`capabilities`]: capability declarations, the effective capability map
//!   and the rules of Part II §4.3;
//! - [`guide`]: guides and the learn results (Part II §5.2, Part III §4.1);
//! - [`risk`]: risk hints and their aggregation (Part II §5.3);
//! - [`catalog`]: catalog entries and the lookup results (Part II §5.4, §6.3);
//! - [`diagnostic`]: diagnostics, locators and the validity rule (Part II §5.5);
//! - [`plan`]: plans and plan steps (Part II §5.6);
//! - [`outcome`]: outcomes and the reserved statuses (Part II §5.7);
//! - [`trace`]: traces, trace levels and decisions (Part II §5.8, §5.8.1);
//! - [`trace_identity`]: iteration and expansion ids (Part II §5.8.2);
//! - [`correspondence`]: the plan–trace correspondence checker (Part II §5.8.4);
//! - [`requests`]: validate, execute and trace-fetch requests and responses
//!   (Part II §6.4–§6.6);
//! - [`request_error`]: the request-error shape and its closed kinds
//!   (Part III §7.2);
//! - [`retention`]: retention values and ISO 8601 durations (Part II §6.6);
//! - [`assertions`]: the platform's `x-assertions` extension of execute,
//!   its report and verdicts (docs/assertions.md);
//! - [`jsonrpc`]: the JSON-RPC 2.0 message rules of the MCP edge: one body
//!   classified as an accepted message or its JSON-RPC error (Part III §7.1).
//!
//! How they connect: a [`manifest::Manifest`] lists Languages and their
//! [`capabilities`]; a validation ([`requests::ValidateResponse`]) yields
//! [`diagnostic`]s and a [`plan::Plan`] whose steps carry
//! [`risk::RiskHints`]; an execution yields an [`outcome::Outcome`] and a
//! [`trace::Trace`] that [`correspondence`] checks against the plan; every
//! refusal is a [`request_error::RequestError`].
//!
//! Receivers ignore unknown members (Part II §1.2): no type here denies
//! unknown fields. Where Part II §1.3 gives a client-side fallback for an
//! unrecognized enumerated value, the type's `Deserialize` applies it.
//!
//! ```
//! use pilotage_protocol::risk::{RiskHints, aggregate};
//! let max = aggregate([RiskHints::SAFE, RiskHints::DESTRUCTIVE]);
//! assert!(max.destructive && !max.read_only);
//! ```
#![forbid(unsafe_code)]

pub mod assertions;
pub mod capabilities;
pub mod catalog;
pub mod correspondence;
pub mod diagnostic;
pub mod guide;
pub mod jsonrpc;
pub mod manifest;
pub mod outcome;
pub mod plan;
pub mod request_error;
pub mod requests;
pub mod resources;
pub mod retention;
pub mod risk;
pub mod trace;
pub mod trace_identity;

/// The Pilotage extension identifier (Part III §1.1).
pub const EXTENSION_ID: &str = "io.github.jafarsa0/pilotage";

/// The one Pilotage `_meta` key (Part III §2). Equal to [`EXTENSION_ID`].
pub const META_KEY: &str = EXTENSION_ID;

/// The extension version this implementation speaks (Part II §11.1).
pub const PILOTAGE_VERSION: &str = "1.1";

/// Fixed name of the manifest tool (Part III §3.1).
pub const MANIFEST_TOOL: &str = "pilotage_manifest";

/// Fixed name of the guide tool (Part III §4.1).
pub const GUIDE_TOOL: &str = "pilotage_get_guide";

/// Fixed name of the catalog tool (Part III §4.2).
pub const CATALOG_TOOL: &str = "pilotage_catalog";

/// Deserializes a member that is present as `Some(value)`, keeping an
/// explicit JSON `null` as `Some(Value::Null)`: for `input` and `output`,
/// a present null and an absent member mean different things.
///
/// For `#[serde(default, deserialize_with = "pilotage_protocol::present")]`
/// on an `Option<serde_json::Value>` member.
///
/// # Errors
///
/// Those of the deserializer when the member is not JSON.
pub fn present<'de, D>(deserializer: D) -> Result<Option<serde_json::Value>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    use serde::Deserialize;
    serde_json::Value::deserialize(deserializer).map(Some)
}
