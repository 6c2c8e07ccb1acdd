//! `pilotage language new NAME`: a Language crate made from the example
//! Language recipe/v1 (`languages/recipe`, the one `docs/writing-a-language.md`
//! walks through), renamed `NAME/v1`, that builds for `wasm32-wasip2`, passes
//! `pilotage language check` and the conformance vectors that apply to it,
//! with its tests and its conformance binding.
//!
//! The template is the example itself, embedded at build time, so the two
//! cannot drift: the example's tests and its conformance run in this
//! repository's `cargo test`, and a crate made from it is built and checked
//! there too (`platform/cli/tests/all/language_authoring.rs`).

use std::path::{Path, PathBuf};

use pilotage_engine::lint::RESERVED_ARGUMENTS;

const LIB: &str = include_str!("../../../languages/recipe/src/lib.rs");
const TESTS: &str = include_str!("../../../languages/recipe/src/tests.rs");
const CORE_GUIDE: &str = include_str!("../../../languages/recipe/guides/core.md");
const BINDING: &str = include_str!("../../../tests/conformance/recipe.json");
/// The workspace's lock file: a new crate resolves the same versions of the
/// guest SDK's dependencies as the bundled Languages.
const LOCK: &str = include_str!("../../../Cargo.lock");

/// Where the guest SDK of the repository this binary was built from lies.
pub const BUILT_SDK: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../guest-sdk");

/// Why a template could not be written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TemplateError {
    /// Occurs when NAME is not a usable Language family.
    #[error(
        "'{0}' cannot name a Language: use 1 to 40 lowercase letters, digits, '-' or '_', starting with a letter, and not a reserved argument name (Part II §3.3, Part III §4.4)"
    )]
    BadName(String),
    /// Occurs when the target folder exists and is not empty.
    #[error("{0} exists and is not empty; choose another folder with --dir")]
    NotEmpty(PathBuf),
    /// Occurs when the guest SDK is not at the given or built-in path.
    #[error("the guest SDK is not at {0}; pass --sdk PATH to the guest-sdk folder of a Pilotage Platform checkout")]
    NoSdk(PathBuf),
    /// Occurs when a file cannot be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// Writes the crate of Language `name/v1` into `dir` (created; it must not
/// exist or be empty), depending on the guest SDK at `sdk`. Returns the
/// files written, relative to `dir`.
///
/// # Errors
/// [`TemplateError`] for a bad name, a non-empty folder, a missing SDK or a
/// failed write.
pub fn write(dir: &Path, name: &str, sdk: &Path) -> Result<Vec<&'static str>, TemplateError> {
    let usable = name.len() <= 40
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
        && !RESERVED_ARGUMENTS.contains(&name);
    if !usable {
        return Err(TemplateError::BadName(name.to_owned()));
    }
    if std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some()) {
        return Err(TemplateError::NotEmpty(dir.to_owned()));
    }
    let sdk = sdk.canonicalize().map_err(|_| TemplateError::NoSdk(sdk.to_owned()))?;
    if !sdk.join("wit").join("language.wit").is_file() {
        return Err(TemplateError::NoSdk(sdk));
    }
    let tool = name.replace('-', "_");
    let rename = |text: &str| {
        text.replace(
            "recipe/v1, the example Language of",
            &format!("{name}/v1, made by `pilotage language new` from the example of"),
        )
        .replace("recipe/v1", &format!("{name}/v1"))
        .replace("\"Recipes: ", &format!("\"{name}/v1: "))
        .replace("program_argument: \"recipe\"", &format!("program_argument: \"{name}\""))
        .replace("\"recipe-", &format!("\"{name}-"))
        .replace("```json recipe", &format!("```json {name}"))
        .replace("_recipe\"", &format!("_{tool}\""))
    };
    let sdk_path = sdk.display().to_string().replace('\\', "/");
    let files: [(&'static str, String); 8] = [
        ("Cargo.toml", manifest(name, &sdk_path)),
        ("Cargo.lock", LOCK.to_owned()),
        ("src/lib.rs", rename(LIB)),
        ("src/tests.rs", rename(TESTS)),
        ("guides/core.md", rename(CORE_GUIDE)),
        ("conformance.json", rename(BINDING)),
        ("README.md", readme(name)),
        (".gitignore", "/target\n/.pilotage\n".to_owned()),
    ];
    for (file, text) in &files {
        let path = dir.join(file);
        let written = path.parent().map_or(Ok(()), std::fs::create_dir_all).and_then(|()| std::fs::write(&path, text));
        written.map_err(|source| TemplateError::Write { path, source })?;
    }
    Ok(files.iter().map(|(file, _)| *file).collect())
}

