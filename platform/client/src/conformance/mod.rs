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

pub mod binding;
mod runner;

pub use runner::{
    Operator, OperatorFuture, Runner, Vector, VectorFile, VectorResult, Verdict, schema_errors, summary,
};
