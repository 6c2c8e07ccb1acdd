//! The effects of one Run (Part II §6.5.4): the traits through which the
//! host reaches the world for a component ([`Invoker`] for catalog
//! entries, [`DataSource`] and [`SqlSession`] for statements), and
//! `RunEffects`, which performs, records and authorizes every invocation
//! and statement a Run makes.
//!
//! Invariant: the component touches the world only through these; an
//! invocation outside the validated plan, of an entry the caller may no
//! longer see, or past the invocation bound is refused and recorded as a
//! violation, and a test run's non-read-only invocation is answered by the
//! host, never performed.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::Value;
use tracing::Instrument;

use crate::catalog::CatalogSnapshot;
use crate::host::{CommitError, Effects, InvokeRefusal, SqlResult};
use pilotage_protocol::catalog::CatalogEntry;

use pilotage_telemetry::metrics::Metrics;
use pilotage_telemetry::spans;

/// Why an invocation of a catalog entry failed (Part II §6.5.4); its
/// message is what the component is told and the trace records.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvokeError {
    /// Occurs when nothing serves the entry here: no binding, a secret its
    /// binding needs is missing, the Language of a promoted program is gone.
    #[error("{0}")]
    Unavailable(String),
    /// Occurs when the entry's service failed: unreachable, no answer in
    /// time, a non-2xx status, an answer too large or not JSON.
    #[error("{0}")]
    Failed(String),
    /// Occurs when a bound stops the invocation: the Run's invocation bound
    /// (sub-programs included), the nesting of promoted programs.
    #[error("{0}")]
    Bound(String),
    /// Occurs when a promoted program invoked as an entry did not run to
    /// success: drift, its input not binding, its own outcome.
    #[error("{0}")]
    SubRun(String),
    /// Occurs when the component sent an input that is not JSON.
    #[error("the component sent input that is not JSON: {0}")]
    Input(String),
}

/// Why a data source did not run a statement; its message is what the
/// component is told and the trace records.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SqlError {
    /// Occurs when no connection could be had (or none before the Run's
    /// deadline).
    #[error("{0}")]
    Connection(String),
    /// Occurs when the database refused the statement or its parameters
    /// (its message, with the SQLSTATE).
    #[error("{0}")]
    Statement(String),
    /// Occurs when the statement reached the Run's deadline.
    #[error("{0}")]
    Deadline(String),
    /// Occurs when the answer exceeds the data source's row or byte caps.
    #[error("{0}")]
    TooLarge(String),
}

/// Performs invocations of callable catalog entries for a Run. Async: the
/// Run's guest is suspended while an invocation waits.
#[async_trait::async_trait]
pub trait Invoker: Send + Sync {
    /// Invokes `entry` with `input`.
    ///
    /// # Errors
    /// [`InvokeError`] when the entry fails (transport error, HTTP error
    /// status, timeout, output that is not JSON) or nothing serves it.
    async fn invoke(&self, entry: &CatalogEntry, input: &Value) -> Result<Value, InvokeError>;
}

/// A data source a Run's statements execute on (Part II §6.5.4: only
/// validated statements ever reach it). One session is one transaction.
#[async_trait::async_trait]
pub trait DataSource: Send + Sync {
    /// Opens a session for one Run: a transaction, read-only when
    /// `read_only` (the validated plan only reads). `deadline` is when the
    /// Run's execution wall time runs out (Part II §10.1): no statement of
    /// the session may run past it, whatever the data source's own
    /// statement timeout.
    ///
    /// # Errors
    /// [`SqlError::Connection`] when no connection can be had, or none
    /// before `deadline`.
    async fn begin(&self, read_only: bool, deadline: Option<Instant>) -> Result<Box<dyn SqlSession>, SqlError>;
}

/// One Run's transaction on a data source. Dropped without `commit`, it
/// rolls back.
#[async_trait::async_trait]
pub trait SqlSession: Send {
    /// Runs one statement with positional parameters (a JSON array),
    /// stopping it at the session's deadline.
    ///
    /// # Errors
    /// [`SqlError`] with the database's message; the session must then be
    /// rolled back.
    async fn query(&mut self, statement: &str, params: &Value) -> Result<SqlResult, SqlError>;
    /// Commits the transaction.
    ///
    /// # Errors
    /// [`CommitError`]: rolled back by the database, or an unknown outcome.
    async fn commit(self: Box<Self>) -> Result<(), CommitError>;
    /// Rolls the transaction back.
    async fn rollback(self: Box<Self>);
}

