//! The Pilotage Platform server: a multi-tenant MCP service implementing
//! the Pilotage extension (`io.github.jafarsa0/pilotage`, version 1.1),
//! serving each tenant's Languages (WebAssembly components run by
//! `pilotage-engine`) over Streamable HTTP or stdio, with its state in
//! `pilotage-store`.
//!
//! - [`start`]: starting and stopping a server ([`start::start`],
//!   [`start::Server`]); [`settings`]: its one settings type;
//! - [`tenancy`]: the [`tenancy::Platform`] and its tenants, and the one
//!   place tenant state is loaded from the store;
//! - [`operations`]: the six Pilotage operations and promotion for one
//!   caller (Part II §6), knowing nothing of MCP; `invocation`: calling
//!   catalog entries over HTTP and promoted programs as sub-Runs;
//! - [`policy`]: a tenant's policy on risk (allow, approve, deny;
//!   approvals bound to the request; budgets);
//! - [`datasource`]: PostgreSQL data sources of SQL Languages;
//!   [`deploy`]: deployments (model, installation, publication, trigger
//!   runtime); `fleet`: replicas on one PostgreSQL (announce, follow,
//!   shared sessions);
//! - [`auth`]: bearer tokens to principals; [`mcp`]: the MCP binding (the
//!   only module that knows JSON-RPC and rmcp's handler); `http`: the
//!   HTTP edge (the only module that knows routes and listeners);
//!   `admin`: the operator API; [`telemetry`]: the OTLP export and logs;
//! - [`demo`]: the demo tenant and its capability service;
//!   [`language_watch`]: Language files served and reloaded for a
//!   Language author.
//!
//! Invariant: every request acts as one principal of one tenant, and
//! nothing it reaches (Languages, entries, runs, keys, deployments,
//! sessions) belongs to another tenant; the server never runs a component
//! but through the engine's bounds.
//!
//! ```no_run
//! # async fn example() -> Result<(), pilotage_server::start::StartError> {
//! use pilotage_server::settings::Settings;
//! let server = pilotage_server::start::start(Settings::default(), &[]).await?;
//! println!("MCP at {}", server.mcp_url());
//! server.stop().await;
//! # Ok(()) }
//! ```
#![deny(unsafe_code)]
#![warn(unreachable_pub)]

/// Installs the process-wide TLS crypto provider (ring) used by every
/// HTTP client of the server. Idempotent; call before building a client.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

mod admin;
pub mod auth;
mod changes;
pub(crate) mod console;
pub mod datasource;
pub mod demo;
pub mod deploy;
mod deployments;
pub mod egress;
mod fleet;
mod http;
mod invocation;
pub mod language_watch;
pub mod mcp;
pub mod operations;
mod origins;
pub mod policy;
pub mod settings;
pub mod start;
pub mod telemetry;
pub mod tenancy;
mod web;
