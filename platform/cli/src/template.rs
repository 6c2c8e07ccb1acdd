//! `pilotage language new NAME [--lang rust|js|python]`: a Language made from the
//! example Language recipe/v1, renamed `NAME/v1`, that builds into a
//! component, passes `pilotage language check` and the conformance vectors
//! that apply to it, with its conformance binding. In Rust (the default) it
//! is a crate made from `languages/recipe` (the one
//! `docs/writing-a-language.md` walks through), with its tests; in
//! JavaScript, a package made from its twin `languages/recipe-js`, built by
//! componentize-js; in Python, one made from `languages/recipe-py`, built by
//! componentize-py.
//!
//! The template is the example itself, embedded at build time, so the two
//! cannot drift: the examples' tests and conformance run in this
//! repository's `cargo test`, and a Language made from each is built and
//! checked there too (`platform/cli/tests/all/language_authoring.rs`).

use std::path::{Path, PathBuf};

use pilotage_engine::lint::RESERVED_ARGUMENTS;

const LIB: &str = include_str!("../../../languages/recipe/src/lib.rs");
const TESTS: &str = include_str!("../../../languages/recipe/src/tests.rs");
const CORE_GUIDE: &str = include_str!("../../../languages/recipe/guides/core.md");
const BINDING: &str = include_str!("../../../tests/conformance/recipe.json");
const JS_SOURCE: &str = include_str!("../../../languages/recipe-js/src/recipe.js");
const JS_BUILD: &str = include_str!("../../../languages/recipe-js/build.mjs");
const JS_PACKAGE: &str = include_str!("../../../languages/recipe-js/package.json");
const JS_LOCK: &str = include_str!("../../../languages/recipe-js/package-lock.json");
const PY_SOURCE: &str = include_str!("../../../languages/recipe-py/src/recipe.py");
const PY_BUILD: &str = include_str!("../../../languages/recipe-py/build.py");
const PY_REQUIREMENTS: &str = include_str!("../../../languages/recipe-py/requirements.txt");
/// The recipe's helper modules, ported from the guest SDK: copied as they are.
const PY_HELPERS: [(&str, &str); 4] = [
    ("catalog_calls.py", include_str!("../../../languages/recipe-py/src/catalog_calls.py")),
    ("closed_sets.py", include_str!("../../../languages/recipe-py/src/closed_sets.py")),
    ("hints.py", include_str!("../../../languages/recipe-py/src/hints.py")),
    ("json_text.py", include_str!("../../../languages/recipe-py/src/json_text.py")),
];

/// What a new Language is written in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum SourceLanguage {
    /// A Rust crate on the guest SDK, built for `wasm32-wasip2` by cargo.
    #[default]
    Rust,
    /// A JavaScript package built by componentize-js (npm).
    Js,
    /// A Python package built by componentize-py (PyPI).
    Python,
}
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

/// Writes Language `name/v1` in `source` into `dir` (created; it must not
/// exist or be empty), depending on the guest SDK at `sdk` (its crate for
/// Rust, its WIT for every source language). Returns the files written,
/// relative to `dir`.
///
/// # Errors
/// [`TemplateError`] for a bad name, a non-empty folder, a missing SDK or a
/// failed write.
pub fn write(dir: &Path, name: &str, sdk: &Path, source: SourceLanguage) -> Result<Vec<String>, TemplateError> {
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
    let mut files: Vec<(String, String)> =
        vec![("guides/core.md".into(), rename(CORE_GUIDE)), ("conformance.json".into(), rename(BINDING))];
    match source {
        SourceLanguage::Rust => files.extend([
            ("Cargo.toml".into(), manifest(name, &sdk_path)),
            ("Cargo.lock".into(), LOCK.to_owned()),
            ("src/lib.rs".into(), rename(LIB)),
            ("src/tests.rs".into(), rename(TESTS)),
            ("README.md".into(), readme(name)),
            (".gitignore".into(), "/target\n/.pilotage\n".to_owned()),
        ]),
        SourceLanguage::Js => files.extend(javascript(name, &sdk_path)),
        SourceLanguage::Python => files.extend(python(name, &sdk_path)),
    }
    for (file, text) in &files {
        let path = dir.join(file);
        let written = path.parent().map_or(Ok(()), std::fs::create_dir_all).and_then(|()| std::fs::write(&path, text));
        written.map_err(|source| TemplateError::Write { path, source })?;
    }
    Ok(files.into_iter().map(|(file, _)| file).collect())
}

