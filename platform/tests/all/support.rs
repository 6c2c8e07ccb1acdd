//! Shared helpers: the spec's files, schema validation, engines and
//! components.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use pilotage_platform::catalog::CatalogSnapshot;
use pilotage_platform::engine::{Bounds, CallBounds, Component, Engine};
use pilotage_platform::protocol::catalog::CatalogEntry;
use serde_json::Value;

/// The specification folder: `PILOTAGE_SPEC_DIR`, else `../shared/spec`
/// beside the workspace, else `/work/shared/spec`.
pub fn spec_dir() -> PathBuf {
    if let Ok(dir) = std::env::var("PILOTAGE_SPEC_DIR") {
        return PathBuf::from(dir);
    }
    let beside = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/spec");
    if beside.is_dir() {
        return beside;
    }
    let fixed = PathBuf::from("/work/shared/spec");
    assert!(
        fixed.is_dir(),
        "the Pilotage spec folder was not found; set PILOTAGE_SPEC_DIR to the folder holding pilotage.schema.json"
    );
    fixed
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

/// One engine for the test binary.
pub fn engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| Engine::new(test_bounds(), None).expect("the engine starts"))
}

/// The bundled workflow component.
pub fn workflow() -> &'static Component {
    static COMPONENT: OnceLock<Component> = OnceLock::new();
    COMPONENT.get_or_init(|| engine().load(pilotage_platform::bundled::WORKFLOW).expect("workflow loads"))
}

/// The hostile test component's bytes.
pub const HOSTILE: &[u8] = include_bytes!(concat!(env!("PILOTAGE_GUEST_DIR"), "/hostile.wasm"));

/// The demo catalog's entries.
pub fn demo_entries() -> Vec<CatalogEntry> {
    let file: Value = serde_json::from_str(include_str!("../../demo/catalog.json")).expect("demo catalog is JSON");
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

impl<F> pilotage_platform::language::execution::Invoker for FnInvoker<F>
where
    F: Fn(&CatalogEntry, &Value) -> Result<Value, String> + Send + Sync,
{
    fn invoke(&self, entry: &CatalogEntry, input: &Value) -> Result<Value, String> {
        (self.0)(entry, input)
    }
}

/// An invoker that answers every call with `{"ok": true}` plus a profile
/// for `cap_read_user_profile` and two orders for `cap_list_orders`.
pub fn demo_invoker() -> Arc<dyn pilotage_platform::language::execution::Invoker> {
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

/// Reads a spawned `pilotage serve`'s stderr, for up to two minutes,
/// until the line naming its MCP URL, and returns the URL.
pub async fn mcp_url_announced(
    lines: &mut tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStderr>>,
) -> String {
    loop {
        let line = tokio::time::timeout(std::time::Duration::from_secs(120), lines.next_line())
            .await
            .expect("the server starts within 2 minutes")
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
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().expect("the platform crate sits in the workspace").to_path_buf()
}

/// Runs `program args` from the repository root, output shown (an
/// install's or a build's progress and errors belong in the test's log).
///
/// # Errors
/// A message when the program cannot start or exits unsuccessfully.
pub fn run(program: &str, args: &[&str]) -> Result<(), String> {
    let status = std::process::Command::new(program)
        .args(args)
        .current_dir(repository())
        .stdin(std::process::Stdio::null())
        .status()
        .map_err(|error| format!("{program} cannot be started: {error}"))?;
    if status.success() { Ok(()) } else { Err(format!("{program} {} exited with {status}", args.join(" "))) }
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
