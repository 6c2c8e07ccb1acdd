//! Tenancy: who calls ([`Principal`]), the running [`Tenant`]s with their
//! Languages, catalogs, data sources and quotas, the [`Platform`] that
//! holds them with the engine, the store and the shared caches, and
//! [`load`], the one place tenant state is read from the store; and the
//! models a tenant holds: its [`policy`] on risk, its promoted programs
//! ([`promotion`]), the idempotency [`leases`] of the Runs it runs, the
//! running deployments' [`deploy_state`], and what each tenant uses
//! ([`usage`]). Invariant: tenancy is the ground
//! floor of the server crate: it imports no other module of it; the
//! modules that act on these models (`policy`'s gate, `invocation`,
//! `operations`, `deploy`) import it.

pub mod deploy_state;
pub mod in_flight;
pub mod issuers;
pub mod leases;
pub mod load;
pub mod platform;
pub mod policy;
pub mod principal;
pub mod promotion;
pub mod tenant;
pub mod usage;
pub mod validation_cache;

pub use in_flight::{InFlight, InFlightGuard};
pub use platform::{NoListeners, Platform, PlatformParts, SecretValueError, ToolListeners};
pub use principal::{CredentialKind, DEV_ISSUER, Identity, Principal};
pub use tenant::{LanguageSlot, QuotaExceeded, Quotas, QuotasRefused, RunSlot, Tenant};
pub use validation_cache::ValidationCache;
