//! A Language written in JavaScript: recipe/v1's twin in
//! `languages/recipe-js`, built by componentize-js (docs/writing-a-language.md,
//! "In another source language: JavaScript"). Built here from its sources,
//! it is served from its file as an author's component is (`serve
//! --language`, which lints it on load) and passes the conformance vectors
//! and the completeness gate with the Rust recipe's own binding
//! (`tests/conformance/recipe.json`); and it declares, validates, binds and
//! runs exactly as the Rust component does, program for program.
//!
//! The build's npm dependencies are installed on first use, into the
//! checkout only: `npm ci` from `languages/recipe-js/package-lock.json`
//! (again when the lock file is newer than the install). The component is
//! built into `target/recipe-js/recipe.wasm` when it is missing or older
//! than its sources, its build script, the core guide, the WIT or the lock
//! file. Node.js and npm must be on the machine; when the install or the
//! build fails the test fails and says why (never a silent skip).

use std::path::PathBuf;
use std::sync::OnceLock;

use crate::recipe_twins::{assert_passes_the_vectors, assert_runs_as_the_rust_recipe, modified, stale};
use crate::support::{engine, repository, run};

/// componentize-js and its dependencies, installed with `npm ci` when
/// missing or older than the lock file.
fn install_dependencies() -> Result<(), String> {
    let folder = repository().join("languages/recipe-js");
    let stale = match (
        modified(&folder.join("node_modules/.package-lock.json")),
        modified(&folder.join("package-lock.json")),
    ) {
        (Some(install), Some(lock)) => lock > install,
        _ => true,
    };
    let componentize = folder.join("node_modules/@bytecodealliance/componentize-js/package.json");
    if stale || !componentize.is_file() {
        run("npm", &["ci", "--prefix", "languages/recipe-js", "--no-audit", "--no-fund"])
            .map_err(|error| format!("installing componentize-js failed: {error} (needs Node.js and npm)"))?;
    }
    Ok(())
}

/// The JavaScript recipe component, `target/recipe-js/recipe.wasm`, built
/// once per test process when it is missing or older than its inputs.
fn component() -> PathBuf {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        install_dependencies()?;
        let output = repository().join("target/recipe-js/recipe.wasm");
        let inputs = [
            "languages/recipe-js/src",
            "languages/recipe-js/build.mjs",
            "languages/recipe-js/package-lock.json",
            "languages/recipe/guides/core.md",
            "guest-sdk/wit",
        ];
        if stale(&output, &inputs) {
            run("node", &["languages/recipe-js/build.mjs", "target/recipe-js/recipe.wasm"])
                .map_err(|error| format!("building the JavaScript recipe failed: {error}"))?;
        }
        Ok(output)
    });
    built.clone().unwrap_or_else(|error| panic!("{error}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_javascript_recipe_passes_the_vectors_served_from_its_file() {
    let built = tokio::task::spawn_blocking(component).await.unwrap();
    assert_passes_the_vectors(&built, "recipe-js", |_| {}).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_javascript_recipe_declares_validates_and_runs_as_the_rust_one_does() {
    let built = tokio::task::spawn_blocking(component).await.unwrap();
    assert_runs_as_the_rust_recipe(engine(), &built, "JavaScript");
}
