//! The execute pipeline's pieces that touch the world.
//!
//! - [`invoker`]: invoking HTTP-bound catalog entries;
//! - [`promotion`]: promoted programs, their references and baselines;
//! - [`tenant_invoker`]: a tenant's invocations, sub-programs included.

pub(crate) mod invoker;
pub(crate) use crate::tenancy::promotion;
pub(crate) mod tenant_invoker;
