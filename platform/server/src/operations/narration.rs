//! Narration (Part II §6.6 "Narration"): the prose a trace fetch adds to a
//! Run's recorded facts where `trace_fetch.narrate` is declared, and its
//! answer to the caller's `question`.
//!
//! Invariant: the narrator reads nothing but the [`TraceFetchResponse`] it
//! is handed (already cut to the returned trace level, so it knows no more
//! than the response shows) and the Language's declared run statuses. It
//! calls no model and no store, and quotes no step input or output value:
//! only ids, entry names, statuses, errors, decisions with their `because`,
//! durations, counts and sizes. Its text is interpretation, untrusted model
//! input that no verification may rest on (Part II §9.2, §9.4), and it says
//! so in its first words; the facts beside it are never changed.

use std::fmt::Write as _;

use pilotage_engine::description::StatusInfo;
use pilotage_protocol::assertions::ASSERTION_FAILED;
use pilotage_protocol::outcome::{
    CATALOG_DRIFT, ENGINE_FAULT, ERROR, PARTIAL, PROMOTION_DRIFT, RESOURCE_EXHAUSTED, SUCCESS, TIMEOUT,
    VALIDATION_ERROR,
};
use pilotage_protocol::requests::TraceFetchResponse;
use pilotage_protocol::trace::{Decision, TraceStep};
use serde_json::Value;

/// Characters a trace fetch's `question` may have (Part II §6.6); a longer
/// one is refused with `invalid_request`, naming the bound.
pub(crate) const QUESTION_MAX_CHARS: usize = 2000;

/// Characters of a narration, at most; a longer text is cut and ends with
/// `…`. Lists inside it are cut first ("and N more").
pub(crate) const NARRATION_MAX_CHARS: usize = 4000;

/// The first words of every narration: it is interpretation, not a fact
/// (Part II §9.4).
pub(crate) const LABEL: &str =
    "Interpretation of the recorded trace (not a fact; verify against the trace, which this text does not change):";

/// The sentence that opens the answer to a question the facts cannot
/// answer.
pub(crate) const UNANSWERED: &str = "The recorded facts do not answer this question:";

/// Trace entries named one by one, at most; the rest are counted.
const STEPS_LISTED: usize = 12;

/// Kinds of decision (place and choice) described, at most.
const DECISIONS_LISTED: usize = 8;

/// Characters of one quoted `because` or error, at most.
const QUOTE_CHARS: usize = 300;

/// Kinds of question answered for one question, at most.
const ASKS_ANSWERED: usize = 3;

/// The narration of `record` (Part II §6.6): [`LABEL`], the answer to
/// `question` when there is one, then an account of the Run (its outcome,
/// what ran after the last decision, the steps, failures, simulated steps,
/// decisions with their reasons, row counts, statistics and the output's
/// size), at most [`NARRATION_MAX_CHARS`] characters. `statuses` are the
/// Language's declared run statuses, read for whether side effects may
/// have occurred. A question is read for its kind only, never quoted; a
/// question the facts cannot answer gets a sentence opening with
/// [`UNANSWERED`].
pub(crate) fn narrate(record: &TraceFetchResponse, question: Option<&str>, statuses: &[StatusInfo]) -> String {
    let facts = Facts { record, statuses };
    let mut text = String::from(LABEL);
    if let Some(question) = question {
        let asks = asks(question);
        text.push_str(" In answer to the question:");
        if asks.is_empty() {
            let _ = write!(
                text,
                " {UNANSWERED} they hold only the Run's outcome, its steps (status, duration, whether simulated), its \
                 decisions with their reasons, the counts its Engine recorded and the size of its output."
            );
        }
        for ask in asks {
            text.push(' ');
            text.push_str(&facts.answer(ask));
        }
        text.push_str(" The Run in brief:");
    }
    // What the answer already said is not said again.
    let answered = text.clone();
    for sentence in facts.account().into_iter().filter(|sentence| !answered.contains(sentence.as_str())) {
        text.push(' ');
        text.push_str(&sentence);
    }
    clipped(&text, NARRATION_MAX_CHARS)
}

