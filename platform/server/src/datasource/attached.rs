//! A data source attached to one of a tenant's Languages: how the tenant
//! registered it ([`DataSourceSpec`]), the live pool, and the catalog
//! entries its introspection owns in the tenant's catalog.
//!
//! The catalog of the attached Language is the database's relations
//! (Part II §5.4 catalog entries; issue "sql/postgres-15"): refreshed when
//! the source is attached, on demand (admin API), and every
//! `refresh_interval_s`. A refresh applies only real changes, so
//! `catalog_version` moves only when a visible defined field changes; rows
//! never move it. Visibility scopes come from [`DataSourceSpec::visibility`]
//! per table or per schema.
//!
//! The connection URL is a credential: it is stored sealed like the
//! tenant's secrets and never returned; [`DataSourceSpec`] serializes
//! without it.

use crate::egress::Confinement;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pilotage_engine::Clock;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::runtime::Handle;

use super::introspection::LANGUAGE;
use super::{DataSourceError, PostgresConfig, PostgresDataSource};
use pilotage_engine::catalog::SharedCatalog;
use pilotage_engine::catalog::StoredEntry;
use pilotage_engine::catalog::tenant::ApplyReport;
use sql_entry_id as entry_id;

/// The bounds of a data source; every field has the default of
/// [`PostgresConfig::new`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DataSourceBounds {
    /// Pool size (connections). Default 4, at most 64.
    pub max_connections: u32,
    /// Getting a connection, in milliseconds. Default 5000.
    pub connect_timeout_ms: u64,
    /// `statement_timeout` of every statement, in milliseconds. Default 5000.
    pub statement_timeout_ms: u64,
    /// Rows kept per statement. Default 1000.
    pub max_rows: usize,
    /// Bytes of JSON rows kept per statement. Default 262144.
    pub max_bytes: usize,
}

impl Default for DataSourceBounds {
    fn default() -> Self {
        let defaults = PostgresConfig::new("", [""]);
        DataSourceBounds {
            max_connections: defaults.max_connections,
            connect_timeout_ms: defaults.connect_timeout.as_millis() as u64,
            statement_timeout_ms: defaults.statement_timeout.as_millis() as u64,
            max_rows: defaults.max_rows,
            max_bytes: defaults.max_bytes,
        }
    }
}

fn default_language() -> String {
    LANGUAGE.to_owned()
}

fn default_refresh() -> u64 {
    300
}

/// The tenant secret name a data source's URL is sealed under
/// (`data-source:<name>`; the admin API refuses such names for tenant
/// secrets).
pub fn sealed_name(name: &str) -> String {
    format!("data-source:{name}")
}

/// A data source as a tenant registers it (admin API
/// `PUT /admin/v1/tenants/{tenant}/data-sources/{name}`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataSourceSpec {
    /// The Language whose statements run here and whose catalog this is.
    /// Default `sql/postgres-15`. One data source per Language per tenant.
    #[serde(default = "default_language")]
    pub language: String,
    /// `postgres://user[:password]@host:port/database`. Required when
    /// registering; never stored in clear nor returned.
    #[serde(default, skip_serializing)]
    pub url: Option<String>,
    /// Schemas whose relations form the catalog, in order, as PostgreSQL
    /// spells them (any identifier: `My.Schema` is one schema). At least
    /// one.
    /// Statements run with every relation schema-qualified; no schema is
    /// on a Run's `search_path`.
    pub schemas: Vec<String>,
    /// When set, only these relations are visible, by entry id
    /// (`schema.relation`, each part bare or `"quoted"`: `a."b.c"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relations: Option<Vec<String>>,
    /// Scopes a caller must hold to see a relation, by entry id
    /// `schema.relation` or by `schema` (each part written by the
    /// entry-id rule: `"My.Schema"`); the more specific key wins. Relations without a
    /// rule are visible to every caller of the tenant.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub visibility: BTreeMap<String, Vec<String>>,
    /// Pool and per-statement bounds.
    #[serde(default)]
    pub bounds: DataSourceBounds,
    /// Seconds between catalog refreshes. Default 300; at least 5.
    #[serde(default = "default_refresh")]
    pub refresh_interval_s: u64,
}

