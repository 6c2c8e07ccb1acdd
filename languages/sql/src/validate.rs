//! Validation, plan derivation and input binding for sql/postgres-15
//! (Part II §5.5, §5.6, §6.4, §6.5.5; Part IV §7). Validation reads the
//! caller's visible catalog and nothing else; it never touches the
//! database.
//!
//! Step identifiers: statement `k` (1-based, in text order) is `stmt-k`;
//! the relations it references follow it as `stmt-k.ref-j`, numbered in
//! resolution order (the order the analyzer meets them: WITH definitions,
//! then FROM items left to right, then subqueries in the order they
//! appear; for INSERT the source query before the target), each relation
//! once per statement.

use pilotage_guest_sdk::diag::{aggregate, error_in};
use pilotage_guest_sdk::{Catalog, CatalogEntry, Diagnostic, Plan, PlanStep, Severity, Validation};
use serde_json::Value;

use crate::analyze::{Analysis, Analyzer, Class, Relations};
use crate::codes;
use crate::params::{bind, statement_parameters};
use crate::program::{Program, parse, render};
use crate::qualify::qualify;

/// A program that passed parsing, with what analysis learned.
pub struct Checked {
    /// The parsed program.
    pub program: Program,
    /// One analysis per statement, in order.
    pub analyses: Vec<Analysis>,
    /// How many parameters each statement needs (`$1…$k`).
    pub needed: Vec<u32>,
    /// How many parameters the program takes.
    pub parameters: u32,
    /// The text each statement runs as: its tree with every catalog
    /// relation schema-qualified ([`crate::qualify`]), rendered; `None` for
    /// a statement with errors, which never runs.
    pub runnable: Vec<Option<String>>,
}

/// The analyzer reads the visible catalog through its own narrow view
/// ([`crate::analyze::Catalog`]: an entry, the ids of one kind). Every SDK
/// catalog is one, its ids of a kind being [`Catalog::ids_of_kind`] (the
/// host's `ids` with that kind in the component).
impl<C: Catalog + ?Sized> crate::analyze::Catalog for C {
    fn get(&self, id: &str) -> Option<CatalogEntry> {
        self.entry(id)
    }
    fn ids(&self, kind: &str) -> Vec<String> {
        self.ids_of_kind(kind)
    }
}

/// Parses and analyzes `text` against `catalog`: every finding, and the
/// analysis when the text parses.
pub fn check(text: &str, catalog: &impl Catalog) -> (Option<Checked>, Vec<Diagnostic>) {
    let program = match parse(text) {
        Ok(program) => program,
        Err(diagnostic) => return (None, vec![diagnostic]),
    };
    let relations = Relations::load(catalog);
    let mut diagnostics = Vec::new();
    if program.statements.len() > codes::MAX_STATEMENTS {
        diagnostics.push(error_in(
            codes::MULTIPLE_STATEMENTS,
            program.whole,
            format!(
                "the program holds {} statements; the bound is {}",
                program.statements.len(),
                codes::MAX_STATEMENTS
            ),
        ));
    }
    let several = program.statements.len() > 1;
    let mut analyses = Vec::new();
    let mut needed = Vec::new();
    let mut used = Vec::new();
    let mut runnable = Vec::new();
    for parsed in &program.statements {
        let (analysis, findings) = Analyzer::new(&relations, parsed.range).statement(&parsed.statement);
        let checked = !findings.iter().any(|d| d.severity == Severity::Error);
        diagnostics.extend(findings);
        // What runs is the checked tree with its relations qualified, and
        // it must render back to exactly that tree.
        let text = checked.then(|| {
            qualify(&parsed.statement, &analysis.names)
                .map_err(|problem| {
                    error_in(
                        pilotage_guest_sdk::diag::CONSTRAINT,
                        parsed.range,
                        format!("this statement cannot be run safely ({problem}); simplify it"),
                    )
                })
                .and_then(|qualified| render(&qualified, parsed.range))
        });
        runnable.push(match text {
            Some(Ok(text)) => Some(text),
            Some(Err(diagnostic)) => {
                diagnostics.push(diagnostic);
                None
            }
            None => None,
        });
        if several && analysis.class != Class::Query {
            diagnostics.push(pilotage_guest_sdk::diag::with_hint(
                error_in(
                    codes::MULTIPLE_STATEMENTS,
                    parsed.range,
                    "only queries may share a program: this statement follows or precedes others in one program"
                        .to_owned(),
                ),
                Some(
                    "a data-changing statement must be the program's only statement; send it as a program of its own"
                        .into(),
                ),
            ));
        }
        let (count, findings) = statement_parameters(&analysis.placeholders, &parsed.range);
        diagnostics.extend(findings);
        used.extend(analysis.placeholders.iter().filter_map(|p| p.number));
        needed.push(count);
        analyses.push(analysis);
    }
    let parameters = used.iter().copied().max().unwrap_or(0);
    if let Some(missing) = (1..=parameters).find(|n| !used.contains(n)) {
        diagnostics.push(error_in(
            codes::PARAMETER_MISMATCH,
            program.whole,
            format!("the program uses ${parameters} but never ${missing}"),
        ));
    }
    (Some(Checked { program, analyses, needed, parameters, runnable }), diagnostics)
}

