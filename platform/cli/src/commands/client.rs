//! `pilotage client`: the reference Pilotage client driving any Pilotage
//! server (tools, guides, catalog, validate, run with the Host gate, trace).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use serde_json::Value;

use crate::output::{print_json, say};

#[derive(Args)]
pub(crate) struct ClientArgs {
    /// An OAuth bearer token for the server.
    #[arg(long, env = "PILOTAGE_TOKEN", global = true)]
    token: Option<String>,
    #[command(subcommand)]
    command: ClientCommand,
}

#[derive(Subcommand)]
pub(crate) enum ClientCommand {
    /// List the server's tools and its manifest.
    Tools {
        /// The server's MCP endpoint, e.g. http://127.0.0.1:8480/mcp, or
        /// a command to speak MCP with over stdio, e.g.
        /// "stdio:pilotage serve --stdio --demo".
        url: String,
    },
    /// Show a Language's guide index, or one guide.
    Guide {
        /// The server's MCP endpoint (an http URL, or stdio:<command>).
        url: String,
        /// The Language, e.g. workflow/v1.
        language: String,
        /// A guide id; omit for the index.
        id: Option<String>,
    },
    /// List (or search) a Language's catalog.
    Catalog {
        /// The server's MCP endpoint (an http URL, or stdio:<command>).
        url: String,
        /// The Language.
        language: String,
        /// Free-text search.
        query: Option<String>,
    },
    /// Validate a program file.
    Validate(ProgramArgs),
    /// Run a program file through the standard loop: validate, the Host
    /// risk gate, execute, print the trace.
    Run(ProgramArgs),
    /// Fetch a stored trace by run_id.
    Trace {
        /// The server's MCP endpoint (an http URL, or stdio:<command>).
        url: String,
        /// The run's id.
        run_id: String,
        /// The Language whose trace tool to use (default: each that has one,
        /// in turn, until one holds the run).
        #[arg(long)]
        language: Option<String>,
        /// summary or full.
        #[arg(long)]
        trace_level: Option<String>,
        /// A question about the Run, answered in `narration` from the
        /// recorded facts (where the Language declares
        /// trace_fetch.narrate; at most 2000 characters).
        #[arg(long)]
        question: Option<String>,
    },
}

#[derive(Args)]
pub(crate) struct ProgramArgs {
    /// The server's MCP endpoint (an http URL, or stdio:<command>).
    url: String,
    /// The Language.
    language: String,
    /// The program file: JSON for JSON Languages, text otherwise.
    program: PathBuf,
    /// The Run's input: a JSON file, or JSON text.
    #[arg(long)]
    input: Option<String>,
    /// Approvals the Host may grant without asking: none, all, or a comma
    /// list of destructive, open-world, unknown. Without it, an interactive
    /// terminal is asked and anything else is refused.
    #[arg(long)]
    approve: Option<String>,
    /// Keep the Run for the trace tool (store: true).
    #[arg(long)]
    store: bool,
    /// The trace level to ask for (default full).
    #[arg(long)]
    trace_level: Option<String>,
    /// Assertions the server checks against the Run's trace and output
    /// (`x-assertions`, docs/assertions.md): a JSON file, or JSON text.
    #[arg(long)]
    assertions: Option<String>,
}

pub(crate) async fn connect(url: &str, token: Option<&str>) -> Result<pilotage_client::PilotageClient> {
    let connection = pilotage_client::Connection::open(url, token).await?;
    Ok(pilotage_client::PilotageClient::discover(connection).await?)
}

/// A JSON argument (`flag`): a file holding JSON, or JSON text.
fn json_argument(flag: &str, text: Option<&str>) -> Result<Option<Value>> {
    let Some(text) = text else { return Ok(None) };
    Ok(Some(match std::fs::read_to_string(text) {
        Ok(file) => serde_json::from_str(&file).with_context(|| format!("{flag}: {text} does not hold JSON"))?,
        Err(_) => serde_json::from_str(text).with_context(|| format!("{flag} is neither a JSON file nor JSON text"))?,
    }))
}

pub(crate) fn read_program(path: &PathBuf) -> Result<Value> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

