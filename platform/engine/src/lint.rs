//! The conformance lint of a Language's self-description against Part II:
//! what `pilotage language check` prints and what an upload must pass.

use std::collections::BTreeSet;

use serde::Serialize;

use super::description::{Exposure, GuideContent, LanguageDescription};
use pilotage_protocol::diagnostic::RESERVED_CODES;
use pilotage_protocol::guide::{CORE_GUIDE_MAX_BYTES, GuideLevel};
use pilotage_protocol::manifest::{Manifest, check_manifest};
use pilotage_protocol::outcome::{PLATFORM_STATUSES, RESERVED_STATUSES, SUCCESS};
use pilotage_protocol::retention::Retention;
use pilotage_protocol::trace::TraceLevel;

/// How serious a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LintSeverity {
    /// The Language cannot be exposed conformantly.
    Error,
    /// Allowed, but against a SHOULD of the spec.
    Warning,
}

/// One lint finding.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LintFinding {
    /// Error or warning.
    pub severity: LintSeverity,
    /// A short rule name, e.g. `core-guide`.
    pub rule: &'static str,
    /// What is wrong, with the spec section.
    pub message: String,
    /// How to fix it in the component: what to change in `describe`, and
    /// the guest SDK helper that does it when there is one.
    pub fix: String,
}

/// `error [rule] message`, then `fix: …` on an indented line: the form
/// `pilotage language check`, an upload refusal and `serve --language` print.
impl std::fmt::Display for LintFinding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let severity = match self.severity {
            LintSeverity::Error => "error",
            LintSeverity::Warning => "warning",
        };
        write!(f, "{severity} [{}] {}\n    fix: {}", self.rule, self.message, self.fix)
    }
}

/// Names a Language may not use for its program argument: they are the
/// reserved loop-tool members (Part III §4.4).
pub const RESERVED_ARGUMENTS: [&str; 12] = [
    "program_ref",
    "input",
    "context",
    "trace_level",
    "expected_catalog_version",
    "idempotency_key",
    "test_run",
    "mode",
    "store",
    "run_id",
    "question",
    pilotage_protocol::assertions::MEMBER,
];

/// Lints a description. Returns every finding, errors first.
pub fn lint(description: &LanguageDescription) -> Vec<LintFinding> {
    let mut findings = Vec::new();
    let mut error = |rule: &'static str, message: String| {
        findings.push(LintFinding { severity: LintSeverity::Error, rule, message, fix: fix_for(rule).to_owned() });
    };
    identity(description, &mut error);
    reserved_members(description, &mut error);
    declared_sets(description, &mut error);
    guides(description, &mut error);
    capabilities(description, &mut error);
    findings.extend(core_guide_sizes(description));
    findings.sort_by_key(|finding| finding.severity);
    findings
}