/// Validates `text` against `catalog`: diagnostics, and for a valid
/// program its plan, references and the statements it may run (rendered
/// from the parse tree, comments dropped, every catalog relation
/// schema-qualified as it resolved: `"schema"."relation"`).
pub fn validate(text: &str, catalog: &impl Catalog) -> Validation {
    let (checked, diagnostics) = check(text, catalog);
    let valid = !diagnostics.iter().any(|d| d.severity == Severity::Error);
    let Some(checked) = checked.filter(|_| valid) else {
        return Validation { diagnostics, plan: None, references: Vec::new(), statements: Vec::new() };
    };
    let mut references: Vec<String> = Vec::new();
    for analysis in &checked.analyses {
        for (id, _) in &analysis.references {
            if !references.contains(id) {
                references.push(id.clone());
            }
        }
    }
    Validation {
        diagnostics,
        plan: Some(plan(&checked)),
        references,
        statements: checked.runnable.iter().flatten().cloned().collect(),
    }
}

/// The id of statement `index` (0-based).
pub fn statement_id(index: usize) -> String {
    format!("stmt-{}", index + 1)
}

/// The id of reference `reference` (0-based) of statement `index`.
pub fn reference_id(index: usize, reference: usize) -> String {
    format!("stmt-{}.ref-{}", index + 1, reference + 1)
}

/// The plan: per statement, the statement step (risk of its class) and
/// one reference sub-step per relation (risk of its access), in order.
pub fn plan(checked: &Checked) -> Plan {
    let mut steps = Vec::new();
    for (index, analysis) in checked.analyses.iter().enumerate() {
        let hints = analysis.class.hints();
        steps.push(PlanStep {
            id: statement_id(index),
            calls: None,
            arm: None,
            loop_: None,
            risk: codes::risk_label(hints.read_only, hints.destructive).to_owned(),
            risk_hints: hints,
        });
        for (position, (id, access)) in analysis.references.iter().enumerate() {
            let hints = access.hints();
            steps.push(PlanStep {
                id: reference_id(index, position),
                calls: Some(id.clone()),
                arm: None,
                loop_: None,
                risk: codes::risk_label(hints.read_only, hints.destructive).to_owned(),
                risk_hints: hints,
            });
        }
    }
    let max = aggregate(steps.iter().map(|step| step.risk_hints));
    Plan { steps, max_risk: codes::risk_label(max.read_only, max.destructive).to_owned() }
}

/// A catalog with nothing in it: parameters can be counted without one.
struct NoCatalog;

impl Catalog for NoCatalog {
    fn entry(&self, _id: &str) -> Option<CatalogEntry> {
        None
    }
    fn ids(&self) -> Vec<String> {
        Vec::new()
    }
}

/// How many parameters `text` takes, or `None` when it does not parse.
pub fn parameter_count(text: &str) -> Option<u32> {
    check(text, &NoCatalog).0.map(|checked| checked.parameters)
}

/// Checks the Run's `input` against the program's parameters (Part II
/// §6.5.5): every finding is `input_binding` with a pointer into `input`.
pub fn bind_input(text: &str, input: Option<&Value>) -> Vec<Diagnostic> {
    match parameter_count(text) {
        Some(count) => bind(count, input).err().unwrap_or_default(),
        None => vec![pilotage_guest_sdk::diag::error_at(
            pilotage_guest_sdk::diag::INPUT_BINDING,
            "",
            "the program does not parse, so its parameters are unknown; validate it first",
        )],
    }
}