/// What a question asks about, by its words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ask {
    /// Why nothing (or not something) happened.
    Nothing,
    /// Why the Run failed.
    Failure,
    /// What the Run changed, drift included.
    Changes,
    /// Row counts.
    Rows,
    /// Clock times and durations.
    Time,
    /// Which steps were simulated.
    Simulated,
    /// Why a branch or loop went the way it did.
    Decisions,
    /// What ran.
    Steps,
    /// The output.
    Output,
}

/// Each kind of question and its words, in the order answers are given; a
/// word ending in `*` is a prefix.
const WORDS: [(Ask, &[&str]); 9] = [
    (Ask::Nothing, &["nothing", "didn", "didnt", "not", "never", "skip*", "wasn", "wasnt", "none", "nobody"]),
    (
        Ask::Failure,
        &[
            "fail*",
            "error*",
            "wrong",
            "broke*",
            "break*",
            "crash*",
            "partial*",
            "stop*",
            "cancel*",
            "rolled",
            "rollback*",
            "timeout*",
            "abort*",
            "problem*",
        ],
    ),
    (
        Ask::Changes,
        &[
            "chang*", "effect*", "modif*", "wrote", "writ*", "insert*", "updat*", "delet*", "drift*", "persist*",
            "affect*", "touch*",
        ],
    ),
    (Ask::Rows, &["row*", "matched", "records"]),
    (
        Ask::Time,
        &["when", "time", "times", "clock", "hour*", "minute*", "late", "early", "long", "duration*", "window*"],
    ),
    (Ask::Simulated, &["simulat*", "test", "dry", "real", "really", "actually", "pretend*", "fake*"]),
    (
        Ask::Decisions,
        &[
            "why",
            "branch*",
            "decid*",
            "decision*",
            "because",
            "condition*",
            "arm",
            "chose",
            "choice*",
            "reason*",
            "loop*",
            "iterat*",
        ],
    ),
    (Ask::Steps, &["step*", "ran", "happen*", "call*", "invok*", "order", "sequence", "which", "steps"]),
    (Ask::Output, &["output*", "result*"]),
];

/// The kinds `question` asks about, in answer order, at most
/// [`ASKS_ANSWERED`]. `Decisions` and `Steps` are dropped when `Nothing`
/// or `Failure` is asked: their answers give the deciding reasons and the
/// steps that matter already ("why did nothing happen" is not "what
/// happened").
fn asks(question: &str) -> Vec<Ask> {
    let lowered = question.to_lowercase();
    let tokens: Vec<&str> = lowered.split(|c: char| !c.is_alphanumeric()).filter(|t| !t.is_empty()).collect();
    let matches = |pattern: &str, token: &str| match pattern.strip_suffix('*') {
        Some(prefix) => token.starts_with(prefix),
        None => token == pattern,
    };
    let mut asks: Vec<Ask> = WORDS
        .iter()
        .filter(|(_, words)| tokens.iter().any(|token| words.iter().any(|word| matches(word, token))))
        .map(|(ask, _)| *ask)
        .collect();
    if asks.contains(&Ask::Nothing) || asks.contains(&Ask::Failure) {
        asks.retain(|ask| !matches!(ask, Ask::Decisions | Ask::Steps));
    }
    asks.truncate(ASKS_ANSWERED);
    asks
}

/// The row counts one statement recorded.
#[derive(Debug, PartialEq, Eq)]
struct RowCount {
    step: String,
    matched: Option<u64>,
    returned: Option<u64>,
    truncated: bool,
}

impl RowCount {
    /// `'stmt-1' matched 3 rows and returned 3`.
    fn sentence_part(&self) -> String {
        let mut part = format!("'{}'", self.step);
        match (self.matched, self.returned) {
            (Some(matched), Some(returned)) => {
                let _ = write!(part, " matched {} and returned {returned}", rows(matched));
            }
            (Some(matched), None) => {
                let _ = write!(part, " matched {}", rows(matched));
            }
            (None, Some(returned)) => {
                let _ = write!(part, " returned {}", rows(returned));
            }
            (None, None) => {}
        }
        if self.truncated {
            part.push_str(" (the rows returned were cut at the platform's row bound)");
        }
        part
    }