fn manifest(name: &str, sdk: &str) -> String {
    format!(
        r#"[package]
name = "{name}"
description = "The {name}/v1 Pilotage Language."
version = "0.1.0"
edition = "2024"
publish = false

[lib]
# cdylib: the component; rlib: the native tests.
crate-type = ["cdylib", "rlib"]

[dependencies]
pilotage-guest-sdk = {{ path = "{sdk}" }}
serde_json = {{ version = "1", features = ["preserve_order", "float_roundtrip"] }}

# A workspace of its own, so the crate builds wherever it was created.
[workspace]

# What the bundled Languages use: small and fast components.
[profile.release]
opt-level = 3
lto = true
codegen-units = 1
panic = "abort"
strip = "debuginfo"
"#
    )
}

fn readme(name: &str) -> String {
    format!(
        r#"# {name}/v1

A Pilotage Language, made by `pilotage language new {name}` from recipe/v1, the
example of `docs/writing-a-language.md` in the Pilotage Platform repository. That
tutorial explains every part of `src/lib.rs`.

    cargo test                                              # the Language's own tests
    cargo build --release --target wasm32-wasip2            # the component
    pilotage language check target/wasm32-wasip2/release/{file}.wasm
    pilotage serve --language target/wasm32-wasip2/release/{file}.wasm
    pilotage conformance --endpoint http://127.0.0.1:8480/mcp --language {name}/v1 --binding conformance.json

`serve --language` reloads the component when the file changes: rebuild and
retry from any MCP client. `conformance.json` binds the spec's vectors to this
Language over the demo tenant's catalog; change it with the grammar.
"#,
        file = name.replace('-', "_")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sdk() -> PathBuf {
        PathBuf::from(BUILT_SDK)
    }

    #[test]
    fn names_that_cannot_be_a_family_are_refused() {
        let dir = std::env::temp_dir().join(format!("pilotage-template-{}", std::process::id()));
        for bad in ["", "Greet", "9lives", "a/b", "input", "x".repeat(41).as_str(), "g.r"] {
            assert!(matches!(write(&dir, bad, &sdk()), Err(TemplateError::BadName(_))), "{bad}");
        }
        assert!(matches!(write(&dir, "greet", Path::new("/no/such/sdk")), Err(TemplateError::NoSdk(_))));
        assert!(!dir.exists(), "nothing is written for a refused name");
    }

    #[test]
    fn the_crate_is_the_example_renamed() {
        let dir = std::env::temp_dir().join(format!("pilotage-template-ok-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let files = write(&dir, "greet-me", &sdk()).unwrap();
        assert!(files.contains(&"src/lib.rs") && files.contains(&"conformance.json"));
        let lib = std::fs::read_to_string(dir.join("src/lib.rs")).unwrap();
        assert!(lib.contains("name: \"greet-me/v1\"") && lib.contains("program_argument: \"greet-me\""));
        assert!(!lib.contains("recipe/v1\"") && lib.contains("\"greet-me-core\""));
        assert!(lib.contains("title: \"greet-me/v1: calls to catalog entries"), "the title names the Language");
        let binding = std::fs::read_to_string(dir.join("conformance.json")).unwrap();
        assert!(binding.contains("\"validate_greet_me\"") && binding.contains("\"greet-me/v1\""));
        assert!(!binding.contains("recipe"), "the binding still names recipe");
        assert!(matches!(write(&dir, "again", &sdk()), Err(TemplateError::NotEmpty(_))));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