/// Everything before the first line that is not a `//` comment: the
/// example's own header, which speaks of the example.
fn without_header(text: &str) -> &str {
    let body = text.lines().take_while(|line| line.starts_with("//")).map(|line| line.len() + 1).sum::<usize>();
    text.get(body..).unwrap_or(text).trim_start_matches('\n')
}

/// The JavaScript package of `name/v1`: recipe-js renamed, its build
/// reading the package's own core guide and the guest SDK's WIT.
fn javascript(name: &str, sdk: &str) -> Vec<(String, String)> {
    let source = without_header(JS_SOURCE)
        .replace("recipe/v1", &format!("{name}/v1"))
        .replace("'Recipes: ", &format!("'{name}/v1: "))
        .replace("programArgument: 'recipe'", &format!("programArgument: '{name}'"))
        .replace("'recipe-", &format!("'{name}-"))
        .replace("from languages/recipe/guides/core.md", "from guides/core.md");
    let source = format!(
        "// {name}/v1, made by `pilotage language new --lang js` from the JavaScript\n\
         // twin of the example Language (docs/writing-a-language.md, \"In another\n\
         // source language: JavaScript\"). build.mjs makes it a component with\n\
         // componentize-js.\n\n{source}"
    );
    let wit = serde_json::to_string(&format!("{sdk}/wit")).unwrap_or_default();
    let build = without_header(JS_BUILD)
        .replace("join(here, '../recipe/guides/core.md')", "join(here, 'guides/core.md')")
        .replace("join(here, '../../guest-sdk/wit')", &wit)
        .replace("'recipe.js'", &format!("'{name}.js'"))
        .replace("'recipe-js-'", &format!("'{name}-js-'"))
        .replace("from languages/recipe/guides/core.md", "from guides/core.md");
    let build = format!(
        "// Builds {name}/v1 (src/{name}.js) into a component of the WIT world\n\
         // `language` (the guest SDK's, at {sdk}/wit) with componentize-js:\n\
         //\n\
         //     node build.mjs OUT.wasm\n\n{build}"
    );
    let package = JS_PACKAGE
        .replace("\"recipe-js\"", &format!("\"{name}\""))
        .replace("../../target/recipe-js/recipe.wasm", &format!("{}.wasm", name.replace('-', "_")))
        .lines()
        .filter(|line| !line.trim_start().starts_with("\"description\""))
        .collect::<Vec<_>>()
        .join("\n")
        + "\n";
    let lock = JS_LOCK.replace("\"recipe-js\"", &format!("\"{name}\""));
    vec![
        (format!("src/{name}.js"), source),
        ("build.mjs".into(), build),
        ("package.json".into(), package),
        ("package-lock.json".into(), lock),
        ("README.md".into(), readme_js(name)),
        (".gitignore".into(), "/node_modules\n/*.wasm\n/.pilotage\n".to_owned()),
    ]
}

/// Everything after the example's own docstring (which speaks of the
/// example): the text after the first closing triple quote.
fn without_docstring(text: &str) -> &str {
    text.strip_prefix("\"\"\"")
        .and_then(|rest| rest.split_once("\"\"\"\n"))
        .map_or(text, |(_, body)| body)
        .trim_start_matches('\n')
}

