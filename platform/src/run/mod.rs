//! The execute pipeline's pieces that touch the world.
//!
//! - [`invoker`]: invoking HTTP-bound catalog entries.

pub mod invoker;
