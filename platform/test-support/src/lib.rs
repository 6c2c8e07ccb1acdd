//! What the platform's tests and benchmarks share: the test guest
//! components ([`HOSTILE`], [`UNFIT`], [`DEPLOYER`], [`RECIPE`], built for
//! tests only), the specification's files and schema checks, servers
//! started on loopback ports exactly as `pilotage serve` starts them, fresh
//! PostgreSQL schemas, engines and invokers for engine-level tests, the
//! processes the tests run (`pilotage serve`, installers), and a real
//! headless Chromium for pages people look at ([`browser::Browser`]).
//!
//! Invariant: nothing here is a mock. A server is the real server on a
//! real port, a database is the machine's PostgreSQL (or a fresh SQLite
//! file), and a component is a real component built from the workspace.
//!
//! ```no_run
//! # async fn example() {
//! use pilotage_test_support::{Backend, server, settings};
//! let server = server(settings(Backend::Sqlite).await).await;
//! println!("{}", server.mcp_url());
//! # }
//! ```
#![deny(unsafe_code)]

pub mod browser;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};

use pilotage_engine::catalog::CatalogSnapshot;
use pilotage_engine::effects::{InvokeError, Invoker};
use pilotage_engine::{Bounds, CallBounds, Component, Engine};
use pilotage_protocol::catalog::CatalogEntry;
use pilotage_server::settings::Settings;
use pilotage_server::start::{Server, start};
use serde_json::Value;

/// The hostile test component: loops, allocates, recurses, traps, lies
/// about its trace (`test-programs/hostile`).
pub const HOSTILE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/hostile.wasm"));

/// A component that fails the conformance lint (`test-programs/unfit`).
pub const UNFIT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/unfit.wasm"));

/// `deployer/v1`, a deploying Language that ignores `test_run`
/// (`test-programs/deployer`): the host alone keeps test runs free of side
/// effects.
pub const DEPLOYER: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/deployer.wasm"));

/// `recipe/v1`, the example Language of `docs/writing-a-language.md`
/// (`languages/recipe`).
pub const RECIPE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/recipe.wasm"));

/// Where the test guests' files are (`PILOTAGE_GUEST_DIR`): tests that
/// serve a Language from a file name them there.
pub const GUEST_DIR: &str = env!("PILOTAGE_GUEST_DIR");

/// The file of test guest `name` (`hostile.wasm`, `deployer.wasm`, …).
pub fn guest_file(name: &str) -> PathBuf {
    PathBuf::from(GUEST_DIR).join(name)
}

/// Which database a test server uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// A fresh SQLite file.
    Sqlite,
    /// A fresh schema in the machine's PostgreSQL.
    Postgres,
}

/// The PostgreSQL server the tests use.
pub fn postgres_url() -> String {
    std::env::var("PILOTAGE_TEST_POSTGRES").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A unique name for this process and call.
pub fn unique(prefix: &str) -> String {
    format!("{prefix}_{}_{}", std::process::id(), NEXT.fetch_add(1, Ordering::SeqCst))
}

/// Drops, once per process, the schemas that earlier test processes left
/// in the shared database: names made by [`unique`] end in `_<pid>_<n>`,
/// and a schema whose process is gone is nobody's.
async fn sweep_stale_schemas(connection: &mut sqlx::PgConnection) {
    static SWEPT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if SWEPT.swap(true, Ordering::SeqCst) || !std::path::Path::new("/proc/self").exists() {
        return;
    }
    let names: Vec<String> =
        sqlx::query_scalar("SELECT nspname::text FROM pg_namespace WHERE nspname ~ '^pilotage_[a-z_]+_[0-9]+_[0-9]+$'")
            .fetch_all(&mut *connection)
            .await
            .unwrap_or_default();
    for name in names {
        let pid = name.rsplit('_').nth(1).unwrap_or_default();
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let drop = format!("DROP SCHEMA IF EXISTS \"{name}\" CASCADE");
            let _ = sqlx::query(sqlx::AssertSqlSafe(drop)).execute(&mut *connection).await;
        }
    }
}

