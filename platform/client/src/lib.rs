//! The reference Pilotage client and the conformance runner, for any
//! Pilotage server (Part II §7, §12.2; Part III §10.2; Part IV §4).
//!
//! - [`Connection`]: an MCP connection (rmcp over Streamable HTTP, or
//!   over stdio to a child process) that declares the extension and sorts
//!   every reply into its channel ([`Reply`]);
//! - [`PilotageClient`]: discovery (tool manifest over the inline one),
//!   guides (cached by server, Language and version), lookup, validate,
//!   execute, trace fetch, and [`PilotageClient::run`], the loop for one
//!   Run with drift recovery;
//! - [`gate`]: the Host risk gate and its approvers;
//! - [`conformance`]: the specification's vectors run against any endpoint
//!   through a binding file, and the completeness gate.
//!
//! Forward compatibility (Part II §1.3): unknown members are ignored,
//! unknown statuses with `ok: false` read as `partial`, unknown request
//! error kinds as `internal`, unknown guide levels as `reference`.
//!
//! Invariant: this crate speaks only the wire. It depends on the protocol
//! model and an MCP client, never on the platform's engine, store or
//! server (no wasmtime, no sqlx), so a server author can use the client and
//! the conformance suite alone.
//!
//! ```no_run
//! # async fn demo() -> Result<(), pilotage_client::ClientError> {
//! use pilotage_client::{Connection, PilotageClient, RunOptions, gate::Refuse};
//! let connection = Connection::http("http://127.0.0.1:8480/mcp", None).await?;
//! let mut client = PilotageClient::discover(connection).await?;
//! let program = serde_json::json!({"steps": []});
//! let report = client.run("workflow/v1", program, None, &RunOptions::default(), &Refuse).await?;
//! println!("{:?}", report.execution.map(|e| e.outcome));
//! # Ok(()) }
//! ```
#![deny(unsafe_code)]

mod client;
pub mod conformance;
mod connection;
pub mod gate;

pub use client::{KNOWN_STATUSES, PilotageClient, RunOptions, RunReport};
pub use connection::{ClientError, Connection, Reply};

/// Installs the process-wide TLS crypto provider (ring) the client's HTTP
/// connections use. Idempotent.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