/// The Python package of `name/v1`: recipe-py renamed (its main module
/// named after the Language, as componentize-py takes a module name), its
/// build reading the package's own core guide and the guest SDK's WIT.
fn python(name: &str, sdk: &str) -> Vec<(String, String)> {
    let module = name.replace('-', "_");
    let source = without_docstring(PY_SOURCE)
        .replace("recipe/v1", &format!("{name}/v1"))
        .replace("\"Recipes: ", &format!("\"{name}/v1: "))
        .replace("program_argument=\"recipe\"", &format!("program_argument=\"{name}\""))
        .replace("\"recipe-", &format!("\"{name}-"))
        .replace("from languages/recipe/guides/core.md", "from guides/core.md");
    let source = format!(
        "\"\"\"{name}/v1, made by `pilotage language new --lang python` from the Python twin\n\
         of the example Language (docs/writing-a-language.md). build.py makes it a\n\
         component with componentize-py.\n\"\"\"\n\n{source}"
    );
    let wit = serde_json::to_string(&format!("{sdk}/wit")).unwrap_or_default();
    let build = without_docstring(PY_BUILD)
        .replace("HERE / \"../recipe/guides/core.md\"", "HERE / \"guides/core.md\"")
        .replace("str(HERE / \"../../guest-sdk/wit\")", &wit)
        .replace("prefix=\"recipe-py-\"", &format!("prefix=\"{module}-py-\""))
        .replace("            \"recipe\",\n        ]", &format!("            \"{module}\",\n        ]"))
        .replace("from languages/recipe/guides/core.md", "from guides/core.md");
    let build = format!(
        "\"\"\"Builds {name}/v1 (src/{module}.py and the helper modules beside it) into a\n\
         component of the WIT world `language` (the guest SDK's, at {sdk}/wit) with\n\
         componentize-py, run by the Python that has it installed (requirements.txt):\n\n    \
         python build.py OUT.wasm\n\"\"\"\n\n{build}"
    );
    let mut files = vec![
        (format!("src/{module}.py"), source),
        ("build.py".into(), build),
        ("requirements.txt".into(), PY_REQUIREMENTS.to_owned()),
        ("README.md".into(), readme_py(name)),
        (".gitignore".into(), "/.venv\n/*.wasm\n/.pilotage\n__pycache__/\n".to_owned()),
    ];
    files.extend(PY_HELPERS.iter().map(|(file, text)| (format!("src/{file}"), (*text).to_owned())));
    files
}

