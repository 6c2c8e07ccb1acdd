//! Tenancy: who calls ([`Principal`]), the running [`Tenant`]s with their
//! Languages, catalogs, data sources and quotas, the [`Platform`] that
//! holds them with the engine, the store and the shared caches, and
//! [`load`], the one place tenant state is read from the store.

pub mod in_flight;
pub mod load;
pub mod platform;
pub mod principal;
pub mod tenant;
pub mod validation_cache;

pub use in_flight::{InFlight, InFlightGuard};
pub use platform::{NoListeners, Platform, PlatformParts, SecretValueError, ToolListeners};
pub use principal::{CredentialKind, DEV_ISSUER, Identity, Principal};
pub use tenant::{LanguageSlot, QuotaExceeded, Quotas, RunSlot, Tenant};
pub use validation_cache::ValidationCache;
