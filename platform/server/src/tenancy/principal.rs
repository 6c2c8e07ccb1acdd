//! Who is calling: a tenant, a subject in it, and the scopes its
//! credential holds (Part III §8.4 authorization identity).

use std::collections::BTreeSet;

/// Who is calling: a tenant, a subject in it, and the scopes its
/// credential holds (Part III §8.4 authorization identity).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Principal {
    /// The tenant.
    pub tenant: String,
    /// The subject (user or client) within the tenant.
    pub subject: String,
    /// Scopes held.
    pub scopes: BTreeSet<String>,
}
