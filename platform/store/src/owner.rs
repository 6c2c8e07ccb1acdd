//! Whose a per-principal row is: a tenant, an issuer and a subject
//! (migration 15).

/// The principal a row belongs to, as the store matches it: its tenant,
/// the issuer of its credential and its subject there. `sub` is unique
/// only within its issuer (OpenID Connect Core §2), so every query of a
/// per-principal row (tasks, idempotency keys, MCP sessions, approvals,
/// Runs shown to their caller) matches all three. Rows written before
/// migration 15 have the issuer `''`, which no credential has.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Owner<'a> {
    /// The tenant.
    pub tenant: &'a str,
    /// The issuer of the credential (a JWT's `iss`; the server's own names
    /// for its development and operator credentials).
    pub issuer: &'a str,
    /// The subject within the issuer.
    pub subject: &'a str,
}