/// Creates a fresh PostgreSQL schema and returns a URL whose connections
/// use it.
pub async fn postgres_schema() -> String {
    use sqlx::Connection;
    let schema = unique("pilotage_test");
    let mut connection =
        sqlx::PgConnection::connect(&postgres_url()).await.expect("PostgreSQL at 127.0.0.1:5432 (see .ci/run)");
    sweep_stale_schemas(&mut connection).await;
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}"))).execute(&mut connection).await.unwrap();
    let separator = if postgres_url().contains('?') { '&' } else { '?' };
    format!("{}{separator}options=-c%20search_path%3D{schema}", postgres_url())
}

/// Settings for a test server: loopback on a free port, a fresh data
/// folder, the demo tenant without its SQL part (tests that need it set
/// `demo_postgres`).
pub async fn settings(backend: Backend) -> Settings {
    let data_dir = std::env::temp_dir().join(unique("pilotage-test"));
    let database_url = match backend {
        Backend::Sqlite => None,
        Backend::Postgres => Some(postgres_schema().await),
    };
    let mut settings =
        Settings { listen: "127.0.0.1:0".parse().unwrap(), data_dir, database_url, ..Settings::default() };
    settings.bounds = test_bounds();
    settings.capacity = test_capacity();
    settings.request_timeout_ms = settings.bounds.execution.wall_time_ms + 10_000;
    settings.demo_postgres = "off".to_owned();
    settings
}

/// Starts a server with the bundled Languages.
pub async fn server(settings: Settings) -> Server {
    start(settings, &pilotage_bundled::ALL).await.expect("the server starts")
}

/// The specification folder: `PILOTAGE_SPEC_DIR`, else `shared/spec`
/// beside the checkout (`<checkout>/../shared/spec`, where the
/// specification's authors' folder sits next to this repository).
///
/// # Panics
/// When neither holds `pilotage.schema.json`, saying how to point at it.
pub fn spec_dir() -> PathBuf {
    let dir = match std::env::var_os("PILOTAGE_SPEC_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => repository().join("../shared/spec"),
    };
    assert!(
        dir.join("pilotage.schema.json").is_file(),
        "the Pilotage specification folder was not found at {}: set PILOTAGE_SPEC_DIR to the folder holding \
         pilotage.schema.json and conformance-vectors.json (README, \"What the tests need\")",
        dir.display()
    );
    dir
}

/// The shared JSON Schema document.
pub fn schema_document() -> &'static Value {
    static DOCUMENT: OnceLock<Value> = OnceLock::new();
    DOCUMENT.get_or_init(|| {
        let text =
            std::fs::read_to_string(spec_dir().join("pilotage.schema.json")).expect("pilotage.schema.json is readable");
        serde_json::from_str(&text).expect("pilotage.schema.json is JSON")
    })
}

/// Errors of `value` against `$defs/<name>` of the shared schema.
pub fn schema_errors(name: &str, value: &Value) -> Vec<String> {
    let mut document = schema_document().clone();
    assert!(document["$defs"].get(name).is_some(), "the schema has no $defs/{name}");
    document["$ref"] = Value::String(format!("#/$defs/{name}"));
    let validator = jsonschema::validator_for(&document).expect("the schema compiles");
    validator.iter_errors(value).map(|error| format!("{} at {}", error, error.instance_path())).collect()
}

/// Asserts that `value` validates against `$defs/<name>`.
pub fn assert_schema(name: &str, value: &Value) {
    let errors = schema_errors(name, value);
    assert!(errors.is_empty(), "{name} rejects {value}: {errors:?}");
}

