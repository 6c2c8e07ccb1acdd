//! Pilotage Platform engine: a Language component as the platform sees it,
//! run under wasmtime with the host's guarantees (Part II §5, §6.4–§6.5,
//! §10.1).
//!
//! - [`Engine`] (`runtime`): wasmtime with the component model, fuel,
//!   epoch interruption, a bounded wasm stack and two pooling allocators,
//!   one per pool of the node's [`capacity`] (validation calls, Runs);
//!   [`Component`]: one loaded Language, compiled or read from the
//!   compiled-code [`cache`], pre-instantiated and described; every
//!   [`Call`] gets a fresh instance with the [`bounds`] of its kind and
//!   runs on a fiber with wasmtime's async API, so a Run waiting on the
//!   world is a suspended task; a [`function_cache`] lets a rebuilt
//!   component reuse the compiled functions it shares with an earlier
//!   build;
//! - [`admission`]: the node's fair admission to both pools, a bounded
//!   queue and retryable refusals;
//! - [`host`]: the host side of the Language imports (`catalog`,
//!   `effects`, `sql`, `now`, `log`) and a WASI that grants nothing;
//!   [`wit`]: the generated bindings;
//! - [`description`]: what a component declared, as the manifest and the
//!   tools need it; [`lint`]: the conformance lint of a description;
//! - [`validation`] and [`execution`]: validate, bind input and execute
//!   with what the host enforces itself (validity from severities, risk
//!   aggregation, plan containment, plan–trace correspondence, the bounds,
//!   test runs free of side effects); [`installation`]: what a deploy-mode
//!   Run installs;
//! - [`catalog`]: a tenant's entries with visibility, the snapshot one call
//!   sees, list and search, `catalog_version`;
//! - [`clock`]: the one clock every reading of time goes through.
//!
//! Invariant: the engine knows nothing of HTTP, MCP or SQL. It reaches the
//! world only through the traits a caller passes in (`execution::Invoker`,
//! `execution::DataSource`), and every call into a component is bounded:
//! a trap ends the call, never the process.
//!
//! ```no_run
//! use pilotage_engine::{Bounds, Engine};
//! let engine = Engine::new(Bounds::default(), None).unwrap();
//! let bytes = std::fs::read("workflow.wasm").unwrap();
//! let workflow = engine.load(&bytes).unwrap();
//! assert_eq!(workflow.description().name, "workflow/v1");
//! // Calls are async; outside a runtime any executor drives them.
//! let catalog = pilotage_engine::catalog::CatalogSnapshot::default();
//! let program = pilotage_engine::validation::Program::from_argument(
//!     workflow.description().program_kind, &serde_json::json!({"steps": []}), 1 << 20, 64).unwrap();
//! let validated = futures::executor::block_on(
//!     pilotage_engine::validation::validate(&workflow, &program, None, &catalog)).unwrap();
//! println!("valid: {}", validated.response.valid);
//! ```
#![deny(unsafe_code)]

pub mod admission;
pub mod bounds;
pub mod cache;
pub mod capacity;
pub mod catalog;
pub mod clock;
pub mod description;
pub mod effects;
mod error;
pub mod execution;
pub mod function_cache;
pub mod host;
pub mod host_trace;
pub mod installation;
pub mod lint;
mod runtime;
pub mod validation;
pub mod wit;

pub use bounds::{Bounds, CallBounds};
pub use capacity::Capacity;
pub use clock::Clock;
pub use error::{CallError, EngineError};
pub use runtime::{Call, CallCost, CallKind, Component, Engine};