impl DataSourceSpec {
    /// Checks the spec; names the offending field.
    ///
    /// # Errors
    /// `(field, message)` for the first problem found.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        // Any PostgreSQL identifier names a schema (it is bound as a
        // parameter, never written into SQL text): non-empty, at most 63
        // bytes, no NUL.
        let identifier = |name: &str| !name.is_empty() && name.len() <= 63 && !name.contains('\0');
        if self.schemas.is_empty() {
            return Err(("schemas", "at least one schema".into()));
        }
        if let Some(bad) = self.schemas.iter().find(|s| !identifier(s)) {
            return Err(("schemas", format!("'{bad}' is not a schema name (1 to 63 bytes, no NUL)")));
        }
        // Keys are entry ids (`schema.relation`) or a schema alone, each
        // part written by the entry-id rule (`a."b.c"`).
        for key in self.relations.iter().flatten() {
            if entry_id::split(key).is_none() {
                return Err(("relations", format!("'{key}' is not a relation id schema.relation")));
            }
        }
        for key in self.visibility.keys() {
            if !entry_id::parts(key).is_some_and(|parts| (1..=2).contains(&parts.len())) {
                return Err(("visibility", format!("'{key}' is neither schema nor schema.relation")));
            }
        }
        if self.bounds.max_connections == 0 || self.bounds.max_connections > 64 {
            return Err(("bounds.max_connections", "1 to 64".into()));
        }
        if self.bounds.connect_timeout_ms == 0 || self.bounds.statement_timeout_ms == 0 {
            return Err(("bounds", "timeouts must be positive".into()));
        }
        if self.refresh_interval_s < 5 {
            return Err(("refresh_interval_s", "at least 5 seconds".into()));
        }
        Ok(())
    }

    /// The scopes that see `relation` (an entry id `schema.relation`):
    /// the rule for the relation, else the rule for its schema (its id's
    /// first part, written by the entry-id rule).
    pub fn visibility_of(&self, relation: &str) -> Vec<String> {
        let schema = entry_id::split(relation).map(|(schema, _)| entry_id::encode_part(&schema));
        self.visibility
            .get(relation)
            .or_else(|| schema.and_then(|schema| self.visibility.get(&schema)))
            .cloned()
            .unwrap_or_default()
    }

    fn config(&self, url: &str) -> PostgresConfig {
        let mut config = PostgresConfig::new(url, self.schemas.iter().cloned());
        config.relations = self.relations.clone();
        config.max_connections = self.bounds.max_connections;
        config.connect_timeout = Duration::from_millis(self.bounds.connect_timeout_ms);
        config.statement_timeout = Duration::from_millis(self.bounds.statement_timeout_ms);
        config.max_rows = self.bounds.max_rows;
        config.max_bytes = self.bounds.max_bytes;
        config
    }
}

/// The outcome of the last catalog refresh.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RefreshStatus {
    /// When (ms since the Unix epoch).
    pub at_ms: i64,
    /// How long introspection and apply took, in milliseconds.
    pub elapsed_ms: u64,
    /// Catalog entries the source owns after it.
    pub entries: usize,
    /// The failure, when it failed (the previous entries stay).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A data source attached to a tenant's Language.
#[derive(Debug)]
pub struct AttachedSource {
    /// The tenant's name for it.
    pub name: String,
    /// How it was registered (without the URL).
    pub spec: DataSourceSpec,
    /// The live pool.
    pub source: Arc<PostgresDataSource>,
    owned: Mutex<BTreeSet<String>>,
    status: Mutex<Option<(Instant, RefreshStatus)>>,
    clock: Clock,
}