/// Bounds small enough for tests to hit quickly.
pub fn test_bounds() -> Bounds {
    Bounds {
        validation: CallBounds { fuel: 500_000_000, wall_time_ms: 2_000 },
        execution: CallBounds { fuel: 2_000_000_000, wall_time_ms: 5_000 },
        memory_bytes: 32 << 20,
        ..Bounds::default()
    }
}

/// The capacity of a test server: pools far below a node's (each pooled
/// memory reserves 4 GiB of address space, and tests run several servers
/// in one process at once), a short wait for a Run's place.
pub fn test_capacity() -> pilotage_engine::Capacity {
    pilotage_engine::Capacity {
        validation_instances: 16,
        run_instances: 256,
        run_wait_ms: 4_000,
        ..pilotage_engine::Capacity::default()
    }
}

/// One engine for the test binary.
pub fn engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| Engine::new(test_bounds(), None).expect("the engine starts"))
}

/// The bundled workflow component.
pub fn workflow() -> &'static Component {
    static COMPONENT: OnceLock<Component> = OnceLock::new();
    COMPONENT.get_or_init(|| engine().load(pilotage_bundled::WORKFLOW).expect("workflow loads"))
}

/// The demo catalog's entries.
pub fn demo_entries() -> Vec<CatalogEntry> {
    let file: Value = serde_json::from_str(pilotage_server::demo::tenant::DEMO_CATALOG).expect("demo catalog is JSON");
    file["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| serde_json::from_value(e.clone()).expect("an entry"))
        .collect()
}

/// A snapshot of the demo catalog.
pub fn demo_catalog() -> CatalogSnapshot {
    CatalogSnapshot::hashed(demo_entries())
}

/// An invoker answering from a function, recording nothing itself.
pub struct FnInvoker<F>(pub F);

#[async_trait::async_trait]
impl<F> Invoker for FnInvoker<F>
where
    F: Fn(&CatalogEntry, &Value) -> Result<Value, InvokeError> + Send + Sync,
{
    async fn invoke(&self, entry: &CatalogEntry, input: &Value) -> Result<Value, InvokeError> {
        (self.0)(entry, input)
    }
}

/// An invoker that answers every call with `{"ok": true}` plus a profile
/// for `cap_read_user_profile` and two orders for `cap_list_orders`.
pub fn demo_invoker() -> Arc<dyn Invoker> {
    Arc::new(FnInvoker(|entry: &CatalogEntry, input: &Value| {
        Ok(match entry.id.as_str() {
            "cap_read_user_profile" => {
                serde_json::json!({"id": input["user_id"], "name": "Amira Hassan", "email": "amira@example.com", "tier": "gold"})
            }
            "cap_list_orders" => {
                serde_json::json!({"orders": [{"id": "o-1", "total": 120.5, "status": "pending"}, {"id": "o-2", "total": 35, "status": "shipped"}]})
            }
            _ => serde_json::json!({"ok": true}),
        })
    }))
}

/// Spawns `command` (a `pilotage serve`) with stderr piped, waits up to two
/// minutes for the line naming its MCP URL, keeps draining stderr, and
/// returns the child with that URL.
pub async fn spawn_serving(command: &mut tokio::process::Command) -> (tokio::process::Child, String) {
    use tokio::io::AsyncBufReadExt;
    let mut child = command
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let url = mcp_url_announced(&mut lines).await;
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, url)
}

/// Reads a spawned `pilotage serve`'s stderr, for up to four minutes,
/// until the line naming its MCP URL, and returns the URL. (A debug build
/// compiling a Language file at start took 58 s on a machine also busy
/// with a second build; two such starts side by side passed two minutes.)
pub async fn mcp_url_announced(
    lines: &mut tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStderr>>,
) -> String {
    loop {
        let line = tokio::time::timeout(std::time::Duration::from_secs(240), lines.next_line())
            .await
            .expect("the server starts within 4 minutes")
            .expect("stderr is readable")
            .expect("the server says where it listens");
        if let Some(url) = line.strip_prefix("Pilotage Platform: MCP at ") {
            return url.to_owned();
        }
    }
}

