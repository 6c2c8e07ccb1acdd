//! The deployment runtime (Part II §6.5.7 `deploy` and `both`, §5.8.4;
//! docs/architecture.md "Deployments"). The platform owns triggers,
//! storage and firing; the component owns the language.
//!
//! - `model`, `schedule`, `broker`, `publish`, `manage` (re-exported from
//!   `crate::deployments`, which only models and stores): a stored
//!   deployment decoded, its catalog entry, the secret names of trigger
//!   sources;
//! - a deploy-mode `execute` calls the component's `deploy` export
//!   (`pilotage:language@1.2.0`, world `deploying-language`), which returns
//!   an installation; `operations::install` checks and stores it
//!   (deploying a name again replaces it);
//! - `runtime` (here, above the operations it runs) fires it: schedules (cron in an IANA zone, `schedule`),
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

pub(crate) mod mqtt;
pub(crate) mod runtime;
pub use crate::tenancy::deploy_state as state;
pub mod webhook;

pub use crate::deployments::manage;
pub(crate) use crate::deployments::{broker, model, publish, schedule};
