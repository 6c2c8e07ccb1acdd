//! The tools of Language authors: `pilotage language new` (a crate from the
//! example), `check` (load, lint, validate and execute a program offline)
//! and `publish` (an upload through the admin API).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use futures::executor::block_on;
use pilotage_engine::catalog::CatalogSnapshot;
use pilotage_engine::description::ProgramKind;
use pilotage_engine::effects::{InvokeError, Invoker};
use pilotage_engine::execution::{self, ExecutionRequest};
use pilotage_engine::lint::{has_errors, lint};
use pilotage_engine::validation::{self, Program};
use pilotage_engine::{Bounds, Engine};
use pilotage_protocol::catalog::CatalogEntry;
use pilotage_protocol::requests::ExecuteResponse;
use pilotage_protocol::trace::TraceLevel;
use serde_json::Value;

use super::admin::read_json;
use crate::output::say;

#[derive(Subcommand)]
pub(crate) enum LanguageCommand {
    /// Create a new Language NAME/v1 from the example recipe/v1
    /// (docs/writing-a-language.md): it builds into a component, passes
    /// `language check`, and carries its conformance binding (and, in Rust,
    /// its tests).
    New {
        /// The Language family: lowercase letters, digits, '-' or '_'.
        name: String,
        /// What it is written in: a Rust crate on the guest SDK, a
        /// JavaScript package built by componentize-js, or a Python one
        /// built by componentize-py.
        #[arg(long = "lang", value_enum, default_value_t)]
        lang: crate::template::SourceLanguage,
        /// The folder to create (default: ./NAME).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// The guest-sdk folder of a Pilotage Platform checkout (default:
        /// the one this binary was built from).
        #[arg(long)]
        sdk: Option<PathBuf>,
    },
    /// Load a Language component, lint its self-description against the
    /// Pilotage spec, and optionally validate (and execute) a program.
    Check(CheckArgs),
    /// Upload a Language component for a tenant through the admin API.
    Publish {
        /// The tenant.
        tenant: String,
        /// The component file.
        component: PathBuf,
        /// The server's base URL.
        #[arg(long, env = "PILOTAGE_SERVER", default_value = "http://127.0.0.1:8480")]
        server: String,
        /// The operator token.
        #[arg(long, env = "PILOTAGE_ADMIN_TOKEN")]
        admin_token: Option<String>,
    },
}

#[derive(Args)]
pub(crate) struct CheckArgs {
    /// The component (a wasm32-wasip2 `.wasm` file).
    component: PathBuf,
    /// Catalog entries: a JSON array, or an object with `entries`. An
    /// entry's `example_output` answers invocations under `--execute`.
    #[arg(long)]
    catalog: Option<PathBuf>,
    /// A program to validate: JSON for JSON Languages, text otherwise.
    #[arg(long)]
    program: Option<PathBuf>,
    /// The Run's input (a JSON file).
    #[arg(long)]
    input: Option<PathBuf>,
    /// Execute the program when it is valid.
    #[arg(long, requires = "program")]
    execute: bool,
    /// Core module instances the component may link, as the server's
    /// `bounds.core_instances_per_component` (a Python Language built by
    /// componentize-py links 38; the default allows 32).
    #[arg(long, default_value_t = Bounds::default().core_instances_per_component)]
    core_instances_per_component: u32,
}

/// `pilotage language new`: writes the crate and says what to run next.
pub(crate) fn language_new(
    name: &str,
    dir: Option<PathBuf>,
    sdk: Option<PathBuf>,
    lang: crate::template::SourceLanguage,
) -> Result<ExitCode> {
    use crate::template::{self, SourceLanguage};
    let dir = dir.unwrap_or_else(|| PathBuf::from(name));
    let sdk = sdk.unwrap_or_else(|| PathBuf::from(template::BUILT_SDK));
    let files = template::write(&dir, name, &sdk, lang)?;
    println!("created {name}/v1 in {}: {}", dir.display(), files.join(", "));
    let file = name.replace('-', "_");
    println!("next, in {}:", dir.display());
    let component = match lang {
        SourceLanguage::Rust => {
            println!("  cargo test");
            println!("  cargo build --release --target wasm32-wasip2");
            format!("target/wasm32-wasip2/release/{file}.wasm")
        }
        SourceLanguage::Js => {
            println!("  npm ci");
            println!("  node build.mjs {file}.wasm");
            format!("{file}.wasm")
        }
        SourceLanguage::Python => {
            println!("  python3 -m venv .venv && .venv/bin/pip install -r requirements.txt");
            println!("  .venv/bin/python build.py {file}.wasm");
            // CPython with componentize-py's WASI stubs links 38 core
            // instances; the default bound is 32 (docs/writing-a-language.md).
            println!("  pilotage language check --core-instances-per-component 64 {file}.wasm");
            println!("  pilotage serve --core-instances-per-component 64 --language {file}.wasm");
            return Ok(ExitCode::SUCCESS);
        }
    };
    println!("  pilotage language check {component}");
    println!("  pilotage serve --language {component}");
    Ok(ExitCode::SUCCESS)
}

/// An invoker that answers from the catalog file's `example_output`s.
pub(crate) struct ExampleInvoker {
    examples: std::collections::BTreeMap<String, Value>,
}

#[async_trait::async_trait]
impl Invoker for ExampleInvoker {
    async fn invoke(&self, entry: &CatalogEntry, _input: &Value) -> Result<Value, InvokeError> {
        self.examples.get(&entry.id).cloned().ok_or_else(|| {
            InvokeError::Unavailable(format!("the catalog file gives no example_output for '{}'", entry.id))
        })
    }
}