    /// Reads the counts of `step` from an object (a statement's output, a
    /// truncation marker's `scalars`, or an entry of `stats.statements`).
    fn read(step: &str, object: &Value) -> Option<RowCount> {
        let counts = object.get("scalars").unwrap_or(object);
        let matched = counts.get("rows_matched").and_then(Value::as_u64);
        let returned = counts.get("rows_returned").and_then(Value::as_u64);
        (matched.is_some() || returned.is_some()).then(|| RowCount {
            step: step.to_owned(),
            matched,
            returned,
            truncated: counts.get("truncated").and_then(Value::as_bool).unwrap_or(false),
        })
    }
}

/// The facts a narration is made of: one record, and the statuses its
/// Language declares.
struct Facts<'r> {
    record: &'r TraceFetchResponse,
    statuses: &'r [StatusInfo],
}

impl Facts<'_> {
    fn steps(&self) -> &[TraceStep] {
        &self.record.trace.steps
    }

    /// Steps that invoked an entry (not control flow).
    fn invoking(&self) -> Vec<&TraceStep> {
        self.steps().iter().filter(|step| !step.is_control_flow() && step.calls.is_some()).collect()
    }

    fn simulated(&self) -> Vec<&TraceStep> {
        self.steps().iter().filter(|step| step.simulated == Some(true)).collect()
    }

    fn failed(&self) -> Vec<&TraceStep> {
        self.steps().iter().filter(|step| !step.outcome.ok).collect()
    }

    fn decisions(&self) -> Vec<(&TraceStep, &Decision)> {
        self.steps().iter().flat_map(|step| step.decisions.iter().map(move |decision| (step, decision))).collect()
    }

    /// The decision after which nothing ran: the last trace entry is a
    /// branch of a Run that succeeded, and the arm it took had no step.
    fn idle_decision(&self) -> Option<&Decision> {
        let last = self.steps().last().filter(|step| step.is_control_flow() && self.record.outcome.ok)?;
        last.decisions.first().filter(|decision| !matches!(decision.took.as_str(), "continue" | "exit"))
    }

    /// Row counts: from `stats.statements` when the Engine recorded it,
    /// else from the steps' outputs.
    fn row_counts(&self) -> Vec<RowCount> {
        let from_stats: Vec<RowCount> = self
            .record
            .trace
            .stats
            .as_ref()
            .and_then(|stats| stats.get("statements"))
            .and_then(Value::as_array)
            .map(|statements| {
                statements
                    .iter()
                    .filter_map(|entry| RowCount::read(entry.get("step").and_then(Value::as_str)?, entry))
                    .collect()
            })
            .unwrap_or_default();
        if !from_stats.is_empty() {
            return from_stats;
        }
        self.steps().iter().filter_map(|step| RowCount::read(&step.id, step.output.as_ref()?)).collect()
    }

    /// Whether the Language declares that side effects may have occurred
    /// with the Run's status; `None` when it does not declare the status.
    fn side_effects(&self) -> Option<bool> {
        let status = &self.record.outcome.status;
        self.statuses.iter().find(|declared| &declared.status == status).map(|declared| declared.side_effects)
    }

    /// The account of the Run, sentence by sentence.
    fn account(&self) -> Vec<String> {
        let mut sentences = vec![self.outcome_sentence()];
        sentences.extend(self.side_effects_sentence());
        sentences.extend(self.idle_decision().map(idle_sentence));
        sentences.push(self.steps_sentence());
        sentences.extend(self.failed_sentence());
        sentences.extend(self.assertions_sentence());
        sentences.extend(self.simulated_sentence());
        sentences.extend(self.decisions_sentence());
        sentences.extend(self.rows_sentence());
        sentences.extend(self.stats_sentence());
        sentences.push(self.output_sentence());
        sentences
    }

    fn outcome_sentence(&self) -> String {
        let outcome = &self.record.outcome;
        let status = outcome.status.as_str();
        let lead = match status {
            SUCCESS if outcome.ok => "The Run completed (status success)".to_owned(),
            _ if outcome.ok => format!("The Run completed (status {status})"),
            PARTIAL => "The Run started and did not complete (status partial)".to_owned(),
            ERROR => "The Run failed (status error)".to_owned(),
            CATALOG_DRIFT => {
                "Nothing ran (status catalog_drift): the catalog changed since the program was checked".to_owned()
            }
            PROMOTION_DRIFT => {
                "Nothing ran (status promotion_drift): an entry the promoted program uses changed since promotion"
                    .to_owned()
            }
            VALIDATION_ERROR => "Nothing ran (status validation_error)".to_owned(),
            ASSERTION_FAILED => {
                "The program ran to its end, but the request's assertions did not all hold (status assertion_failed)"
                    .to_owned()
            }
            TIMEOUT => "The Run was stopped at its wall-time bound (status timeout)".to_owned(),
            RESOURCE_EXHAUSTED => {
                "The Run was stopped at one of the platform's bounds (status resource_exhausted)".to_owned()
            }
            ENGINE_FAULT => {
                "The platform failed the Run because the Language broke its contract (status engine_fault)".to_owned()
            }
            _ => format!("The Run did not succeed (status {status})"),
        };
        sentence(&lead, outcome.error.as_deref())
    }

    /// The `x-assertions` verdicts kept with the Run: how many held, and
    /// which did not (their ids; the observed values stay in the report).
    fn assertions_sentence(&self) -> Option<String> {
        let report = self.record.assertions.as_ref().filter(|report| !report.verdicts.is_empty())?;
        let total = report.verdicts.len();
        let failed = report.verdicts.iter().filter(|v| v.verdict != "passed").map(|v| format!("'{}'", v.id));
        Some(match (report.failed, total) {
            (0, 1) => "The request's one assertion held.".to_owned(),
            (0, _) => format!("All {total} of the request's assertions held."),
            (n, _) => {
                format!(
                    "{n} of the request's {} failed: {}.",
                    count(total, "assertion", "assertions"),
                    listed(failed, 5)
                )
            }
        })
    }

    fn side_effects_sentence(&self) -> Option<String> {
        if self.record.outcome.ok {
            return None;
        }
        let status = &self.record.outcome.status;
        self.side_effects().map(|possible| {
            if possible {
                format!("The Language declares that after status {status} side effects may have occurred.")
            } else {
                format!("The Language declares that after status {status} nothing the Run did took effect.")
            }
        })
    }

    fn steps_sentence(&self) -> String {
        let steps = self.steps();
        let level = self.record.trace.level.as_str();
        if steps.is_empty() {
            return format!("The trace (level {level}) records no step.");
        }
        let listed: Vec<String> = steps.iter().take(STEPS_LISTED).map(step_part).collect();
        let mut sentence = format!(
            "The trace (level {level}) records {} in this order: {}",
            count(steps.len(), "entry", "entries"),
            listed.join("; ")
        );
        if steps.len() > STEPS_LISTED {
            let _ = write!(sentence, "; and {} more", steps.len() - STEPS_LISTED);
        }
        sentence.push('.');
        sentence
    }

    fn failed_sentence(&self) -> Option<String> {
        let failed = self.failed();
        let first = failed.first()?;
        let mut sentence =
            sentence(&format!("The first step that failed is {}", named(first)), first.outcome.error.as_deref());
        if failed.len() > 1 {
            let _ = write!(sentence, " {} failed in all.", count(failed.len(), "step", "steps"));
        }
        Some(sentence)
    }

    fn simulated_sentence(&self) -> Option<String> {
        let simulated = self.simulated();
        if simulated.is_empty() {
            return None;
        }
        let listed = listed(simulated.iter().map(|step| named(step)), STEPS_LISTED);
        Some(format!(
            "This was a test run: {} simulated (the platform answered {} itself; the entry was not called and \
             changed nothing): {listed}.",
            count(simulated.len(), "step was", "steps were"),
            if simulated.len() == 1 { "it" } else { "each" }
        ))
    }

    fn decisions_sentence(&self) -> Option<String> {
        // The decision after which nothing ran has a sentence of its own.
        let idle = self.idle_decision();
        let decisions: Vec<_> = self
            .decisions()
            .into_iter()
            .filter(|(_, decision)| !idle.is_some_and(|idle| std::ptr::eq(idle, *decision)))
            .collect();
        if decisions.is_empty() {
            return None;
        }
        // Grouped by place and choice, in the order first seen: a loop's
        // thousand `continue`s are one phrase.
        let mut groups: Vec<(&TraceStep, &Decision, usize)> = Vec::new();
        for (step, decision) in &decisions {
            match groups.iter_mut().find(|(_, seen, _)| seen.at == decision.at && seen.took == decision.took) {
                Some(group) => group.2 += 1,
                None => groups.push((step, decision, 1)),
            }
        }
        let parts = listed(
            groups.iter().map(|(step, decision, times)| decision_part(step, decision, *times)),
            DECISIONS_LISTED,
        );
        Some(format!("Decisions: {parts}."))
    }

    fn rows_sentence(&self) -> Option<String> {
        let counts = self.row_counts();
        if counts.is_empty() {
            return None;
        }
        Some(format!("Row counts: {}.", listed(counts.iter().map(RowCount::sentence_part), STEPS_LISTED)))
    }

    fn stats_sentence(&self) -> Option<String> {
        let stats = self.record.trace.stats.as_ref()?.as_object()?;
        let numbers: Vec<String> = stats
            .iter()
            .filter(|(_, value)| value.is_number())
            .map(|(name, value)| format!("{} {value}", name.replace('_', " ")))
            .collect();
        (!numbers.is_empty()).then(|| format!("The Engine's statistics: {}.", numbers.join(", ")))
    }

    fn output_sentence(&self) -> String {
        match &self.record.output {
            None => "No output was retained.".to_owned(),
            Some(Value::Null) => "The output retained is null.".to_owned(),
            Some(output) => {
                let shape = match output {
                    Value::Array(items) => format!(", a list of {}", count(items.len(), "item", "items")),
                    Value::Object(members) => format!(", an object of {}", count(members.len(), "member", "members")),
                    _ => String::new(),
                };
                format!("An output was retained ({} bytes of JSON{shape}).", output.to_string().len())
            }
        }
    }

    /// The answer to one kind of question, from the facts alone.
    fn answer(&self, ask: Ask) -> String {
        match ask {
            Ask::Nothing => self.answer_nothing(),
            Ask::Failure => self.answer_failure(),
            Ask::Changes => self.answer_changes(),
            Ask::Rows => match self.rows_sentence() {
                Some(sentence) => sentence,
                None => format!("{UNANSWERED} this trace records no row counts."),
            },
            Ask::Time => self.answer_time(),
            Ask::Simulated => match self.simulated_sentence() {
                Some(sentence) => sentence,
                None if self.invoking().is_empty() => "No step was simulated, and no entry was invoked.".to_owned(),
                None => "No step was simulated: every recorded invocation was performed.".to_owned(),
            },
            Ask::Decisions => match (self.idle_decision(), self.decisions_sentence()) {
                (Some(idle), Some(sentence)) => format!("{} {sentence}", idle_sentence(idle)),
                (Some(idle), None) => idle_sentence(idle),
                (None, Some(sentence)) => sentence,
                (None, None) => "No decision was recorded: the trace has no branch or loop.".to_owned(),
            },
            Ask::Steps => self.steps_sentence(),
            Ask::Output => self.output_sentence(),
        }
    }

    fn answer_nothing(&self) -> String {
        if let Some(decision) = self.idle_decision() {
            return idle_sentence(decision);
        }
        if !self.record.outcome.ok {
            return self.answer_failure();
        }
        let invoking = self.invoking();
        if invoking.is_empty() {
            return "No entry was invoked: the recorded steps called nothing.".to_owned();
        }
        let performed: Vec<&&TraceStep> = invoking.iter().filter(|step| step.simulated != Some(true)).collect();
        if performed.is_empty() {
            return format!(
                "Every invocation was simulated, so nothing was done. {}",
                self.simulated_sentence().unwrap_or_default()
            )
            .trim_end()
            .to_owned();
        }
        format!(
            "The facts do not show that nothing happened: {} invoked an entry and succeeded: {}.",
            count(performed.len(), "step", "steps"),
            listed(performed.iter().map(|step| named(step)), STEPS_LISTED)
        )
    }

    fn answer_failure(&self) -> String {
        if self.record.outcome.ok && self.failed().is_empty() {
            return "Nothing failed: the outcome is success and every recorded step succeeded.".to_owned();
        }
        let mut answer = self.outcome_sentence();
        let sentences = self.side_effects_sentence().into_iter().chain(self.failed_sentence());
        for sentence in sentences.chain(self.assertions_sentence()) {
            answer.push(' ');
            answer.push_str(&sentence);
        }
        answer
    }

    fn answer_changes(&self) -> String {
        let outcome = &self.record.outcome;
        if matches!(outcome.status.as_str(), CATALOG_DRIFT | PROMOTION_DRIFT | VALIDATION_ERROR) {
            return format!("{} So this Run changed nothing.", self.outcome_sentence());
        }
        let performed: Vec<&TraceStep> =
            self.invoking().into_iter().filter(|step| step.simulated != Some(true) && step.outcome.ok).collect();
        let mut answer = if performed.is_empty() {
            "No entry was invoked for real, so the trace records no change made by this Run.".to_owned()
        } else {
            format!(
                "The trace records which entries were invoked, not what each changed; these invocations were \
                 performed: {}.",
                listed(performed.iter().map(|step| invocation_part(step)), STEPS_LISTED)
            )
        };
        for sentence in self.side_effects_sentence().into_iter().chain(self.rows_sentence()) {
            answer.push(' ');
            answer.push_str(&sentence);
        }
        if let Some(sentence) = self.simulated_sentence() {
            answer.push(' ');
            answer.push_str(&sentence);
        }
        answer
    }

    fn answer_time(&self) -> String {
        let clocks: Vec<String> = self
            .decisions()
            .into_iter()
            .filter(|(_, decision)| has_clock(&decision.because))
            .map(|(_, decision)| format!("at '{}': {}", decision.at, clipped(&decision.because, QUOTE_CHARS)))
            .collect();
        let timed: Vec<(&str, u64)> =
            self.steps().iter().filter_map(|step| Some((step.id.as_str(), step.t_ms?))).collect();
        if clocks.is_empty() && timed.is_empty() {
            return format!("{UNANSWERED} the trace records neither a clock time nor a step's duration.");
        }
        let mut answer = String::new();
        if !clocks.is_empty() {
            let _ = write!(answer, "The clock times recorded: {}.", listed(clocks.into_iter(), DECISIONS_LISTED));
        }
        if !timed.is_empty() {
            let total: u64 = timed.iter().map(|(_, ms)| ms).sum();
            let parts = listed(timed.iter().map(|(id, ms)| format!("'{id}' {ms} ms")), STEPS_LISTED);
            let _ = write!(answer, " Step durations: {parts} ({total} ms in all).");
        } else {
            answer.push_str(" The trace records no step duration.");
        }
        answer.trim_start().to_owned()
    }
}

