//! Who is calling: a tenant, an issuer and a subject there, and the
//! scopes its credential holds (Part III §8.4 authorization identity).

use std::collections::BTreeSet;

use pilotage_store::Owner;
use serde::{Deserialize, Serialize};

/// The issuer of development tokens (`pilotage token mint`) and of the
/// development principal of `--auth dev`.
pub const DEV_ISSUER: &str = "pilotage-dev";

/// Who is calling: a tenant, the issuer of the credential and the subject
/// within that issuer, and the scopes the credential holds (Part III §8.4
/// authorization identity).
///
/// A subject is unique only within its issuer (OpenID Connect Core §2):
/// two trusted issuers may both have an "alice", and they are different
/// principals. Everything kept per principal (MCP sessions, tasks,
/// idempotency keys, approvals and who may decide them, budgets, Runs shown
/// back to their caller) is keyed on [`Principal::owner`], never on the
/// subject alone.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Principal {
    /// The tenant.
    pub tenant: String,
    /// The issuer of the credential: a verified JWT's `iss`, or
    /// [`DEV_ISSUER`] for development tokens and the
    /// development principal.
    pub issuer: String,
    /// The subject (user or client) within the issuer.
    pub subject: String,
    /// Scopes held.
    pub scopes: BTreeSet<String>,
}

impl Principal {
    /// This principal as the store matches per-principal rows: tenant,
    /// issuer and subject.
    pub fn owner(&self) -> Owner<'_> {
        Owner { tenant: &self.tenant, issuer: &self.issuer, subject: &self.subject }
    }
}

/// The kind of credential that acted, as an audit record names it: a
/// token whose subject is "operator" is a `jwt`, never the
/// `operator-token`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CredentialKind {
    /// The operator token (`admin_token`), which names no subject.
    OperatorToken,
    /// A bearer JWT of a trusted issuer.
    Jwt,
    /// A development token or the development principal (`--auth dev`).
    Development,
    /// The server itself, applying its settings file.
    SettingsFile,
}

impl CredentialKind {
    /// The name an audit record carries.
    pub fn as_str(self) -> &'static str {
        match self {
            CredentialKind::OperatorToken => "operator-token",
            CredentialKind::Jwt => "jwt",
            CredentialKind::Development => "development",
            CredentialKind::SettingsFile => "settings-file",
        }
    }
}

/// Who a credential names: its kind, its issuer (empty for the server's own
/// credentials) and its subject there. Two identities are the same person
/// only when issuer and subject both match (OpenID Connect Core §2).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// The kind of credential.
    pub credential: CredentialKind,
    /// Its issuer.
    pub issuer: String,
    /// Its subject.
    pub subject: String,
}

impl Identity {
    /// The subject `subject` of a bearer token of `issuer`: a development
    /// token when the issuer is [`DEV_ISSUER`], else a JWT.
    pub(crate) fn of_token(issuer: &str, subject: &str) -> Identity {
        let credential = if issuer == DEV_ISSUER { CredentialKind::Development } else { CredentialKind::Jwt };
        Identity { credential, issuer: issuer.to_owned(), subject: subject.to_owned() }
    }

    /// The operator token's identity: it names no issuer, and its subject
    /// is the name audit records give it.
    pub(crate) fn operator_token() -> Identity {
        Identity { credential: CredentialKind::OperatorToken, issuer: String::new(), subject: "operator".into() }
    }

    /// The server acting on its settings file.
    pub(crate) fn settings_file() -> Identity {
        Identity { credential: CredentialKind::SettingsFile, issuer: String::new(), subject: "settings".into() }
    }

    /// Whether this is the subject `subject` of `issuer`, by a credential
    /// that names one (never the operator token or the server itself).
    pub(crate) fn is(&self, issuer: &str, subject: &str) -> bool {
        matches!(self.credential, CredentialKind::Jwt | CredentialKind::Development)
            && self.issuer == issuer
            && self.subject == subject
    }
}
