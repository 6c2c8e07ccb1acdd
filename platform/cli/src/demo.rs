//! The main job: `pilotage demo` starts the platform on the embedded
//! default (SQLite, the bundled Languages, the demo tenant and its
//! capability service) and drives the reference client through the spec's
//! own scenarios, saying what happens at each step. Every step checks what
//! the spec requires; the demo fails when any step does not behave so.
//!
//! Scenarios: the Part III §9.3–9.4 workflow (a typo caught with the
//! close-match hint, corrected, executed, its trace fetched again by
//! `run_id`); a branching workflow whose trace shows the decision; a stale
//! `catalog_version` refused with `catalog_drift` and recovered; a
//! destructive plan stopped at the Host gate; and the Part I story on
//! PostgreSQL (`sql/postgres-15` over the demo sales database: a wrong
//! column caught with its hint, the read-only plan, `rows_matched` in the
//! trace), or a clear note when PostgreSQL cannot be reached; and the
//! automation story of issue 14 on `automation/1` and the demo home (a
//! draft rule that also unlocks the door stopped at the Host gate, test
//! runs at 14:03 and 22:30 whose decisions name the clock and whose light
//! step is simulated, the question "why did nothing turn on?" answered by
//! the narration of the 14:03 Run's stored record, the deploy, the door opening at night as a signed
//! webhook delivery, the firing that really lights the porch, and its Run
//! fetched by `run_id`).
//!
//! This module holds the narrator and the order of the scenarios; they are
//! in `workflow` (1 to 8), `sql` (9) and `automation` (10, with its scenes
//! `approval` and `console`).

use std::io::Write;
use std::path::Path;

use serde_json::Value;

use pilotage_client::ClientError;
use pilotage_server::settings::Settings;
use pilotage_server::start::{Server, StartError, start};

/// What the demo saw.
#[derive(Debug, Default)]
pub struct DemoReport {
    /// Steps that behaved as the spec says.
    pub passed: Vec<String>,
    /// Steps that did not, with what happened.
    pub failed: Vec<String>,
}

impl DemoReport {
    /// Whether every step behaved.
    pub fn succeeded(&self) -> bool {
        self.failed.is_empty() && !self.passed.is_empty()
    }
}

/// Occurs when the demo cannot run at all.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DemoError {
    /// Occurs when the server does not start.
    #[error(transparent)]
    Start(#[from] StartError),
    /// Occurs when the client loses the server.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// Occurs when the output cannot be written.
    #[error("cannot write the demo's output: {0}")]
    Output(#[from] std::io::Error),
}

mod approval;
mod automation;
mod console;
mod sql;
mod workflow;

struct Narrator<'o> {
    out: &'o mut dyn Write,
    report: DemoReport,
}

impl Narrator<'_> {
    fn say(&mut self, text: &str) -> std::io::Result<()> {
        writeln!(self.out, "{text}")
    }

    fn check(&mut self, what: &str, holds: bool, detail: impl std::fmt::Display) -> std::io::Result<()> {
        if holds {
            writeln!(self.out, "   ✓ {what}")?;
            self.report.passed.push(what.to_owned());
        } else {
            writeln!(self.out, "   ✗ {what}: {detail}")?;
            self.report.failed.push(format!("{what}: {detail}"));
        }
        Ok(())
    }
}

/// Signs in on a page of the server as a person would: posts `form` to
/// `sign_in_url` and returns a client that does not follow redirects with
/// the session cookie the answer set.
async fn signed_in(sign_in_url: &str, form: String) -> Result<(reqwest::Client, String), String> {
    let http =
        reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().map_err(|e| e.to_string())?;
    let answer = http
        .post(sign_in_url)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let cookie = answer
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .ok_or_else(|| format!("sign-in answered {} without a session", answer.status()))?
        .to_owned();
    Ok((http, cookie))
}

fn indent(value: &Value) -> String {
    serde_json::to_string_pretty(value)
        .unwrap_or_default()
        .lines()
        .map(|line| format!("     {line}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Runs the demo against a freshly started server and writes the story to
/// `out`.
///
/// # Errors
/// [`DemoError`] when the server cannot start or the client loses it;
/// scenario failures are in the report.
pub async fn run(settings: Settings, out: &mut dyn Write) -> Result<DemoReport, DemoError> {
    let data_dir = settings.data_dir.clone();
    let server = start(settings, &pilotage_bundled::ALL).await?;
    let result = scenarios(&server, out, &data_dir).await;
    server.stop().await;
    result
}

/// The ten scenarios in order, narrated to `out`; the report counts the
/// checks that held and those that did not.
async fn scenarios(server: &Server, out: &mut dyn Write, data_dir: &Path) -> Result<DemoReport, DemoError> {
    let mut n = Narrator { out, report: DemoReport::default() };
    let url = server.mcp_url();
    n.say(&format!("Pilotage Platform demo: the server is up at {url} (SQLite, demo tenant, bundled Languages)."))?;
    if let Some((addr, _)) = &server.demo_world {
        n.say(&format!("The demo capability service (profiles, orders, outbox) answers at http://{addr}.\n"))?;
    }
    let mut client = workflow::discover(&url, &mut n).await?;
    workflow::learn(&mut client, &mut n).await?;
    workflow::lookup(&mut client, &mut n).await?;
    let program = workflow::validate_typo(&mut client, &mut n).await?;
    let options = workflow::run_options();
    workflow::execute(&mut client, &mut n, &program, &options).await?;
    workflow::branching(&mut client, &mut n, &options).await?;
    workflow::drift(server, &mut client, &mut n, &program, &options).await?;
    workflow::host_gate(server, &mut client, &mut n, &options).await?;
    sql::sql_story(server, &mut client, &mut n, &options).await?;
    automation::automation_story(server, &mut client, &mut n, data_dir).await?;

    let passed = n.report.passed.len();
    let failed = n.report.failed.len();
    n.say(&format!("\n{passed} checks passed, {failed} failed."))?;
    client.close().await;
    Ok(n.report)
}