/// The Language's identity (Part II §3.3): a `family/version` name and a
/// program argument of its own.
fn identity(description: &LanguageDescription, error: &mut impl FnMut(&'static str, String)) {
    let parts: Vec<&str> = description.name.split('/').collect();
    if parts.len() != 2 || parts.iter().any(|p| p.is_empty()) {
        error(
            "identifier",
            format!("'{}' is not a Language identifier of the form family/version (Part II §3.3)", description.name),
        );
    }
    if description.program_argument.is_empty() || RESERVED_ARGUMENTS.contains(&description.program_argument.as_str()) {
        error(
            "program-argument",
            format!(
                "program argument '{}' is empty or a reserved loop-tool member (Part III §4.4)",
                description.program_argument
            ),
        );
    }
}

/// The reserved members of the closed sets (Part II §5.5, §5.7): the
/// reserved diagnostic codes, and for execute the reserved and platform
/// run statuses, step statuses and a trace ceiling that can carry the
/// trace.
fn reserved_members(description: &LanguageDescription, error: &mut impl FnMut(&'static str, String)) {
    for code in RESERVED_CODES {
        if !description.declares_code(code) {
            error("reserved-codes", format!("the diagnostic-code set lacks the reserved code '{code}' (Part II §5.5)"));
        }
    }
    if description.features.execute {
        for status in RESERVED_STATUSES.iter().chain(PLATFORM_STATUSES.iter()) {
            match description.run_status(status) {
                None => error(
                    "run-statuses",
                    format!(
                        "the run-status set lacks '{status}', reserved by Pilotage or reported by the platform (Part II §5.7)"
                    ),
                ),
                Some(info) if info.ok != (*status == SUCCESS) => {
                    error("run-statuses", format!("run status '{status}' declares ok={} (Part II §5.7)", info.ok))
                }
                Some(_) => {}
            }
        }
        if description.step_statuses.is_empty() {
            error("step-statuses", "execute is supported but the step-level status set is empty (Part II §5.7)".into());
        }
        if !matches!(description.trace_ceiling, TraceLevel::Summary | TraceLevel::Full) {
            error("trace-obligation", "execute needs a trace ceiling of summary or full (Part II §4.3 rule 4)".into());
        }
    }
}

/// The declared sets themselves: no member twice (Part II §1.5), risk
/// levels whose hints agree with their names, the entry kinds and risk
/// levels a catalog needs, a compilable context schema.
fn declared_sets(description: &LanguageDescription, error: &mut impl FnMut(&'static str, String)) {
    let duplicates = |names: Vec<&str>| -> Vec<String> {
        let mut seen = BTreeSet::new();
        names.into_iter().filter(|name| !seen.insert(*name)).map(str::to_owned).collect()
    };
    for (set, names) in [
        ("diagnostic code", description.diagnostic_codes.iter().map(|c| c.code.as_str()).collect::<Vec<_>>()),
        ("run status", description.run_statuses.iter().map(|s| s.status.as_str()).collect()),
        ("step status", description.step_statuses.iter().map(|s| s.status.as_str()).collect()),
        ("entry kind", description.entry_kinds.iter().map(|k| k.kind.as_str()).collect()),
        ("risk level", description.risk_levels.iter().map(|r| r.risk.as_str()).collect()),
        ("guide id", description.guides.iter().map(|g| g.guide.id.as_str()).collect()),
    ] {
        for duplicate in duplicates(names) {
            error("closed-sets", format!("{set} '{duplicate}' is declared twice (Part II §1.5)"));
        }
    }
    for level in &description.risk_levels {
        if let Some(problem) = level.hints.inconsistency_with(&level.risk) {
            error("risk-consistency", format!("{problem} (Part II §5.3)"));
        }
    }
    if description.features.catalog {
        if description.entry_kinds.is_empty() {
            error("entry-kinds", "catalog is declared but no entry kind is (Part II §5.2)".into());
        }
        if description.risk_levels.is_empty() {
            error("risk-levels", "catalog is declared but no risk level is (Part II §5.2)".into());
        }
    }
    if let Some(schema) = &description.context_schema
        && (!schema.is_object() || jsonschema::validator_for(schema).is_err())
    {
        error("context-schema", "context_schema is not a compilable JSON Schema object (Part II §5.1)".into());
    }
}

/// The guides (Part II §5.2): a core guide, exactly one closed-sets
/// guide, and each guide's version, body and topics.
fn guides(description: &LanguageDescription, error: &mut impl FnMut(&'static str, String)) {
    if !description.guides.iter().any(|g| g.guide.level == GuideLevel::Core) {
        error("core-guide", "no guide has level 'core' (Part II §5.2)".into());
    }
    let closed: Vec<_> = description.guides.iter().filter(|g| g.guide.is_closed_sets()).collect();
    match closed.as_slice() {
        [] => error("closed-sets-guide", "no guide has the topic 'closed-sets' (Part II §5.2)".into()),
        [guide] => closed_sets_guide(description, guide, error),
        many => error(
            "closed-sets-guide",
            format!("{} guides have the topic 'closed-sets'; exactly one may (Part II §5.2)", many.len()),
        ),
    }
    for guide in &description.guides {
        if guide.guide.version.is_empty() {
            error("guide-version", format!("guide '{}' has an empty version (Part II §5.2)", guide.guide.id));
        }
        if guide.body.is_empty() {
            error("guide-body", format!("guide '{}' has an empty body (Part II §5.2)", guide.guide.id));
        }
        for topic in guide.topic_bodies.keys() {
            if !guide.guide.topics.contains(topic) {
                error(
                    "guide-topics",
                    format!(
                        "guide '{}' has a body for topic '{topic}' it does not list (Part II §5.2)",
                        guide.guide.id
                    ),
                );
            }
        }
    }
}

/// The closed-sets guide (Part II §5.2): a reference guide that
/// enumerates every member of the sets the Language declares.
fn closed_sets_guide(
    description: &LanguageDescription,
    guide: &GuideContent,
    error: &mut impl FnMut(&'static str, String),
) {
    if guide.guide.level != GuideLevel::Reference {
        error(
            "closed-sets-guide",
            format!("the closed-sets guide '{}' must have level 'reference' (Part II §5.2)", guide.guide.id),
        );
    }
    let body = guide.body.as_str();
    let mut missing = Vec::new();
    let mut expect = |what: &str, value: &str| {
        if !body.contains(value) {
            missing.push(format!("{what} '{value}'"));
        }
    };
    for code in &description.diagnostic_codes {
        expect("diagnostic code", &code.code);
    }
    if description.features.catalog {
        for kind in &description.entry_kinds {
            expect("entry kind", &kind.kind);
        }
    }
    if description.features.catalog || description.features.plan {
        for level in &description.risk_levels {
            expect("risk level", &level.risk);
        }
    }
    if description.features.execute {
        for status in description.run_statuses.iter().chain(&description.step_statuses) {
            expect("status", &status.status);
        }
        expect("the summary truncation format", "truncated");
    }
    for item in missing {
        error("closed-sets-guide", format!("the closed-sets guide does not enumerate {item} (Part II §5.2)"));
    }
}

/// Capability rules on the manifest entry the platform would publish
/// (Part II §4.3), with runs retained for an hour.
fn capabilities(description: &LanguageDescription, error: &mut impl FnMut(&'static str, String)) {
    let retention = Retention::parse("PT1H").unwrap_or(Retention::None);
    let exposure = Exposure { loop_tools: description.default_loop_tools(&retention), retention, idempotency: true };
    let manifest = Manifest {
        pilotage: pilotage_protocol::PILOTAGE_VERSION.to_owned(),
        languages: vec![description.language_entry(&exposure)],
        capabilities: None,
    };
    for violation in check_manifest(&manifest, |_| description.features.catalog) {
        error("capabilities", violation.to_string());
    }
}

/// Warnings for core guides over [`CORE_GUIDE_MAX_BYTES`] (a SHOULD of
/// Part II §5.2).
fn core_guide_sizes(description: &LanguageDescription) -> Vec<LintFinding> {
    let mut warnings = Vec::new();
    for core in description.guides.iter().filter(|g| g.guide.level == GuideLevel::Core) {
        if core.guide.size_bytes > CORE_GUIDE_MAX_BYTES {
            warnings.push(LintFinding {
                severity: LintSeverity::Warning,
                rule: "core-guide-size",
                fix: fix_for("core-guide-size").to_owned(),
                message: format!(
                    "core guide '{}' is {} bytes; it should be at most {CORE_GUIDE_MAX_BYTES} (Part II §5.2)",
                    core.guide.id, core.guide.size_bytes
                ),
            });
        }
    }
    warnings
}

/// How to fix a finding of `rule`, said in terms of the WIT world's
/// `language-info` and the guest SDK (`guest-sdk/src/closed_sets.rs`);
/// `docs/writing-a-language.md` walks through each.
pub fn fix_for(rule: &str) -> &'static str {
    match rule {
        "identifier" => {
            "set `name` to family/version, e.g. \"recipe/v1\"; bump the version when programs may change meaning"
        }
        "program-argument" => {
            "set `program-argument` to a name of your own, e.g. the family (\"recipe\"), not a reserved loop-tool member"
        }
        "reserved-codes" => {
            "build `diagnostic-codes` with closed_sets::diagnostic_codes(&OWN), which adds constraint, input_binding and context_binding"
        }
        "run-statuses" => {
            "build `run-statuses` with closed_sets::run_statuses(&OWN), which adds the reserved and platform statuses with the right ok values"
        }
        "step-statuses" => {
            "list at least the step statuses your trace emits, e.g. closed_sets::step_statuses(&[(\"success\", true, true, …), (\"error\", false, true, …)])"
        }
        "trace-obligation" => "set `trace` to full (or summary) when `features.execute` is true",
        "closed-sets" => "remove the duplicate from its table: every closed set lists each value once",
        "risk-consistency" => {
            "make the level's hints match its name: a read-only level has readOnly true and destructive false; only a destructive level sets destructive"
        }
        "entry-kinds" => {
            "list the catalog entry kinds programs may reference (closed_sets::entry_kinds), or set `features.catalog` false"
        }
        "risk-levels" => "list the risk levels plans use (closed_sets::risk_levels), or set `features.catalog` false",
        "context-schema" => {
            "give `context-schema` as the JSON text of a JSON Schema object, or none when programs take no context"
        }
        "core-guide" => "add a guide of level core: the grammar in brief and one runnable example (closed_sets::guide)",
        "closed-sets-guide" => {
            "render exactly one closed-sets guide with closed_sets::render(id, &info, &prose) after filling every set, so it lists them all"
        }
        "guide-version" => "give every guide a version; closed_sets::guide derives one from the body",
        "guide-body" => "give every guide a non-empty body",
        "guide-topics" => "list the topic in the guide's `topics`, or drop its topic body",
        "capabilities" => {
            "make `features` consistent (Part II §4.3): execute needs a trace ceiling; test-run needs deploy or both; plan and catalog as the engine really supports"
        }
        "core-guide-size" => {
            "move detail out of the core guide into a reference or examples guide; keep core under 8 KiB"
        }
        _ => "see the spec section the message names",
    }
}

/// Whether any finding is an error.
pub fn has_errors(findings: &[LintFinding]) -> bool {
    findings.iter().any(|f| f.severity == LintSeverity::Error)
}
