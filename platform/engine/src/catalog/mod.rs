//! The catalog: entries, what each caller can see, and `catalog_version`
//! (Part II §5.4, §6.3).
//!
//! - [`entry`]: an entry as stored, with its visibility and [`binding`];
//! - [`tenant`]: one tenant's entries, visibility, aggregates, change log;
//! - [`snapshot`]: the immutable visible view one call works against;
//! - [`lookup`]: list with filters, search and cursors;
//! - [`version`]: the content-hash token and its per-group aggregates.

pub mod binding;
pub mod entry;
pub mod lookup;
pub mod snapshot;
pub mod tenant;
pub mod version;

pub use binding::HttpBinding;
pub use entry::StoredEntry;
pub use snapshot::CatalogSnapshot;
pub use tenant::{SharedCatalog, TenantCatalog};