/// `Nothing ran after the decision at 'when': …`.
fn idle_sentence(decision: &Decision) -> String {
    full_stop(format!(
        "Nothing ran after the decision at '{}': it took '{}' because {}",
        decision.at,
        decision.took,
        clipped(decision.because.trim(), QUOTE_CHARS)
    ))
}

/// `lead` and, when there is one, `: detail` (clipped), as one sentence
/// ending in a full stop.
fn sentence(lead: &str, detail: Option<&str>) -> String {
    let mut text = lead.to_owned();
    if let Some(detail) = detail.filter(|detail| !detail.trim().is_empty()) {
        let _ = write!(text, ": {}", clipped(detail.trim(), QUOTE_CHARS));
    }
    full_stop(text)
}

/// `text` ending in a full stop (or the `…` of a cut).
fn full_stop(mut text: String) -> String {
    if !text.ends_with(['.', '…', '!', '?']) {
        text.push('.');
    }
    text
}

/// One trace entry, as a phrase of the steps sentence.
fn step_part(step: &TraceStep) -> String {
    let mut part = format!("'{}'", step.id);
    if step.is_control_flow() {
        part.push_str(" decided");
    } else if let Some(calls) = &step.calls {
        let verb = if step.simulated == Some(true) { "simulated" } else { "called" };
        let _ = write!(part, " {verb} {calls}");
    }
    let _ = write!(part, " ({}", step.outcome.status);
    if let Some(ms) = step.t_ms {
        let _ = write!(part, ", {ms} ms");
    }
    part.push(')');
    part
}

