//! The schema's migrations, one list for both backends
//! (`migrations/sqlite` and `migrations/postgres` hold a file of the same
//! name for each).

use std::borrow::Cow;

use sqlx::SqlStr;
use sqlx::migrate::{Migration, MigrationType, Migrator};

use crate::backend::Backend;

/// The migrations in order, each as (version, description, file stem): a
/// file `migrations/<backend>/<stem>.sql` exists for both backends and is
/// embedded for each.
macro_rules! migrations {
    ($(($version:literal, $description:literal, $stem:literal)),* $(,)?) => {
        /// The embedded migrations of `backend`, in order.
        fn migrations(backend: Backend) -> Vec<Migration> {
            match backend {
                Backend::Sqlite => vec![$(migration(
                    $version,
                    $description,
                    include_str!(concat!("../../../migrations/sqlite/", $stem, ".sql")),
                )),*],
                Backend::Postgres => vec![$(migration(
                    $version,
                    $description,
                    include_str!(concat!("../../../migrations/postgres/", $stem, ".sql")),
                )),*],
            }
        }
    };
}

migrations![
    (1, "runs idempotency promotions", "0001_runs_idempotency_promotions"),
    (2, "tenants languages catalog secrets audit", "0002_tenants_languages_catalog_secrets_audit"),
    (3, "data sources", "0003_data_sources"),
    (4, "idempotency leases", "0004_idempotency_leases"),
    (5, "run bytes", "0005_run_bytes"),
    (6, "components", "0006_components"),
    (7, "fleet", "0007_fleet"),
    (8, "deployments", "0008_deployments"),
    (9, "firings by deployment", "0009_firings_by_deployment"),
    (10, "tenant egress", "0010_tenant_egress"),
    (11, "tasks", "0011_tasks"),
    (12, "policy approvals budgets", "0012_policy_approvals_budgets"),
    (13, "run status", "0013_run_status"),
    (14, "ended sign ins", "0014_ended_sign_ins"),
    (15, "principal issuer", "0015_principal_issuer"),
    (16, "tenant issuers", "0016_tenant_issuers"),
    (17, "usage days", "0017_usage_days"),
    (18, "deployment assertions", "0018_deployment_assertions"),
];

fn migration(version: i64, description: &'static str, sql: &'static str) -> Migration {
    Migration::new(version, Cow::Borrowed(description), MigrationType::Simple, SqlStr::from_static(sql), false)
}

/// The migrator of `backend`: every migration, applied in order.
pub(crate) fn migrator(backend: Backend) -> Migrator {
    Migrator { migrations: Cow::Owned(migrations(backend)), ..Migrator::DEFAULT }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every migration file is embedded, in order, for both backends: a
    /// file added to `migrations/` but not to [`migrator`] would leave its
    /// tables missing on every existing database.
    #[test]
    fn every_migration_file_is_embedded() {
        for (backend, folder) in [(Backend::Sqlite, "sqlite"), (Backend::Postgres, "postgres")] {
            let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../migrations").join(folder);
            let mut files: Vec<String> = std::fs::read_dir(&dir)
                .expect("the migrations folder")
                .map(|entry| entry.expect("an entry").file_name().to_string_lossy().into_owned())
                .filter(|name| name.ends_with(".sql"))
                .collect();
            files.sort();
            let embedded = migrator(backend);
            assert_eq!(embedded.migrations.len(), files.len(), "{folder}: {files:?}");
            for (migration, file) in embedded.migrations.iter().zip(&files) {
                let text = std::fs::read_to_string(dir.join(file)).unwrap();
                assert_eq!(migration.sql.as_ref(), text, "{folder}/{file} is not embedded at its place");
                assert!(file.starts_with(&format!("{:04}_", migration.version)), "{file}");
            }
        }
    }
}