pub(crate) async fn client(args: ClientArgs) -> Result<ExitCode> {
    use pilotage_client::gate::{Approver, HostPolicy, Interactive, Refuse};
    use std::io::IsTerminal;
    let token = args.token.as_deref();
    match args.command {
        ClientCommand::Tools { url } => {
            let client = connect(&url, token).await?;
            for tool in client.tools() {
                say!("{}: {}", tool.name, tool.description.as_deref().unwrap_or(""));
            }
            print_json(client.manifest())?;
            client.close().await;
        }
        ClientCommand::Guide { url, language, id } => {
            let mut client = connect(&url, token).await?;
            match id {
                Some(id) => {
                    let guide = client.guide(&language, &id).await?;
                    say!("{}", guide.body.unwrap_or_default());
                }
                None => print_json(&client.guide_index(&language).await?)?,
            }
            client.close().await;
        }
        ClientCommand::Catalog { url, language, query } => {
            let client = connect(&url, token).await?;
            let mut cursor: Option<String> = None;
            loop {
                let page = client.catalog_list(&language, query.as_deref(), cursor.as_deref()).await?;
                for entry in &page.items {
                    say!("{}\t{}\t{}\t{}", entry.id, entry.kind, entry.risk, entry.name);
                }
                match page.next_cursor {
                    Some(next) => cursor = Some(next),
                    None => {
                        say!("catalog_version {}", page.catalog_version);
                        break;
                    }
                }
            }
            client.close().await;
        }
        ClientCommand::Validate(program_args) => {
            let client = connect(&program_args.url, token).await?;
            let program = read_program(&program_args.program)?;
            let response = client.validate(&program_args.language, &program, None).await?;
            print_json(&response)?;
            client.close().await;
            return Ok(if response.valid { ExitCode::SUCCESS } else { ExitCode::from(3) });
        }
        ClientCommand::Run(program_args) => {
            // The arguments first: a bad one is refused before connecting.
            let program = read_program(&program_args.program)?;
            let input = json_argument("--input", program_args.input.as_deref())?;
            let assertions = json_argument("--assertions", program_args.assertions.as_deref())?;
            let mut client = connect(&program_args.url, token).await?;
            let approver: Box<dyn Approver> = match &program_args.approve {
                Some(policy) => Box::new(HostPolicy::parse(policy)?),
                None if std::io::stdin().is_terminal() => Box::new(Interactive),
                None => Box::new(Refuse),
            };
            let options = pilotage_client::RunOptions {
                trace_level: program_args.trace_level.clone(),
                store: program_args.store.then_some(true),
                fetch: false,
                drift_retries: 2,
                idempotency_key: None,
                assertions,
                ..Default::default()
            };
            let report = client.run(&program_args.language, program, input, &options, approver.as_ref()).await?;
            if let Some(validation) = report.validations.last().filter(|v| !v.valid) {
                eprintln!("The program is invalid:");
                print_json(validation)?;
                client.close().await;
                return Ok(ExitCode::from(3));
            }
            if !report.approved {
                eprintln!("Not executed: the Host gate did not get approval.");
                client.close().await;
                return Ok(ExitCode::from(4));
            }
            if let Some(execution) = &report.execution {
                print_json(execution)?;
                client.close().await;
                return Ok(if execution.outcome.ok { ExitCode::SUCCESS } else { ExitCode::from(5) });
            }
            client.close().await;
        }
        ClientCommand::Trace { url, run_id, language, trace_level, question } => {
            let client = connect(&url, token).await?;
            // A Run belongs to one Language's trace door; without --language,
            // each door is asked in turn until one holds the run.
            let languages: Vec<String> = match language {
                Some(language) => vec![language],
                None => client
                    .manifest()
                    .languages
                    .iter()
                    .filter(|l| l.loop_tools.trace.is_some())
                    .map(|l| l.name.clone())
                    .collect(),
            };
            let mut fetched = None;
            for language in &languages {
                let answer = match &question {
                    Some(question) => client.ask(language, &run_id, trace_level.as_deref(), question).await,
                    None => client.trace(language, &run_id, trace_level.as_deref()).await,
                };
                match answer {
                    Ok(trace) => {
                        fetched = Some(Ok(trace));
                        break;
                    }
                    Err(error) => fetched = Some(Err(error)),
                }
            }
            let trace = fetched.context("no Language of this server declares trace_fetch")??;
            print_json(&trace)?;
            client.close().await;
        }
    }
    Ok(ExitCode::SUCCESS)
}
