//! The command families of `pilotage`, one module each.

pub(crate) mod admin;
pub(crate) mod approval;
pub(crate) mod client;
pub(crate) mod conformance;
pub(crate) mod language;
pub(crate) mod serve;
pub(crate) mod token;