/// One statement the host ran for a Run, in order.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct StatementRun {
    /// The trace step id the component gave.
    pub step_id: String,
    /// The statement text.
    pub statement: String,
    /// Its parameters (a JSON array).
    pub params: Value,
    /// Rows returned or changed, or the failure.
    pub result: Result<u64, SqlError>,
    /// Duration in milliseconds.
    pub t_ms: u64,
    /// How many invocations the Run had made before it (places it in the
    /// host's trace).
    pub after_invocations: usize,
}

/// One invocation the host performed, in order.
#[derive(Clone, Debug, PartialEq)]
pub struct Invocation {
    /// The trace step id the component gave.
    pub step_id: String,
    /// The entry invoked.
    pub entry_id: String,
    /// The input sent.
    pub input: Value,
    /// The output, or the failure message.
    pub result: Result<Value, InvokeError>,
    /// Duration in milliseconds.
    pub t_ms: u64,
    /// Whether the host answered it itself without calling the entry (a
    /// test run's non-read-only invocation).
    pub simulated: bool,
}

/// Why the host refused an invocation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Violation {
    /// The entry is not in the validated plan or references (containment).
    OutsidePlan(String),
    /// The entry is not visible to the caller at execution time.
    NotVisible(String),
    /// The invocation bound was reached.
    TooManyInvocations(u32),
    /// A statement that was not validated (containment).
    UnvalidatedStatement(String),
}

/// What a Run records as it goes; shared between the effects handed to
/// the component and the pipeline.
#[derive(Debug, Default)]
pub(crate) struct RunRecord {
    /// Every invocation performed.
    pub invocations: Vec<Invocation>,
    /// Every statement run.
    pub statements: Vec<StatementRun>,
    /// Every refusal.
    pub violations: Vec<Violation>,
    /// The step whose statement failed once the Run's wall time was used
    /// up (the data source stopped it at the deadline), if any.
    pub stopped_at_deadline: Option<String>,
    /// The step whose invocation returned after the Run's wall time was
    /// used up, if any: the host's own clock check, which does not depend
    /// on the engine's epoch ticker getting CPU time (a starved ticker
    /// would let such a Run end as a success).
    pub invoked_past_deadline: Option<String>,
    /// The step whose invocation or statement was refused because the Run
    /// was [cancelled](Cancellation), if any.
    pub cancelled_at: Option<String>,
}

/// A request to stop a Run at its next invocation boundary: once
/// [`Cancellation::cancel`] is called, every further invocation and
/// statement of the Run is refused, and the Run ends `partial` with what
/// already ran in its trace (an MCP task's `tasks/cancel`). Cheap to
/// clone; clones share one flag.
#[derive(Clone, Debug, Default)]
pub struct Cancellation(Arc<std::sync::atomic::AtomicBool>);

