//! Pilotage Platform: a multi-tenant MCP server implementing the Pilotage
//! extension (`io.github.jafarsa0/pilotage`, version 1.1), hosting each
//! Language as a WebAssembly component.
//!
//! The platform owns the protocol; the component owns the language.
//! Dependencies point one way: [`protocol`] (pure types and rules) ←
//! [`catalog`], [`engine`], [`language`] (domain) ← the edges.
//!
//! - [`protocol`]: every Pilotage shape and rule, no IO;
//! - [`catalog`]: visible snapshots and `catalog_version`;
//! - [`engine`]: wasmtime, bounds, the compiled-code cache, host imports;
//! - [`language`]: descriptions, the lint, validation and execution with
//!   the host's guarantees;
//! - [`language_watch`]: Language files served for the demo tenant and
//!   reloaded when they change (`pilotage serve --language`);
//! - [`run`]: invoking catalog entries over HTTP;
//! - [`fleet`]: replicas on one PostgreSQL: changes announced and
//!   followed, MCP sessions any replica restores;
//! - [`demo_world`]: the demo capability service;
//! - [`bundled`]: the Languages shipped inside the binary;
//! - [`telemetry`]: Prometheus metrics, OpenTelemetry traces over OTLP,
//!   and logs that carry the trace id.
//!
//! ```no_run
//! use pilotage_platform::engine::{Bounds, Engine};
//! let engine = Engine::new(Bounds::default(), None).unwrap();
//! let workflow = engine.load(pilotage_platform::bundled::WORKFLOW).unwrap();
//! assert_eq!(workflow.description().name, "workflow/v1");
//! ```
#![deny(unsafe_code)]

/// Installs the process-wide TLS crypto provider (ring) used by every
/// HTTP client of the platform. Idempotent; call before building a client.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

pub mod admin;
pub mod auth;
pub mod bundled;
pub mod catalog;
pub mod client;
pub mod config;
pub mod conformance;
pub mod datasource;
pub mod demo;
pub mod demo_world;
pub mod deploy;
pub mod engine;
pub mod fleet;
pub mod http;
pub mod language;
pub mod language_watch;
pub mod mcp;
pub mod operations;
pub use pilotage_protocol as protocol;
pub mod run;
pub mod secrets;
pub mod server;
pub mod service;
pub mod store;
pub mod telemetry;