/// `'light-on' (porch_light.turn_on)`.
fn named(step: &TraceStep) -> String {
    match &step.calls {
        Some(calls) => format!("'{}' ({calls})", step.id),
        None => format!("'{}'", step.id),
    }
}

/// An invocation performed, with the access its output records (a SQL
/// reference sub-step says `read`, `insert`, `update` or `delete`).
fn invocation_part(step: &TraceStep) -> String {
    let access = step.output.as_ref().and_then(|output| output.get("access")).and_then(Value::as_str);
    match (&step.calls, access) {
        (Some(calls), Some(access)) => format!("'{}' ({access} {calls})", step.id),
        _ => named(step),
    }
}

/// One kind of decision, as a phrase.
fn decision_part(step: &TraceStep, decision: &Decision, times: usize) -> String {
    let because = clipped(&decision.because, QUOTE_CHARS);
    match decision.took.as_str() {
        "continue" => {
            format!("loop '{}' went round {} (the first because {because})", decision.at, count(times, "time", "times"))
        }
        "exit" => format!("loop '{}' exited because {because}", decision.at),
        took if decision.at != step.id => format!("'{}' was {took}: {because}", decision.at),
        took if times > 1 => {
            format!("at '{}' the '{took}' arm was taken {times} times (the first because {because})", decision.at)
        }
        took => format!("at '{}' the '{took}' arm was taken because {because}", decision.at),
    }
}

