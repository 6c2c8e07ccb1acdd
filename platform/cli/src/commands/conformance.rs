//! `pilotage conformance`: the specification's vectors run against any
//! Pilotage server, for one Language, through a binding file.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use serde_json::Value;

use crate::output::{print_json, say};

#[derive(Args)]
pub(crate) struct ConformanceArgs {
    /// The server's MCP endpoint (an http URL, or stdio:<command>).
    #[arg(long)]
    endpoint: String,
    /// The Language to test.
    #[arg(long)]
    language: String,
    /// The binding file (see tests/conformance/workflow.json).
    #[arg(long)]
    binding: PathBuf,
    /// conformance-vectors.json (default: in PILOTAGE_SPEC_DIR, else ../shared/spec).
    #[arg(long)]
    vectors: Option<PathBuf>,
    /// pilotage.schema.json (default: beside the vectors).
    #[arg(long)]
    schema: Option<PathBuf>,
    /// A bearer token.
    #[arg(long, env = "PILOTAGE_TOKEN")]
    token: Option<String>,
    /// Print the results as JSON.
    #[arg(long)]
    json: bool,
}

pub(crate) fn spec_file(explicit: Option<&PathBuf>, name: &str, beside: Option<&PathBuf>) -> Result<PathBuf> {
    if let Some(path) = explicit {
        return Ok(path.clone());
    }
    if let Some(dir) = beside.and_then(|path| path.parent()) {
        let candidate = dir.join(name);
        if candidate.is_file() {
            return Ok(candidate);
        }
    }
    let dirs = [std::env::var("PILOTAGE_SPEC_DIR").ok().map(PathBuf::from), Some(PathBuf::from("../shared/spec"))];
    dirs.into_iter()
        .flatten()
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
        .with_context(|| format!("cannot find {name}; pass it explicitly"))
}

pub(crate) async fn conformance(args: ConformanceArgs) -> Result<ExitCode> {
    use pilotage_client::conformance::{Runner, VectorFile, Verdict, binding::Binding, summary};
    let vectors_path = spec_file(args.vectors.as_ref(), "conformance-vectors.json", None)?;
    let schema_path = spec_file(args.schema.as_ref(), "pilotage.schema.json", Some(&vectors_path))?;
    let vectors: VectorFile = serde_json::from_str(&std::fs::read_to_string(&vectors_path)?)?;
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(&schema_path)?)?;
    // `msg` keeps these errors (here and for the runner below) to one line:
    // `main` prints `{:#}`, which would repeat sources their texts include.
    let mut binding = Binding::from_file(&args.binding).map_err(anyhow::Error::msg)?;
    binding.language = args.language.clone();
    let connection = pilotage_client::Connection::open(&args.endpoint, args.token.as_deref()).await?;
    let runner = Runner::new(&connection, &binding, &schema, None).await.map_err(anyhow::Error::msg)?;
    let results = runner.run_all(&vectors).await;
    if args.json {
        print_json(&results)?;
    } else {
        for result in &results {
            match &result.verdict {
                Verdict::Passed => say!("pass  {}", result.id),
                Verdict::Skipped { reason } => say!("skip  {}: {reason}", result.id),
                Verdict::Failed { failures } => say!("FAIL  {}: {}", result.id, failures.join("; ")),
            }
        }
        say!("{}", summary(&results));
    }
    connection.close().await;
    let failed = results.iter().any(|r| matches!(r.verdict, Verdict::Failed { .. }));
    Ok(if failed { ExitCode::from(1) } else { ExitCode::SUCCESS })
}
