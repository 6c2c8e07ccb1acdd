//! The catalog: entries, what each caller can see, and `catalog_version`
//! (Part II §5.4, §6.3).
//!
//! - [`snapshot`]: the immutable visible view one call works against;
//! - [`version`]: the content-hash token and its per-group aggregates.

pub mod snapshot;
pub mod version;

pub use snapshot::CatalogSnapshot;