fn readme_py(name: &str) -> String {
    format!(
        r#"# {name}/v1

A Pilotage Language in Python, made by `pilotage language new {name} --lang python`
from the Python twin of recipe/v1, the example of `docs/writing-a-language.md` in
the Pilotage Platform repository ("In another source language: Python").

    python3 -m venv .venv && .venv/bin/pip install -r requirements.txt   # componentize-py
    .venv/bin/python build.py {file}.wasm                                  # the component
    pilotage language check --core-instances-per-component 64 {file}.wasm
    pilotage serve --core-instances-per-component 64 --language {file}.wasm
    pilotage conformance --endpoint http://127.0.0.1:8480/mcp --language {name}/v1 --binding conformance.json

The component embeds CPython, which links 38 core module instances; the
platform allows 32 per component unless the operator raises
`bounds.core_instances_per_component` (the flag above, or the `--config` file),
as a server hosting this Language must. `src/{file}.py` is the Language; the modules beside it port what the guest SDK
gives a Rust author (closed sets and their guide, close-match hints, argument
checks, serde_json's way with JSON text). `serve --language` reloads the
component when the file changes: rebuild and retry from any MCP client.
"#,
        file = name.replace('-', "_")
    )
}

fn readme_js(name: &str) -> String {
    format!(
        r#"# {name}/v1

A Pilotage Language in JavaScript, made by `pilotage language new {name} --lang js`
from the JavaScript twin of recipe/v1, the example of `docs/writing-a-language.md`
in the Pilotage Platform repository ("In another source language: JavaScript").

    npm ci                                                  # componentize-js, into node_modules
    node build.mjs {file}.wasm                              # the component
    pilotage language check {file}.wasm
    pilotage serve --language {file}.wasm
    pilotage conformance --endpoint http://127.0.0.1:8480/mcp --language {name}/v1 --binding conformance.json

`serve --language` reloads the component when the file changes: rebuild and
retry from any MCP client. componentize-js builds are not byte-for-byte
reproducible; the server reuses the compiled functions a rebuild shares with
the version serving, so a reload takes a fraction of the first compilation.
"#,
        file = name.replace('-', "_")
    )
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
            for source in [SourceLanguage::Rust, SourceLanguage::Js, SourceLanguage::Python] {
                assert!(matches!(write(&dir, bad, &sdk(), source), Err(TemplateError::BadName(_))), "{bad}");
            }
        }
        let nowhere = Path::new("/no/such/sdk");
        assert!(matches!(write(&dir, "greet", nowhere, SourceLanguage::Rust), Err(TemplateError::NoSdk(_))));
        assert!(!dir.exists(), "nothing is written for a refused name");
    }

    #[test]
    fn the_crate_is_the_example_renamed() {
        let dir = std::env::temp_dir().join(format!("pilotage-template-ok-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let files = write(&dir, "greet-me", &sdk(), SourceLanguage::Rust).unwrap();
        assert!(files.iter().any(|f| f == "src/lib.rs") && files.iter().any(|f| f == "conformance.json"));
        let lib = std::fs::read_to_string(dir.join("src/lib.rs")).unwrap();
        assert!(lib.contains("name: \"greet-me/v1\"") && lib.contains("program_argument: \"greet-me\""));
        assert!(!lib.contains("recipe/v1\"") && lib.contains("\"greet-me-core\""));
        assert!(lib.contains("title: \"greet-me/v1: calls to catalog entries"), "the title names the Language");
        let binding = std::fs::read_to_string(dir.join("conformance.json")).unwrap();
        assert!(binding.contains("\"validate_greet_me\"") && binding.contains("\"greet-me/v1\""));
        assert!(!binding.contains("recipe"), "the binding still names recipe");
        assert!(matches!(write(&dir, "again", &sdk(), SourceLanguage::Rust), Err(TemplateError::NotEmpty(_))));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_javascript_package_is_the_twin_renamed_and_built_from_its_own_files() {
        let dir = std::env::temp_dir().join(format!("pilotage-template-js-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let files = write(&dir, "greet-me", &sdk(), SourceLanguage::Js).unwrap();
        for file in ["src/greet-me.js", "build.mjs", "package.json", "package-lock.json", "guides/core.md"] {
            assert!(files.iter().any(|f| f == file), "{file} in {files:?}");
        }
        let source = std::fs::read_to_string(dir.join("src/greet-me.js")).unwrap();
        assert!(source.contains("name: 'greet-me/v1'") && source.contains("programArgument: 'greet-me'"));
        assert!(source.contains("'greet-me-core'") && source.contains("title: 'greet-me/v1: calls to catalog"));
        assert!(!source.contains("recipe/v1") && !source.contains("'recipe"), "the source still names recipe");
        let build = std::fs::read_to_string(dir.join("build.mjs")).unwrap();
        assert!(build.contains("join(here, 'guides/core.md')") && build.contains("'greet-me.js'"));
        let wit = serde_json::to_string(&format!("{}/wit", sdk().canonicalize().unwrap().display())).unwrap();
        assert!(build.contains(&wit), "the build reads the SDK's WIT: {wit}");
        assert!(!build.contains("../recipe") && !build.contains("guest-sdk/wit')"), "no path into the example");
        let package: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("package.json")).unwrap()).unwrap();
        assert_eq!(
            (package["name"].as_str(), package["scripts"]["build"].as_str()),
            (Some("greet-me"), Some("node build.mjs greet_me.wasm"))
        );
        let lock: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("package-lock.json")).unwrap()).unwrap();
        assert_eq!(
            (lock["name"].as_str(), lock["packages"][""]["name"].as_str()),
            (Some("greet-me"), Some("greet-me"))
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_python_package_is_the_twin_renamed_and_built_from_its_own_files() {
        let dir = std::env::temp_dir().join(format!("pilotage-template-py-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let files = write(&dir, "greet-me", &sdk(), SourceLanguage::Python).unwrap();
        for file in ["src/greet_me.py", "src/closed_sets.py", "build.py", "requirements.txt", "guides/core.md"] {
            assert!(files.iter().any(|f| f == file), "{file} in {files:?}");
        }
        let source = std::fs::read_to_string(dir.join("src/greet_me.py")).unwrap();
        assert!(source.contains("name=\"greet-me/v1\"") && source.contains("program_argument=\"greet-me\""));
        assert!(source.contains("\"greet-me-core\"") && source.contains("title=\"greet-me/v1: calls to catalog"));
        assert!(!source.contains("recipe/v1") && !source.contains("\"recipe"), "the source still names recipe");
        let build = std::fs::read_to_string(dir.join("build.py")).unwrap();
        assert!(build.contains("HERE / \"guides/core.md\"") && build.contains("            \"greet_me\",\n        ]"));
        let wit = serde_json::to_string(&format!("{}/wit", sdk().canonicalize().unwrap().display())).unwrap();
        assert!(build.contains(&wit), "the build reads the SDK's WIT: {wit}");
        assert!(!build.contains("../recipe") && !build.contains("\"recipe\""), "no path into the example");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
