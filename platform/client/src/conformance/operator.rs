//! The [`Operator`]: server-side actions some conformance vectors need (a
//! catalog change, another caller's Run, a count of side effects), and the
//! [`OperatorError`] its actions fail with.

use std::future::Future;
use std::pin::Pin;

/// Why an [`Operator`] action failed. The runner reports it as the
/// vector's failure, in the words of its `Display`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OperatorError {
    /// Occurs when the tenant, catalog entry or other object the action
    /// names does not exist, or an id lacks the shape the action needs
    /// (a `schema.relation` id, say).
    #[error("{what}")]
    NotFound {
        /// What is missing, as a sentence (`no such entry`).
        what: String,
    },
    /// Occurs when the server-side action itself fails: a store write, a
    /// database statement, an admin API request.
    #[error(transparent)]
    Failed(Box<dyn std::error::Error + Send + Sync>),
    /// Occurs when the action completed but its effect was not seen where
    /// the vector needs it (a catalog refresh that missed the change, a
    /// replica that did not receive it in time).
    #[error("{what}")]
    NotObserved {
        /// What was not seen, as a sentence.
        what: String,
    },
}

/// A future returned by an [`Operator`].
pub type OperatorFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, OperatorError>> + Send + 'a>>;

/// Server-side actions some vectors need, available when the suite runs
/// beside the server (the project's own tests) rather than against an
/// external endpoint.
pub trait Operator: Send + Sync {
    /// Changes a defined, non-load-bearing field (the description) of a
    /// visible catalog entry.
    fn change_description<'a>(&'a self, language: &'a str, id: &'a str) -> OperatorFuture<'a, ()>;
    /// Changes a load-bearing field (the input schema) of a catalog entry.
    fn change_load_bearing<'a>(&'a self, language: &'a str, id: &'a str) -> OperatorFuture<'a, ()>;
    /// Stores a Run of another caller and returns its id.
    fn foreign_run<'a>(&'a self, language: &'a str) -> OperatorFuture<'a, String>;
    /// How many side effects the world has seen so far.
    fn effects(&self) -> u64;
}