/// Whether `text` shows a clock time (`HH:MM`).
fn has_clock(text: &str) -> bool {
    text.as_bytes().windows(5).any(|w| {
        w[0].is_ascii_digit() && w[1].is_ascii_digit() && w[2] == b':' && w[3].is_ascii_digit() && w[4].is_ascii_digit()
    })
}

/// `items` joined with `, `, at most `shown` of them, then `and N more`.
fn listed(items: impl Iterator<Item = String>, shown: usize) -> String {
    let items: Vec<String> = items.collect();
    let mut text = items.iter().take(shown).cloned().collect::<Vec<_>>().join(", ");
    if items.len() > shown {
        let _ = write!(text, ", and {} more", items.len() - shown);
    }
    text
}

/// `1 entry`, `3 entries`.
fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `3 rows`, `1 row`.
fn rows(n: u64) -> String {
    format!("{n} {}", if n == 1 { "row" } else { "rows" })
}

/// `text` cut to `chars` characters, with `…` when cut.
fn clipped(text: &str, chars: usize) -> String {
    let mut cut: String = text.chars().take(chars).collect();
    if cut.len() < text.len() {
        cut.pop();
        cut.push('…');
    }
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn questions_are_read_for_their_kind() {
        assert_eq!(asks("Why did nothing happen?"), [Ask::Nothing]);
        assert_eq!(asks("Why did it fail?"), [Ask::Failure]);
        assert_eq!(asks("How many rows matched?"), [Ask::Rows]);
        assert_eq!(asks("Why did the branch go this way?"), [Ask::Decisions]);
        assert_eq!(asks("Was the light really turned on?"), [Ask::Simulated]);
        assert!(asks("What is the user's favourite colour?").is_empty());
        assert_eq!(asks("what failed, what changed, which rows, when, which steps").len(), ASKS_ANSWERED);
    }

    #[test]
    fn clock_times_and_cuts() {
        assert!(has_clock("it is 14:03 in Europe/Paris"));
        assert!(!has_clock("4:3 is no clock"));
        assert_eq!(clipped("abcdef", 4), "abc…");
        assert_eq!(clipped("ééé", 3), "ééé");
        assert_eq!(clipped("éééé", 3), "éé…");
        assert_eq!(listed((1..=4).map(|n| n.to_string()), 2), "1, 2, and 2 more");
    }
}
