//! A Language written in Python: recipe/v1's twin in `languages/recipe-py`,
//! built by componentize-py (docs/writing-a-language.md, "In another
//! source language: Python"). Built here from its sources, it is served
//! from its file as an author's component is (`serve --language`, which
//! lints it on load) and passes the conformance vectors and the
//! completeness gate with the Rust recipe's own binding
//! (`tests/conformance/recipe.json`); and it declares, validates, binds and
//! runs exactly as the Rust component does, program for program.
//!
//! componentize-py is installed on first use, into the checkout only: a
//! virtual environment at `target/recipe-py/venv` (`python3 -m venv`),
//! filled with `pip install -r languages/recipe-py/requirements.txt`
//! (again when the requirements are newer than the install). The component
//! is built into `target/recipe-py/recipe.wasm` when it is missing or older
//! than its sources, its build script, the requirements, the core guide or
//! the WIT. Python 3 with `venv` must be on the machine, and PyPI
//! reachable for the first install; when the install or the build fails
//! the test fails and says why (never a silent skip).
//!
//! The component links 38 core module instances (CPython, its libraries
//! and componentize-py's WASI stubs), over the engine's default of 32 per
//! component; both tests run with the setting an operator serving it sets,
//! `bounds.core_instances_per_component = 64`, and every other bound at the
//! test defaults. A third checks that the default refuses it, and says why.

use std::path::PathBuf;
use std::sync::OnceLock;

use pilotage_engine::{Bounds, Engine};

use crate::recipe_twins::{assert_passes_the_vectors, assert_runs_as_the_rust_recipe, stale};
use crate::support::{engine, repository, run, test_bounds};

/// The virtual environment holding componentize-py.
const VENV: &str = "target/recipe-py/venv";
/// What the build needs, pinned.
const REQUIREMENTS: &str = "languages/recipe-py/requirements.txt";
/// The core instances per component an operator allows to serve the
/// Python recipe (it needs 38; the default is 32).
pub(crate) const CORE_INSTANCES: u32 = 64;

/// The Python of [`VENV`], with componentize-py installed from
/// [`REQUIREMENTS`] when the environment is missing or older than them.
/// A copy of the requirements inside the environment records what was
/// installed and when.
///
/// Once per test process: the tests that build with it run concurrently,
/// and two installs into one environment at once could break it.
pub(crate) fn install_dependencies() -> Result<String, String> {
    static INSTALLED: OnceLock<Result<String, String>> = OnceLock::new();
    INSTALLED.get_or_init(install_once).clone()
}

fn install_once() -> Result<String, String> {
    let venv = repository().join(VENV);
    let python = venv.join("bin/python3");
    let installed = venv.join("installed-requirements.txt");
    if !python.is_file() || stale(&installed, &[REQUIREMENTS]) {
        let failed = |error: String| format!("installing componentize-py failed: {error} (needs Python 3 with venv)");
        if !python.is_file() {
            run("python3", &["-m", "venv", VENV]).map_err(|error| failed(error.to_string()))?;
        }
        let python = python.display().to_string();
        run(&python, &["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r", REQUIREMENTS])
            .map_err(|error| failed(error.to_string()))?;
        std::fs::copy(repository().join(REQUIREMENTS), &installed).map_err(|error| failed(error.to_string()))?;
    }
    Ok(python.display().to_string())
}

/// The Python recipe component, `target/recipe-py/recipe.wasm`, built once
/// per test process when it is missing or older than its inputs.
fn component() -> PathBuf {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let python = install_dependencies()?;
        let output = repository().join("target/recipe-py/recipe.wasm");
        let inputs = [
            "languages/recipe-py/src",
            "languages/recipe-py/build.py",
            REQUIREMENTS,
            "languages/recipe/guides/core.md",
            "guest-sdk/wit",
        ];
        if stale(&output, &inputs) {
            run(&python, &["languages/recipe-py/build.py", "target/recipe-py/recipe.wasm"])
                .map_err(|error| format!("building the Python recipe failed: {error}"))?;
        }
        Ok(output)
    });
    built.clone().unwrap_or_else(|error| panic!("{error}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_recipe_passes_the_vectors_served_from_its_file() {
    let built = tokio::task::spawn_blocking(component).await.unwrap();
    assert_passes_the_vectors(&built, "recipe-py", |bounds| bounds.core_instances_per_component = CORE_INSTANCES).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_recipe_declares_validates_and_runs_as_the_rust_one_does() {
    let built = tokio::task::spawn_blocking(component).await.unwrap();
    let engine = Engine::new(Bounds { core_instances_per_component: CORE_INSTANCES, ..test_bounds() }, None)
        .expect("the engine starts");
    assert_runs_as_the_rust_recipe(&engine, &built, "Python");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_bounds_refuse_the_python_recipe_for_its_core_instances() {
    let built = tokio::task::spawn_blocking(component).await.unwrap();
    let error = engine().load(&std::fs::read(built).unwrap()).map(|_| ()).expect_err("the default refuses it");
    let message = error.to_string();
    assert!(message.contains("38 core module instances"), "{message}");
    assert!(message.contains("maximum of 32"), "{message}");
}
