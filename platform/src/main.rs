//! The `pilotage` command: the server, the tools for language authors and
//! operators, and the reference client.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand};
use pilotage_platform::catalog::CatalogSnapshot;
use pilotage_platform::engine::{Bounds, Engine};
use pilotage_platform::language::description::ProgramKind;
use pilotage_platform::language::execution::{self, ExecutionRequest, Invoker};
use pilotage_platform::language::lint::{LintSeverity, has_errors, lint};
use pilotage_platform::language::validation::{self, Program};
use pilotage_platform::protocol::catalog::CatalogEntry;
use pilotage_platform::protocol::requests::ExecuteResponse;
use pilotage_platform::protocol::trace::TraceLevel;
use serde_json::Value;

#[derive(Parser)]
#[command(
    name = "pilotage",
    version,
    about = "Pilotage Platform: programs that agents can check before they run and prove after."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Tools for Language authors.
    #[command(subcommand)]
    Language(LanguageCommand),
}

#[derive(Subcommand)]
enum LanguageCommand {
    /// Load a Language component, lint its self-description against the
    /// Pilotage spec, and optionally validate (and execute) a program.
    Check(CheckArgs),
}

#[derive(Args)]
struct CheckArgs {
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
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("PILOTAGE_LOG").unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Language(LanguageCommand::Check(args)) => language_check(args),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(2)
        }
    }
}

/// An invoker that answers from the catalog file's `example_output`s.
struct ExampleInvoker {
    examples: std::collections::BTreeMap<String, Value>,
}

impl Invoker for ExampleInvoker {
    fn invoke(&self, entry: &CatalogEntry, _input: &Value) -> Result<Value, String> {
        self.examples
            .get(&entry.id)
            .cloned()
            .ok_or_else(|| format!("the catalog file gives no example_output for '{}'", entry.id))
    }
}

fn read_json(path: &PathBuf) -> Result<Value> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))
}

fn language_check(args: CheckArgs) -> Result<ExitCode> {
    let engine = Engine::new(Bounds::default(), None)?;
    let component = engine.load_file(&args.component)?;
    let description = component.description();
    println!("Language {} ({})", description.name, description.title);
    println!("  component sha256 {}", component.sha256());
    println!(
        "  programs: {:?}, argument '{}', locator {:?}, execution {:?}, trace ceiling {}",
        description.program_kind,
        description.program_argument,
        description.locator,
        description.execution,
        description.trace_ceiling.as_str()
    );
    println!(
        "  features: plan={} catalog={} execute={} test_run={} promotion={}",
        description.features.plan,
        description.features.catalog,
        description.features.execute,
        description.features.test_run,
        description.features.promotion
    );
    println!(
        "  {} diagnostic codes, {} run statuses, {} guides:",
        description.diagnostic_codes.len(),
        description.run_statuses.len(),
        description.guides.len()
    );
    for guide in &description.guides {
        println!(
            "    {} ({:?}, {} bytes, topics {:?})",
            guide.guide.id, guide.guide.level, guide.guide.size_bytes, guide.guide.topics
        );
    }
    let findings = lint(description);
    if findings.is_empty() {
        println!("Lint: no findings.");
    } else {
        println!("Lint:");
        for finding in &findings {
            let severity = match finding.severity {
                LintSeverity::Error => "error",
                LintSeverity::Warning => "warning",
            };
            println!("  {severity} [{}] {}", finding.rule, finding.message);
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
        let validated = validation::validate(&component, &program, None, &catalog)
            .map_err(|failure| anyhow::anyhow!("{failure}"))?;
        println!("ValidateResponse:");
        println!("{}", serde_json::to_string_pretty(&validated.response)?);
        if args.execute {
            if !validated.response.valid {
                println!("Not executed: the program is invalid.");
            } else {
                let input = args.input.as_ref().map(read_json).transpose()?;
                let findings =
                    validation::bind_input(&component, &program, input.as_ref()).map_err(|f| anyhow::anyhow!("{f}"))?;
                if !findings.is_empty() {
                    println!("Not executed: input_binding findings:");
                    println!("{}", serde_json::to_string_pretty(&findings)?);
                } else {
                    let run_id = "run_check".to_owned();
                    let execution = execution::execute(
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
                            run_id: &run_id,
                        },
                    );
                    let trace = pilotage_platform::protocol::trace::at_level(
                        &execution.trace,
                        description.trace_ceiling.min(TraceLevel::Full),
                    );
                    let response = ExecuteResponse {
                        run_id,
                        outcome: execution.outcome,
                        output: execution.output,
                        diagnostics: None,
                        trace,
                    };
                    println!("ExecuteResponse:");
                    println!("{}", serde_json::to_string_pretty(&response)?);
                }
            }
        }
    }
    Ok(if lint_failed { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

/// Entries usable by `language` from a catalog file, and their example
/// outputs.
fn catalog_file(
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