/// The repository root (the paths of installs, builds and scripts run by
/// the tests are relative to it).
pub fn repository() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .canonicalize()
        .expect("the test-support crate sits at platform/test-support of the checkout")
}

/// Runs `program args` from the repository root, output shown (an
/// install's or a build's progress and errors belong in the test's log).
///
/// # Errors
/// [`RunError`] when the program cannot start or exits unsuccessfully.
pub fn run(program: &str, args: &[&str]) -> Result<(), RunError> {
    let status = std::process::Command::new(program)
        .args(args)
        .current_dir(repository())
        .stdin(std::process::Stdio::null())
        .status()
        .map_err(|source| RunError::Start { program: program.to_owned(), source })?;
    if status.success() {
        Ok(())
    } else {
        Err(RunError::Exit { command: format!("{program} {}", args.join(" ")), status })
    }
}

/// Occurs when a program the tests run does not succeed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// Occurs when the program cannot be started (not installed).
    #[error("{program} cannot be started: {source}")]
    Start {
        /// The program.
        program: String,
        /// Why.
        source: std::io::Error,
    },
    /// Occurs when the program exits unsuccessfully.
    #[error("{command} exited with {status}")]
    Exit {
        /// The command line.
        command: String,
        /// How it ended.
        status: std::process::ExitStatus,
    },
}

/// The Python of a virtual environment at `venv` (relative to the
/// repository), created and filled from the `requirements` file when
/// `import` fails in it: the tests install what they need into the
/// checkout on first use. `what` names the packages in failure messages.
pub fn python_venv(venv: &str, requirements: &str, import: &str, what: &str) -> String {
    let venv = repository().join(venv);
    let python = venv.join("bin/python3").display().to_string();
    let ready = || run(&python, &["-c", &format!("import {import}")]).is_ok();
    if !ready() {
        let venv_text = venv.display().to_string();
        run("python3", &["-m", "venv", &venv_text])
            .and_then(|()| {
                run(&python, &["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r", requirements])
            })
            .unwrap_or_else(|error| panic!("installing {what} failed: {error} (needs Python 3 with venv)"));
        assert!(ready(), "{what} is not importable from {python} after installing it");
    }
    python
}

/// The `pilotage` binary of the profile the caller was built in (a
/// benchmark runs the release one), built first when missing or stale:
/// benchmarks spawn `pilotage serve` as a user runs it, from a package of
/// their own (cargo lets a package name only its own binaries).
///
/// # Panics
/// When cargo cannot build it.
pub fn pilotage_binary() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let exe = std::env::current_exe().expect("the running executable's path");
            // target/<profile>/deps/<name> → target/<profile>
            let profile_dir = exe.parent().and_then(std::path::Path::parent).expect("a target/<profile> folder");
            let release = profile_dir.file_name().is_some_and(|name| name != "debug");
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
            let mut build = std::process::Command::new(cargo);
            build.current_dir(repository()).args(["build", "-p", "pilotage", "--bin", "pilotage"]);
            if release {
                build.arg("--release");
            }
            let status = build.status().expect("cargo runs");
            assert!(status.success(), "building the pilotage binary failed");
            profile_dir.join("pilotage")
        })
        .clone()
}

/// The path of `program`, a real component the tests run (haproxy,
/// promtool, prometheus, mosquitto), found on the `PATH` or in `/usr/sbin`.
/// Tests never install anything: `.ci/run` and the README's prerequisites
/// do.
///
/// # Panics
/// When it is not installed, naming the Debian package that provides it
/// and the command that installs it.
pub fn required_program(program: &str, package: &str) -> PathBuf {
    let on_path = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")])
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file());
    on_path.unwrap_or_else(|| {
        panic!(
            "{program} is not installed, and this test runs the real one: install Debian's package with \
             `apt-get install {package}` (.ci/run installs it; README, \"What the tests need\")"
        )
    })
}
