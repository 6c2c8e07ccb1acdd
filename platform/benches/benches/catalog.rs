//! Catalog benchmarks (issue: multi-tenancy). Run with
//! `cargo bench --bench catalog`.
//!
//! One tenant with 100,000 catalog entries in 20 visibility classes (class 0
//! visible to every caller, class k = 1..19 needing scope `team_kk`; entries
//! are dealt round-robin, so each class holds 5,000). The entries are
//! written with `Store::catalog_put` (what the admin API calls) into a fresh
//! database, and the server is then started with `server::start`, which
//! loads them with `admin::load_tenants`, exactly as a restart does. The
//! figures are then taken on the code paths the MCP operations use:
//!
//! - `version/<principal>` (µs per call, median; target ≤ 100 µs):
//!   `Tenant::snapshot(principal, "workflow/v1").catalog_version()`, the
//!   call every `pilotage_catalog`, validate and execute makes (the O(groups)
//!   combination of per-class aggregates, plus remembering the issued token
//!   for `changed_since`, under the tenant's catalog lock). Beside it,
//!   `version_compute_only` (`TenantCatalog::compute_version`).
//! - `list_100/<principal>` (µs per call, median; target ≤ 5 ms):
//!   `operations::lookup::catalog` with `{"verb": "list", "limit": 100}`,
//!   the `pilotage_catalog` handler minus MCP framing, result serialized to
//!   JSON; `list_100_mid_cursor` continues from an opaque cursor in the
//!   middle of the id space.
//! - `mcp_list_100/<principal>` (µs per call): the same page over Streamable
//!   HTTP with the project's client (`client::Connection`, a development
//!   token carrying the principal's scopes).
//!
//! Principals: `public_only` (no scopes: 1 class, 5,000 entries visible),
//! `4_classes` (3 scopes: 20,000 visible), `all_20_classes` (19 scopes:
//! everything). Backends: PostgreSQL (`PILOTAGE_TEST_POSTGRES`, default
//! `postgres://postgres@127.0.0.1:5432/test`, in a fresh schema dropped at
//! the end) and SQLite (a fresh file). Seed and start-up times are printed.
//! The catalog is held in memory after start-up, so the request figures do
//! not touch the database; the backends differ only in seeding and loading.

use std::collections::BTreeSet;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use criterion::Criterion;
use pilotage_client::{Connection, Reply};
use pilotage_engine::catalog::StoredEntry;
use pilotage_engine::catalog::lookup::cursor_after;
use pilotage_protocol::catalog::CatalogEntry;
use pilotage_server::operations::{Caller, Context, lookup};
use pilotage_server::settings::Settings;
use pilotage_server::start::{Server, start};
use pilotage_server::tenancy::{Principal, Quotas, Tenant};
use pilotage_store::{Store, TenantRow};
use serde_json::{Value, json};
use tokio::runtime::Runtime;

mod pg_schema;

const ENTRIES: usize = 100_000;
const CLASSES: usize = 20;
const TENANT: &str = "demo";
const LANGUAGE: &str = "workflow/v1";

/// The scope a class needs (class 0 needs none).
fn class_scope(class: usize) -> String {
    format!("team_{class:02}")
}

fn stored_entry(n: usize) -> StoredEntry {
    let class = n % CLASSES;
    let entry: CatalogEntry = serde_json::from_value(json!({
        "id": format!("cap_{n:06}"),
        "kind": "capability",
        "name": format!("Capability {n}"),
        "description": format!("Reads record {n} of team {class}: a representative description of moderate length."),
        "input_schema": {"type": "object", "properties": {"record_id": {"type": "string"}}, "required": ["record_id"],
                         "additionalProperties": false},
        "output_schema": {"type": "object", "properties": {"value": {"type": "string"}}},
        "risk": "safe",
        "risk_hints": {"readOnly": true, "destructive": false, "openWorld": false},
        "tags": ["bench", format!("team{class}")],
        "languages": [LANGUAGE]
    }))
    .expect("a catalog entry");
    let visibility = if class == 0 { Vec::new() } else { vec![class_scope(class)] };
    StoredEntry::new(entry, visibility, None)
}

