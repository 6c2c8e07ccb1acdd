//! The conformance suite: the 54 vectors of the specification's
//! `conformance-vectors.json`, bound to a Language of a server through a
//! [`binding::Binding`], run through the real MCP endpoint, each result's
//! `structuredContent` validated against the named `$defs` of
//! `pilotage.schema.json`; and the completeness gate of Part IV §4.2.
//!
//! A vector whose `requires` are not declared, or whose setup the Language
//! cannot reach, is reported as skipped with its reason, never dropped.
//! Vectors needing an operator (a catalog change, another caller's Run, a
//! count of side effects) use an [`Operator`] when one is given; against an
//! external endpoint without one they are skipped, and say so.
//!
//! Errors: [`RunnerError`] when a vector (or the runner) cannot be carried
//! out at all, [`OperatorError`] when an operator action fails, and
//! [`binding::BindingError`] when a binding file cannot be read.

pub mod binding;
mod completeness;
mod operator;
mod runner;
mod vector_file;
mod vectors_discovery;
mod vectors_execute;
mod vectors_lookup;
mod vectors_trace;
mod vectors_validate;

pub use operator::{Operator, OperatorError, OperatorFuture};
pub use runner::{Runner, RunnerError, schema_errors};
pub use vector_file::{Vector, VectorFile, VectorResult, Verdict, summary};