impl AttachedSource {
    /// Builds the pool for `spec` at `url` on the runtime of `handle`
    /// (connecting lazily), its destination checked against `confinement`
    /// (the tenant's; `None` for a source the operator set up); refreshes
    /// are dated by `clock`.
    ///
    /// # Errors
    /// [`DataSourceError::Config`] when the URL does not parse.
    pub fn new(
        name: &str,
        mut spec: DataSourceSpec,
        url: &str,
        handle: Handle,
        clock: Clock,
        confinement: Option<Confinement>,
    ) -> Result<Self, DataSourceError> {
        spec.url = None;
        let mut source = PostgresDataSource::new(spec.config(url), handle)?;
        if let Some(confinement) = confinement {
            source = source.confined(confinement);
        }
        Ok(AttachedSource {
            name: name.to_owned(),
            spec,
            source: Arc::new(source),
            owned: Mutex::new(BTreeSet::new()),
            status: Mutex::new(None),
            clock,
        })
    }

    /// Whether catalog entry `id` came from this source.
    pub fn owns(&self, id: &str) -> bool {
        self.owned.lock().unwrap_or_else(|p| p.into_inner()).contains(id)
    }

    /// The entries this source put in the catalog.
    pub fn owned(&self) -> Vec<String> {
        self.owned.lock().unwrap_or_else(|p| p.into_inner()).iter().cloned().collect()
    }

    /// Introspects the database and applies the difference to `catalog`
    /// (its tenant's): new and changed relations upserted, vanished ones removed.
    /// On failure the catalog keeps what it had.
    ///
    /// # Errors
    /// [`DataSourceError`] from introspection.
    pub async fn refresh(&self, catalog: &SharedCatalog) -> Result<ApplyReport, DataSourceError> {
        let started = Instant::now();
        let introspected = match self.source.introspect().await {
            Ok(entries) => entries,
            Err(error) => {
                self.record(started, self.owned().len(), Some(error.to_string()));
                return Err(error);
            }
        };
        let stored: Vec<StoredEntry> = introspected
            .into_iter()
            .map(|entry| {
                let visibility = self.spec.visibility_of(&entry.id);
                StoredEntry::new(entry, visibility, None)
            })
            .collect();
        let fresh: BTreeSet<String> = stored.iter().map(|s| s.entry.id.clone()).collect();
        let gone: Vec<String> = self.owned().into_iter().filter(|id| !fresh.contains(id)).collect();
        let count = fresh.len();
        let report = catalog.with(|catalog| catalog.apply(stored, &gone));
        *self.owned.lock().unwrap_or_else(|p| p.into_inner()) = fresh;
        self.record(started, count, None);
        Ok(report)
    }

    fn record(&self, started: Instant, entries: usize, error: Option<String>) {
        let status = RefreshStatus {
            at_ms: self.clock.now_ms(),
            elapsed_ms: started.elapsed().as_millis() as u64,
            entries,
            error,
        };
        *self.status.lock().unwrap_or_else(|p| p.into_inner()) = Some((Instant::now(), status));
    }

    /// Whether the periodic refresh is due.
    pub fn refresh_due(&self) -> bool {
        match &*self.status.lock().unwrap_or_else(|p| p.into_inner()) {
            Some((at, _)) => at.elapsed() >= Duration::from_secs(self.spec.refresh_interval_s),
            None => true,
        }
    }

    /// The admin API's view: the spec, the target without credentials,
    /// and the last refresh.
    pub fn describe(&self) -> Value {
        let status = self.status.lock().unwrap_or_else(|p| p.into_inner()).as_ref().map(|(_, status)| status.clone());
        json!({
            "name": self.name,
            "target": self.source.target(),
            "spec": self.spec,
            "last_refresh": status,
        })
    }
}

/// Removes a detached source's entries from its tenant's `catalog`.
pub fn detach(catalog: &SharedCatalog, source: &AttachedSource) -> ApplyReport {
    let owned = source.owned();
    catalog.with(|catalog| catalog.apply(Vec::new(), &owned))
}