/// (name, scopes) of the principals measured.
fn principals() -> Vec<(&'static str, Vec<String>)> {
    vec![
        ("public_only", Vec::new()),
        ("4_classes", (1..4).map(class_scope).collect()),
        ("all_20_classes", (1..CLASSES).map(class_scope).collect()),
    ]
}

fn principal(scopes: &[String]) -> Principal {
    Principal {
        tenant: TENANT.into(),
        issuer: "https://issuer.example".into(),
        subject: "bench".into(),
        scopes: scopes.iter().cloned().collect::<BTreeSet<_>>(),
    }
}

/// A database prepared for one backend, and how to clean it up.
struct Prepared {
    settings: Settings,
    postgres_schema: Option<String>,
}

async fn prepare(backend: &str) -> Result<Prepared, String> {
    let data_dir = std::env::temp_dir().join(format!("pilotage-bench-catalog-{backend}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&data_dir);
    let mut postgres_schema = None;
    let database_url = if backend == "postgres" {
        let (url, schema) = pg_schema::fresh("catalog").await?;
        postgres_schema = Some(schema);
        Some(url)
    } else {
        None
    };
    // `demo: false`: the tenant holds exactly the bench entries (the demo
    // catalog would add its own classes); workflow/v1 is installed below.
    let settings = Settings {
        listen: "127.0.0.1:0".parse().expect("an address"),
        data_dir,
        database_url,
        demo: false,
        ..Settings::default()
    };
    let store = Store::connect(&settings.database_url()).await.map_err(|e| e.to_string())?;
    store.migrate().await.map_err(|e| e.to_string())?;
    store
        .tenant_insert(&TenantRow {
            id: TENANT.into(),
            name: "Bench tenant".into(),
            disabled: false,
            quotas: serde_json::to_string(&Quotas::default()).expect("quotas serialize"),
            egress: "{}".to_owned(),
            policy: "{}".to_owned(),
            issuers: "[]".to_owned(),
            created_at: 0,
        })
        .await
        .map_err(|e| e.to_string())?;
    let rows: Vec<(String, String)> = (0..ENTRIES)
        .map(stored_entry)
        .map(|stored| (stored.entry.id.clone(), serde_json::to_string(&stored).expect("serializes")))
        .collect();
    let seeding = Instant::now();
    store.catalog_put(TENANT, &rows, 0).await.map_err(|e| e.to_string())?;
    println!("{backend}: seeded {ENTRIES} entries with Store::catalog_put in {:.2} s", seeding.elapsed().as_secs_f64());
    Ok(Prepared { settings, postgres_schema })
}

async fn cleanup(prepared: Prepared) {
    if let Some(schema) = prepared.postgres_schema {
        pg_schema::drop(&schema).await;
    }
    let _ = std::fs::remove_dir_all(&prepared.settings.data_dir);
}

async fn start_loaded(settings: &Settings, backend: &str) -> (Server, Arc<Tenant>) {
    let started = Instant::now();
    let mut settings = settings.clone();
    // A bench server's Runs' pool: small, whatever the node (4 GiB of
    // address space per slot; docs/architecture.md, "Capacity").
    if settings.capacity.run_instances == 0 {
        settings.capacity.run_instances = 512;
    }
    let server = start(settings, &pilotage_bundled::ALL).await.expect("the server starts");
    let startup = started.elapsed();
    let tenant = server.platform.tenant(TENANT).expect("the tenant was loaded");
    let loaded = tenant.with_catalog(|catalog| catalog.all().count());
    assert_eq!(loaded, ENTRIES, "every entry was loaded");
    println!(
        "{backend}: server::start (migrations, admin::load_tenants of {loaded} entries, listener) took {:.2} s",
        startup.as_secs_f64()
    );
    let component = server.platform.engine().load(pilotage_bundled::WORKFLOW).expect("workflow loads");
    server.platform.install_language(TENANT, component).await;
    // The default quota (200 requests/s per tenant) would throttle the MCP
    // measurements below.
    tenant.set_quotas(Quotas { requests_per_second: 1_000_000, ..Quotas::default() });
    (server, tenant)
}

fn bench_backend(criterion: &mut Criterion, runtime: &Runtime, backend: &str) {
    let prepared = match runtime.block_on(prepare(backend)) {
        Ok(prepared) => prepared,
        Err(error) => {
            eprintln!("{backend}: skipped, the database could not be prepared: {error}");
            return;
        }
    };
    let (server, tenant) = runtime.block_on(start_loaded(&prepared.settings, backend));
    // Tokens name this resource as their audience; ask the server which it
    // is (RFC 9728 metadata) rather than guess from the settings.
    let resource = runtime.block_on(async {
        let metadata: Value = reqwest::get(format!("http://{}/.well-known/oauth-protected-resource", server.addr))
            .await
            .expect("the resource metadata is served")
            .json()
            .await
            .expect("the resource metadata is JSON");
        metadata["resource"].as_str().expect("a resource identifier").to_owned()
    });
    let dev_tokens = pilotage_server::auth::dev::DevTokens::load(&prepared.settings.data_dir, resource)
        .expect("the development secret");
    let mid_cursor = cursor_after(&format!("cap_{:06}", ENTRIES / 2));

    let mut group = criterion.benchmark_group(format!("catalog_{backend}"));
    for (name, scopes) in principals() {
        let principal = principal(&scopes);
        let context = Context {
            platform: server.platform.clone(),
            caller: Caller { principal: principal.clone(), session_id: None, address: None },
            tenant: tenant.clone(),
        };
        let first_page = json!({"language": LANGUAGE, "verb": "list", "limit": 100});
        let mid_page = json!({"language": LANGUAGE, "verb": "list", "limit": 100, "cursor": mid_cursor});
        for args in [&first_page, &mid_page] {
            let page = lookup::catalog(&context, args).expect("a page");
            assert_eq!(page["items"].as_array().map(Vec::len), Some(100), "a full page");
            assert!(page["next_cursor"].is_string());
        }
        let visible = tenant.snapshot(&principal, LANGUAGE).len();
        println!("{backend}/{name}: {} scopes, {visible} entries visible", scopes.len());

        group.bench_function(format!("version/{name}"), |bencher| {
            bencher.iter(|| tenant.snapshot(black_box(&principal), LANGUAGE).catalog_version().len())
        });
        group.bench_function(format!("version_compute_only/{name}"), |bencher| {
            bencher
                .iter(|| tenant.with_catalog(|catalog| catalog.compute_version(black_box(&principal.scopes), LANGUAGE)))
        });
        group.bench_function(format!("list_100/{name}"), |bencher| {
            bencher.iter(|| lookup::catalog(&context, black_box(&first_page)).expect("a page"))
        });
        group.bench_function(format!("list_100_mid_cursor/{name}"), |bencher| {
            bencher.iter(|| lookup::catalog(&context, black_box(&mid_page)).expect("a page"))
        });

        let token = dev_tokens.mint(TENANT, "bench", &scopes, 3600).expect("a development token");
        let connection = runtime.block_on(Connection::http(&server.mcp_url(), Some(&token))).expect("connects");
        let list = || async {
            match connection.call("pilotage_catalog", first_page.clone()).await.expect("the call is answered") {
                Reply::Result(page) => page,
                Reply::RequestError(error) => panic!("pilotage_catalog: {error:?}"),
            }
        };
        let page: Value = runtime.block_on(list());
        assert_eq!(page["items"].as_array().map(Vec::len), Some(100), "a full page over MCP");
        group.bench_function(format!("mcp_list_100/{name}"), |bencher| {
            bencher.iter_custom(|iterations| {
                runtime.block_on(async {
                    let started = Instant::now();
                    for _ in 0..iterations {
                        black_box(list().await);
                    }
                    started.elapsed()
                })
            })
        });
        runtime.block_on(connection.close());
    }
    group.finish();
    runtime.block_on(server.stop());
    runtime.block_on(cleanup(prepared));
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime");
    for backend in ["postgres", "sqlite"] {
        bench_backend(&mut criterion, &runtime, backend);
    }
    criterion.final_summary();
}