impl Cancellation {
    /// Asks the Run to stop at its next invocation boundary.
    pub fn cancel(&self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether [`Cancellation::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// The effects of one Run: containment, authorization at execution time,
/// the invocation bound, and the record.
pub(crate) struct RunEffects {
    pub(crate) allowed: BTreeSet<String>,
    pub(crate) statements: Vec<String>,
    pub(crate) data_source: Option<Arc<dyn DataSource>>,
    pub(crate) read_only: bool,
    pub(crate) session: Option<Box<dyn SqlSession>>,
    pub(crate) session_failed: bool,
    /// When the Run's execution wall time runs out.
    pub(crate) deadline: Option<Instant>,
    pub(crate) catalog: CatalogSnapshot,
    pub(crate) invoker: Arc<dyn Invoker>,
    pub(crate) record: Arc<Mutex<RunRecord>>,
    pub(crate) max_invocations: u32,
    pub(crate) max_bytes: u64,
    pub(crate) metrics: Metrics,
    /// A test run: only read-only entries are called (Part II §6.5.7).
    pub(crate) test_run: bool,
    /// The clock the Run sees, when not the host's real one.
    pub(crate) clock_ms: Option<u64>,
    /// Set when the Run is asked to stop at its next invocation boundary.
    pub(crate) cancellation: Option<Cancellation>,
}

/// Whether a test run performs an invocation of `entry` (Part II §6.5.7,
/// test runs without side effects): only when its hints say read-only and
/// not destructive, consistently with its label, and the label does not
/// say it changes state. An engine-defined label this host cannot read
/// leaves the decision to the hints.
pub(crate) fn performs_in_test_run(entry: &CatalogEntry) -> bool {
    let hints = entry.risk_hints;
    hints.read_only
        && !hints.destructive
        && pilotage_protocol::risk::label_reads_only(&entry.risk) != Some(false)
        && hints.inconsistency_with(&entry.risk).is_none()
}

/// What a test run's host answers for an invocation it does not perform.
pub(crate) fn simulated_output() -> Value {
    serde_json::json!({"simulated": true})
}

impl RunEffects {
    fn refuse<T>(&self, violation: Violation, message: String) -> Result<T, InvokeRefusal> {
        if let Ok(mut record) = self.record.lock() {
            record.violations.push(violation);
        }
        Err(InvokeRefusal::Refused(message))
    }

    /// Refuses the step `step_id` when the Run was cancelled: the
    /// invocation boundary where a cancelled Run stops.
    fn stop_if_cancelled(&self, step_id: &str) -> Result<(), InvokeRefusal> {
        if !self.cancellation.as_ref().is_some_and(Cancellation::is_cancelled) {
            return Ok(());
        }
        if let Ok(mut record) = self.record.lock() {
            record.cancelled_at.get_or_insert_with(|| step_id.to_owned());
        }
        Err(InvokeRefusal::Refused("the Run was cancelled: nothing more is invoked".into()))
    }
}

#[async_trait::async_trait]
impl Effects for RunEffects {
    fn now_ms(&self) -> Option<u64> {
        self.clock_ms
    }

    async fn invoke(&mut self, step_id: &str, entry_id: &str, input: &str) -> Result<String, InvokeRefusal> {
        self.stop_if_cancelled(step_id)?;
        if !self.allowed.contains(entry_id) {
            return self.refuse(
                Violation::OutsidePlan(entry_id.to_owned()),
                format!("'{entry_id}' is not part of the validated program"),
            );
        }
        // The snapshot shares its entries: holding a clone of it lends the
        // entry without copying its schemas.
        let catalog = self.catalog.clone();
        let Some(entry) = catalog.get(entry_id) else {
            return self.refuse(Violation::NotVisible(entry_id.to_owned()), format!("'{entry_id}' does not exist"));
        };
        let count = self.record.lock().map(|r| r.invocations.len()).unwrap_or(0) as u32;
        if count >= self.max_invocations {
            return self.refuse(
                Violation::TooManyInvocations(self.max_invocations),
                format!("the Run reached its bound of {} invocations", self.max_invocations),
            );
        }
        // A test run never reaches an entry that is not read-only by both
        // its label and its hints, whatever the component does: the host
        // answers in its place. Test runs' freedom from side effects must
        // not rest on one field an operator may have got wrong.
        if self.test_run && !performs_in_test_run(entry) {
            let parsed_input = serde_json::from_str(input).unwrap_or(Value::Null);
            if let Ok(mut record) = self.record.lock() {
                record.invocations.push(Invocation {
                    step_id: step_id.to_owned(),
                    entry_id: entry_id.to_owned(),
                    input: parsed_input,
                    result: Ok(simulated_output()),
                    t_ms: 0,
                    simulated: true,
                });
            }
            return Ok(simulated_output().to_string());
        }
        let span = spans::invocation_span(step_id, entry_id, &entry.kind);
        let started = Instant::now();
        // The input as the trace records it (null when it is not JSON).
        let mut parsed_input = Value::Null;
        let result = if input.len() as u64 > self.max_bytes {
            parsed_input = serde_json::from_str(input).unwrap_or(Value::Null);
            Err(InvokeError::Bound(format!(
                "the input is {} bytes; the bound is {} bytes",
                input.len(),
                self.max_bytes
            )))
        } else {
            match serde_json::from_str::<Value>(input) {
                Ok(value) => {
                    let output = self.invoker.invoke(entry, &value).instrument(span.clone()).await;
                    parsed_input = value;
                    output
                }
                Err(error) => Err(InvokeError::Input(error.to_string())),
            }
        };
        // The output's text is both its measured size and what the
        // component gets back: serialized once.
        let result = result.and_then(|output| {
            let text = output.to_string();
            if text.len() as u64 > self.max_bytes {
                Err(InvokeError::Bound(format!(
                    "the output is {} bytes; the bound is {} bytes",
                    text.len(),
                    self.max_bytes
                )))
            } else {
                Ok((output, text))
            }
        });
        let elapsed = started.elapsed();
        self.metrics.invocation(&entry.kind, result.is_ok(), elapsed);
        if result.is_err() {
            spans::record_failure(&span, "invocation_failed");
        }
        let t_ms = elapsed.as_millis() as u64;
        let (recorded, answer) = match result {
            Ok((output, text)) => (Ok(output), Ok(text)),
            Err(error) => {
                let message = error.to_string();
                (Err(error), Err(InvokeRefusal::Failed(message)))
            }
        };
        let past_deadline = self.deadline.is_some_and(|deadline| Instant::now() >= deadline);
        if let Ok(mut record) = self.record.lock() {
            if past_deadline && record.invoked_past_deadline.is_none() {
                record.invoked_past_deadline = Some(step_id.to_owned());
            }
            record.invocations.push(Invocation {
                step_id: step_id.to_owned(),
                entry_id: entry_id.to_owned(),
                input: parsed_input,
                result: recorded,
                t_ms,
                simulated: false,
            });
        }
        answer
    }

    async fn sql_query(&mut self, step_id: &str, statement: &str, params: &str) -> Result<SqlResult, InvokeRefusal> {
        self.stop_if_cancelled(step_id)?;
        if !self.statements.iter().any(|validated| validated == statement) {
            let shown: String = statement.chars().take(80).collect();
            return self.refuse(
                Violation::UnvalidatedStatement(shown.clone()),
                format!("the statement '{shown}' is not one the program was validated with"),
            );
        }
        let Some(data_source) = self.data_source.clone() else {
            return Err(InvokeRefusal::Refused("no data source is configured for this Language".into()));
        };
        if self.session_failed {
            return Err(InvokeRefusal::Refused("the Run's transaction already failed and was rolled back".into()));
        }
        let params: Value = serde_json::from_str(params)
            .map_err(|e| InvokeRefusal::Refused(format!("parameters are not JSON: {e}")))?;
        let span = spans::statement_span(step_id, statement);
        let started = Instant::now();
        let result = async {
            match self.session.as_mut() {
                Some(session) => session.query(statement, &params).await,
                None => {
                    let mut session = data_source.begin(self.read_only, self.deadline).await?;
                    let result = session.query(statement, &params).await;
                    self.session = Some(session);
                    result
                }
            }
        }
        .instrument(span.clone())
        .await;
        // A statement that fails once the Run's wall time is used up was
        // stopped by the Run's bound (its statement timeout was the time
        // the Run had left): the Run ends `timeout`, whatever the
        // component makes of the failure (Part II §10.1).
        // A data source that knows its timeout was the Run's time left says
        // so (`SqlError::Deadline`), whatever the clocks read.
        let out_of_time = matches!(result, Err(SqlError::Deadline(_)))
            || (result.is_err() && self.deadline.is_some_and(|deadline| Instant::now() >= deadline));
        if let Ok(mut record) = self.record.lock() {
            let after_invocations = record.invocations.len();
            record.statements.push(StatementRun {
                step_id: step_id.to_owned(),
                statement: statement.to_owned(),
                params,
                result: result.as_ref().map(|r| r.rows_matched).map_err(Clone::clone),
                t_ms: started.elapsed().as_millis() as u64,
                after_invocations,
            });
            if out_of_time {
                record.stopped_at_deadline.get_or_insert_with(|| step_id.to_owned());
            }
        }
        if result.is_err() {
            spans::record_failure(&span, if out_of_time { "timeout" } else { "statement_failed" });
            self.session_failed = true;
            if let Some(session) = self.session.take() {
                session.rollback().await;
            }
        }
        result.map_err(|error| InvokeRefusal::Failed(error.to_string()))
    }

    async fn finish(&mut self, succeeded: bool) -> Result<(), CommitError> {
        self.end_session(succeeded).await
    }
}

impl RunEffects {
    /// Ends the Run's transaction: commits when the Run succeeded, else
    /// rolls back.
    async fn end_session(&mut self, succeeded: bool) -> Result<(), CommitError> {
        match self.session.take() {
            Some(session) if succeeded => session.commit().await,
            Some(session) => {
                session.rollback().await;
                Ok(())
            }
            None => Ok(()),
        }
    }
}
