//! The catalog: entries, what each caller can see, and `catalog_version`
//! (Part II §5.4, §6.3).
//!
//! - [`tenant`]: one tenant's entries, visibility, aggregates, change log;
//! - [`snapshot`]: the immutable visible view one call works against;
//! - [`lookup`]: list with filters, search and cursors;
//! - [`version`]: the content-hash token and its per-group aggregates.

pub mod lookup;
pub mod snapshot;
pub mod tenant;
pub mod version;

pub use snapshot::CatalogSnapshot;
pub use tenant::{StoredEntry, TenantCatalog};
