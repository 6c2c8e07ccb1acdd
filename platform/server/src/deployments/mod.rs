//! Deployments as the platform keeps them (Part II §6.5.7 `deploy` and
//! `both`; docs/architecture.md "Deployments"): a stored deployment decoded
//! ([`model`]: its catalog entry, not callable and carrying the body's
//! risk, the secret names of its trigger sources), its schedules
//! ([`schedule`]: cron in an IANA zone), MQTT filters and broker secrets
//! ([`broker`]), its catalog entries for agents ([`publish`]) and the
//! operators' enable, disable and remove ([`manage`]).
//!
//! Invariant: this module only models and stores deployments; it runs
//! nothing. A deploy-mode execute installs one (`operations::install`);
//! `deploy` fires them. Both sit above it, so it imports neither.

pub(crate) mod broker;
pub mod manage;
pub(crate) mod model;
pub(crate) mod publish;
pub(crate) mod schedule;
