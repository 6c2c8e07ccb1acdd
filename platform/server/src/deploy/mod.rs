//! The deployment runtime (Part II §6.5.7 `deploy` and `both`, §5.8.4;
//! docs/architecture.md "Deployments"). The platform owns triggers,
//! storage and firing; the component owns the language.
//!
//! - `model`: a stored deployment decoded, its catalog entry (id
//!   `model::entry_id`, kind `model::entry_kind`, not callable,
//!   carrying the body's risk), the secret names of trigger sources;
//! - `install`: a deploy-mode `execute` calls the component's `deploy`
//!   export (`pilotage:language@1.2.0`, world `deploying-language`), which
//!   returns an installation; `install::install` checks and stores it
//!   (deploying a name again replaces it);
//! - `runtime` fires it: schedules (cron in an IANA zone, `schedule`),
//!   webhook deliveries ([`webhook`]) and MQTT messages (`mqtt`, with the
//!   filters and broker secrets of `broker`). Every trigger instance is
//!   claimed in the store first, so it fires once across replicas. A
//!   firing is a Run of the body (immediate) as the deploying principal,
//!   after the body's referenced entries are checked against the current
//!   catalog; it is retained and its trace fetchable by `run_id`;
//! - `publish`: agents see their tenant's deployments as catalog
//!   entries; [`manage`]: operators disable, enable and remove them
//!   (admin API and CLI); [`state`]: what the runtime keeps in the
//!   platform.

pub(crate) mod broker;
pub(crate) mod install;
pub mod manage;
pub(crate) mod model;
pub(crate) mod mqtt;
pub(crate) mod publish;
pub(crate) mod runtime;
pub(crate) mod schedule;
pub mod state;
pub mod webhook;