pub(crate) fn language_check(args: CheckArgs) -> Result<ExitCode> {
    let engine = Engine::new(
        Bounds { core_instances_per_component: args.core_instances_per_component, ..Bounds::default() },
        None,
    )?;
    let component = engine.load_file(&args.component)?;
    let description = component.description();
    say!("Language {} ({})", description.name, description.title);
    say!("  component sha256 {}", component.sha256());
    say!(
        "  programs: {:?}, argument '{}', locator {:?}, execution {:?}, trace ceiling {}",
        description.program_kind,
        description.program_argument,
        description.locator,
        description.execution,
        description.trace_ceiling.as_str()
    );
    say!(
        "  features: plan={} catalog={} execute={} test_run={} promotion={}",
        description.features.plan,
        description.features.catalog,
        description.features.execute,
        description.features.test_run,
        description.features.promotion
    );
    say!(
        "  {} diagnostic codes, {} run statuses, {} guides:",
        description.diagnostic_codes.len(),
        description.run_statuses.len(),
        description.guides.len()
    );
    for guide in &description.guides {
        say!(
            "    {} ({:?}, {} bytes, topics {:?})",
            guide.guide.id,
            guide.guide.level,
            guide.guide.size_bytes,
            guide.guide.topics
        );
    }
    let findings = lint(description);
    if findings.is_empty() {
        say!("Lint: no findings.");
    } else {
        say!("Lint:");
        for finding in &findings {
            say!("  {finding}");
        }
    }
    let lint_failed = has_errors(&findings);

    if let Some(program_path) = &args.program {
        let (entries, examples) = match &args.catalog {
            Some(path) => catalog_file(&read_json(path)?, &description.name)?,
            None => (Vec::new(), Default::default()),
        };
        let catalog = CatalogSnapshot::hashed(entries);
        let program_value = match description.program_kind {
            ProgramKind::Json => read_json(program_path)?,
            ProgramKind::Text => Value::String(
                std::fs::read_to_string(program_path)
                    .with_context(|| format!("cannot read {}", program_path.display()))?,
            ),
        };
        let bounds = engine.bounds();
        let program = Program::from_argument(
            description.program_kind,
            &program_value,
            bounds.program_bytes,
            bounds.nesting_depth,
        )
        .map_err(|failure| anyhow::anyhow!("bounds_exceeded: {failure}"))?;
        // The engine's calls are async; here nothing else runs meanwhile.
        let validated = block_on(validation::validate(&component, &program, None, &catalog))
            .map_err(|failure| anyhow::anyhow!("{failure}"))?;
        say!("ValidateResponse:");
        say!("{}", serde_json::to_string_pretty(&validated.response)?);
        if args.execute {
            if !validated.response.valid {
                say!("Not executed: the program is invalid.");
            } else {
                let input = args.input.as_ref().map(read_json).transpose()?;
                let findings = block_on(validation::bind_input(&component, &program, input.as_ref()))
                    .map_err(|f| anyhow::anyhow!("{f}"))?;
                if !findings.is_empty() {
                    say!("Not executed: input_binding findings:");
                    say!("{}", serde_json::to_string_pretty(&findings)?);
                } else {
                    let run_id = "run_check".to_owned();
                    let execution = block_on(execution::execute(
                        &component,
                        ExecutionRequest {
                            program: &program,
                            input: input.as_ref(),
                            context: None,
                            plan: validated.plan.as_ref(),
                            references: &validated.references,
                            catalog,
                            invoker: Arc::new(ExampleInvoker { examples }),
                            statements: &validated.statements,
                            data_source: None,
                            test_run: false,
                            deploy: false,
                            clock_ms: None,
                            run_id: &run_id,
                        },
                    ));
                    let trace = pilotage_protocol::trace::at_level(
                        &execution.trace,
                        description.trace_ceiling.min(TraceLevel::Full),
                    );
                    let response = ExecuteResponse {
                        run_id,
                        outcome: execution.outcome,
                        output: execution.output,
                        diagnostics: None,
                        trace,
                        retry_after_ms: None,
                        assertions: None,
                    };
                    say!("ExecuteResponse:");
                    say!("{}", serde_json::to_string_pretty(&response)?);
                }
            }
        }
    }
    Ok(if lint_failed { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

/// Entries usable by `language` from a catalog file, and their example
/// outputs.
pub(crate) fn catalog_file(
    value: &Value,
    language: &str,
) -> Result<(Vec<CatalogEntry>, std::collections::BTreeMap<String, Value>)> {
    let items = match value {
        Value::Array(items) => items.clone(),
        Value::Object(map) => match map.get("entries") {
            Some(Value::Array(items)) => items.clone(),
            _ => bail!("a catalog file is a JSON array of entries or an object with 'entries'"),
        },
        _ => bail!("a catalog file is a JSON array of entries or an object with 'entries'"),
    };
    let mut entries = Vec::new();
    let mut examples = std::collections::BTreeMap::new();
    for (index, item) in items.into_iter().enumerate() {
        let entry: CatalogEntry = serde_json::from_value(item.clone())
            .with_context(|| format!("catalog entry {index} is not a catalog entry"))?;
        if !entry.usable_by(language) {
            continue;
        }
        if let Some(example) = item.get("example_output") {
            examples.insert(entry.id.clone(), example.clone());
        }
        entries.push(entry);
    }
    Ok((entries, examples))
}
