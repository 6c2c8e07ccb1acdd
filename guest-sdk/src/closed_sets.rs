//! Declared closed sets and the `closed-sets` guide renderer (Part II §1.5,
//! §5.2).
//!
//! A Language declares its sets once, as tables its code also uses
//! (diagnostic codes, statuses, entry kinds, risk levels). `complete`
//! adds what every Language must carry (the reserved diagnostic codes and
//! run statuses, and the statuses the platform itself may report), and
//! [`render`] writes the closed-sets guide from the same
//! [`LanguageInfo`], so the guide lists exactly what
//! the engine emits. [`ClosedSets`] holds a Language's tables and prose in
//! one constant, for `describe` and for the code that checks against them.

use crate::{
    CodeInfo, ExecutionMode, Features, Guide, GuideLevel, KindInfo, LanguageInfo, LocatorDialect, ProgramKind,
    RiskInfo, StatusInfo, SubprogramTracing, TraceCeiling,
};

/// The reserved diagnostic codes with their meanings (Part II §5.5).
pub const RESERVED_CODES: [(&str, &str); 3] = [
    ("constraint", "A finding the validator cannot classify more precisely."),
    ("input_binding", "The request's `input` does not fit the program; `path` points into `input`."),
    ("context_binding", "The request's `context` is missing, unexpected or malformed; `path` points into `context`."),
];

/// The reserved run statuses (Part II §5.7): (status, ok, side effects
/// possible, meaning).
pub const RESERVED_RUN_STATUSES: [(&str, bool, bool, &str); 6] = [
    ("success", true, true, "The program completed."),
    (
        "validation_error",
        false,
        false,
        "Refused: the program, input or context is invalid; diagnostics explain why. Nothing ran.",
    ),
    (
        "catalog_drift",
        false,
        false,
        "Refused: `expected_catalog_version` is no longer current. Nothing ran; look up and validate again.",
    ),
    (
        "promotion_drift",
        false,
        false,
        "Refused: an entry the promoted program uses changed since promotion. Nothing ran; promote again.",
    ),
    ("partial", false, true, "Execution began and did not complete; the trace shows how far it got."),
    ("error", false, true, "The Run failed and no more specific status applies."),
];

/// Statuses the platform reports on any Language's started Runs: (status,
/// ok, side effects possible, meaning).
pub const PLATFORM_RUN_STATUSES: [(&str, bool, bool, &str); 3] = [
    (
        "timeout",
        false,
        true,
        "The Run reached the platform's wall-time bound and was stopped; the trace shows the steps before it.",
    ),
    (
        "resource_exhausted",
        false,
        true,
        "The Run reached a platform bound on fuel (steps), memory, stack depth, invocations or trace size and was stopped. Or it could not start for want of the server's capacity: then nothing ran, the response has no trace and carries `retry_after_ms`, and the same request (same idempotency key) may be sent again after that many milliseconds.",
    ),
    (
        "engine_fault",
        false,
        true,
        "The Language engine broke the platform's contract (it trapped, called outside its plan, or its trace did not match the calls it made); the Run was failed rather than reported as a success.",
    ),
];

/// Bytes of compact JSON up to which a `summary` trace keeps a step output
/// whole. Equal to the platform's own setting.
pub const SUMMARY_OUTPUT_MAX_BYTES: usize = 256;
/// Characters of JSON text kept in a truncation marker's preview. Equal to
/// the platform's own setting.
pub const SUMMARY_PREVIEW_CHARS: usize = 120;
/// Bytes of compact JSON the outputs of one `summary` trace may take in
/// all. Equal to the platform's own setting.
pub const SUMMARY_OUTPUTS_MAX_BYTES: usize = 16384;

/// Diagnostic codes: the reserved three, then the Language's own.
pub fn diagnostic_codes(own: &[(&str, &str)]) -> Vec<CodeInfo> {
    RESERVED_CODES
        .iter()
        .chain(own.iter())
        .map(|(code, meaning)| CodeInfo { code: (*code).to_owned(), meaning: (*meaning).to_owned() })
        .collect()
}

/// Run statuses: the reserved six, the platform's three, then the
/// Language's own engine-defined ones.
pub fn run_statuses(own: &[(&str, bool, bool, &str)]) -> Vec<StatusInfo> {
    RESERVED_RUN_STATUSES.iter().chain(PLATFORM_RUN_STATUSES.iter()).chain(own.iter()).map(status).collect()
}

/// Step statuses, as declared (no reserved additions: a step uses whatever
/// the Language lists, reserved names keeping their meaning).
pub fn step_statuses(own: &[(&str, bool, bool, &str)]) -> Vec<StatusInfo> {
    own.iter().map(status).collect()
}

/// Catalog entry kinds from a table of (kind, callable, meaning) (Part II
/// §5.2).
pub fn entry_kinds(own: &[(&str, bool, &str)]) -> Vec<KindInfo> {
    own.iter()
        .map(|(kind, callable, meaning)| KindInfo {
            kind: (*kind).to_owned(),
            callable: *callable,
            meaning: (*meaning).to_owned(),
        })
        .collect()
}

/// Risk levels from a table of (risk, readOnly, destructive, openWorld,
/// meaning) (Part II §5.3). The platform's lint checks each level's hints
/// against its name.
pub fn risk_levels(own: &[(&str, bool, bool, bool, &str)]) -> Vec<RiskInfo> {
    own.iter()
        .map(|(risk, read_only, destructive, open_world, meaning)| RiskInfo {
            risk: (*risk).to_owned(),
            hints: crate::RiskHints { read_only: *read_only, destructive: *destructive, open_world: *open_world },
            meaning: (*meaning).to_owned(),
        })
        .collect()
}

/// A Markdown guide whose `version` follows its body ([`content_version`]),
/// listing `topics` (Part II §5.2). Topic bodies are left empty: a topic
/// fetch then answers with the whole body.
pub fn guide(id: &str, title: &str, level: GuideLevel, topics: &[&str], body: impl Into<String>) -> Guide {
    let body = body.into();
    Guide {
        id: id.to_owned(),
        title: title.to_owned(),
        level,
        topics: topics.iter().map(|topic| (*topic).to_owned()).collect(),
        version: content_version(&body),
        format: "text/markdown".to_owned(),
        body,
        topic_bodies: Vec::new(),
    }
}

/// A Language's closed sets as the tables its code reads, with the prose
/// of its closed-sets guide (Part II §1.5, §5.2): declared once as a
/// constant, filled into `describe`'s [`LanguageInfo`] by
/// [`language_info`](ClosedSets::language_info), rendered by
/// [`guide`](ClosedSets::guide), and read by the validator
/// ([`is_callable`](ClosedSets::is_callable)), so the three cannot drift.
///
/// ```
/// use pilotage_guest_sdk::closed_sets::{ClosedSets, Prose};
/// use pilotage_guest_sdk::language::STANDARD_RISK_LEVELS;
/// const SETS: ClosedSets = ClosedSets {
///     codes: &[("unknown_entry", "Error. `call` names no visible entry.")],
///     run_statuses: &[],
///     step_statuses: &[("success", true, true, "The step completed.")],
///     entry_kinds: &[("capability", true, "An action over HTTP."), ("table", false, "Rows.")],
///     risk_levels: &STANDARD_RISK_LEVELS,
///     prose: Prose { decisions: Some("Each `if` decides once."), ..Prose::EMPTY },
/// };
/// let info = pilotage_guest_sdk::LanguageInfo { name: "demo/v1".into(), ..SETS.language_info() };
/// assert!(info.diagnostic_codes.iter().any(|c| c.code == "constraint"), "the reserved codes are added");
/// assert!(SETS.guide("demo-closed-sets", &info).body.contains("Each `if` decides once."));
/// assert!(SETS.is_callable("capability") && !SETS.is_callable("table") && !SETS.is_callable("view"));
/// ```
#[derive(Clone, Copy, Debug)]
pub struct ClosedSets<'a> {
    /// The Language's own diagnostic codes: (code, meaning); the reserved
    /// three are added ([`diagnostic_codes`]).
    pub codes: &'a [(&'a str, &'a str)],
    /// The Language's own run statuses: (status, ok, side effects possible,
    /// meaning); the reserved and the platform's are added ([`run_statuses`]).
    pub run_statuses: &'a [(&'a str, bool, bool, &'a str)],
    /// Step statuses, as declared ([`step_statuses`]).
    pub step_statuses: &'a [(&'a str, bool, bool, &'a str)],
    /// Catalog entry kinds: (kind, callable, meaning) ([`entry_kinds`]).
    pub entry_kinds: &'a [(&'a str, bool, &'a str)],
    /// Risk levels: (risk, readOnly, destructive, openWorld, meaning)
    /// ([`risk_levels`]), usually
    /// [`STANDARD_RISK_LEVELS`](crate::language::STANDARD_RISK_LEVELS).
    pub risk_levels: &'a [(&'a str, bool, bool, bool, &'a str)],
    /// The closed-sets guide's prose sections.
    pub prose: Prose<'a>,
}

impl ClosedSets<'_> {
    /// A [`LanguageInfo`] holding these sets, for struct-update syntax in
    /// `describe` (`LanguageInfo { name, title, program_argument, execution,
    /// features, ..SETS.language_info() }`). The other fields are those of
    /// most JSON-program Languages, to override as needed: `program_kind`
    /// `json`, `locator` `json-pointer`, `execution` `immediate`, `trace`
    /// `full`, subprograms `opaque`, no `context_schema`, every feature off,
    /// and empty `name`, `title`, `program_argument` and `guides` (an empty
    /// name fails the platform's lint, so it cannot go unnoticed).
    pub fn language_info(&self) -> LanguageInfo {
        LanguageInfo {
            name: String::new(),
            title: String::new(),
            program_kind: ProgramKind::Json,
            program_argument: String::new(),
            locator: LocatorDialect::JsonPointer,
            execution: ExecutionMode::Immediate,
            trace: TraceCeiling::Full,
            trace_subprogram: SubprogramTracing::Opaque,
            context_schema: None,
            features: Features { plan: false, catalog: false, execute: false, test_run: false, promotion: false },
            diagnostic_codes: diagnostic_codes(self.codes),
            run_statuses: run_statuses(self.run_statuses),
            step_statuses: step_statuses(self.step_statuses),
            entry_kinds: entry_kinds(self.entry_kinds),
            risk_levels: risk_levels(self.risk_levels),
            guides: Vec::new(),
        }
    }

    /// The closed-sets guide of `info` (filled from these sets) with this
    /// prose: [`render`].
    pub fn guide(&self, id: &str, info: &LanguageInfo) -> Guide {
        render(id, info, &self.prose)
    }

    /// Whether `kind` is a declared entry kind that can be called; an
    /// undeclared kind cannot.
    pub fn is_callable(&self, kind: &str) -> bool {
        self.entry_kinds.iter().any(|(name, callable, _)| *name == kind && *callable)
    }
}

fn status(&(status, ok, side_effects, meaning): &(&str, bool, bool, &str)) -> StatusInfo {
    StatusInfo { status: status.to_owned(), ok, side_effects, meaning: meaning.to_owned() }
}

/// Prose sections of the closed-sets guide that only the author can write.
/// Each is rendered under its own heading when present.
#[derive(Clone, Copy, Debug, Default)]
pub struct Prose<'a> {
    /// Scope rules for values produced in branch arms and loop bodies
    /// (mandatory when the Language has branches or loops).
    pub scope_rules: Option<&'a str>,
    /// The parameter-binding convention for `input` (mandatory when inline
    /// programs accept input).
    pub parameter_binding: Option<&'a str>,
    /// The deterministic step-identifier scheme (mandatory when programs
    /// have no native step ids).
    pub step_ids: Option<&'a str>,
    /// The meaning of the run-level `output` (mandatory with `execute`).
    pub output: Option<&'a str>,
    /// How loop and branch decisions are written.
    pub decisions: Option<&'a str>,
}

impl Prose<'_> {
    /// No prose, for `..Prose::EMPTY` in a constant (where
    /// `Default::default()` cannot be called).
    pub const EMPTY: Prose<'static> =
        Prose { scope_rules: None, parameter_binding: None, step_ids: None, output: None, decisions: None };
}

/// Renders the closed-sets guide (level `reference`, topic `closed-sets`)
/// for `info`, whose sets should come from [`diagnostic_codes`],
/// [`run_statuses`] and the Language's own tables. `id` must be unique on
/// the Server; the guide's `version` is derived from its body, so it
/// changes whenever the content does.
pub fn render(id: &str, info: &LanguageInfo, prose: &Prose<'_>) -> Guide {
    let mut body = String::new();
    let line = |body: &mut String, text: &str| {
        body.push_str(text);
        body.push('\n');
    };
    line(&mut body, &format!("# {}: closed sets", info.name));
    line(&mut body, "");
    line(
        &mut body,
        "Every value below is closed for this Language version. Branch on these values, never on message text.",
    );
    line(&mut body, "");

    line(&mut body, "## Diagnostic codes");
    line(&mut body, "");
    line(&mut body, "| code | meaning |");
    line(&mut body, "|---|---|");
    for code in &info.diagnostic_codes {
        line(&mut body, &format!("| `{}` | {} |", code.code, code.meaning));
    }
    line(&mut body, "");
    line(
        &mut body,
        "`constraint`, `input_binding` and `context_binding` are reserved by Pilotage. Severity is `error` (the program is invalid) or `warning` (it stays valid).",
    );
    line(&mut body, "");

    if info.features.catalog {
        line(&mut body, "## Catalog entry kinds");
        line(&mut body, "");
        line(&mut body, "| kind | callable | meaning |");
        line(&mut body, "|---|---|---|");
        for KindInfo { kind, callable, meaning } in &info.entry_kinds {
            line(&mut body, &format!("| `{kind}` | {} | {meaning} |", if *callable { "yes" } else { "no" }));
        }
        line(&mut body, "");
    }

    if info.features.catalog || info.features.plan {
        line(&mut body, "## Risk levels");
        line(&mut body, "");
        line(&mut body, "| risk | readOnly | destructive | openWorld | meaning |");
        line(&mut body, "|---|---|---|---|---|");
        for RiskInfo { risk, hints, meaning } in &info.risk_levels {
            line(
                &mut body,
                &format!(
                    "| `{risk}` | {} | {} | {} | {meaning} |",
                    hints.read_only, hints.destructive, hints.open_world
                ),
            );
        }
        line(&mut body, "");
        line(
            &mut body,
            "A plan's `max_risk_hints` aggregates its steps: readOnly is the AND, destructive and openWorld the OR.",
        );
        line(&mut body, "");
    }

    let sections = [
        ("Scope rules", prose.scope_rules),
        ("Parameter binding", prose.parameter_binding),
        ("Step identifiers", prose.step_ids),
        ("Decisions", prose.decisions),
    ];
    for (heading, text) in sections {
        if let Some(text) = text {
            line(&mut body, &format!("## {heading}"));
            line(&mut body, "");
            line(&mut body, text.trim_end());
            line(&mut body, "");
        }
    }

    if info.features.execute {
        for (heading, statuses) in
            [("Run outcome statuses", &info.run_statuses), ("Step outcome statuses", &info.step_statuses)]
        {
            line(&mut body, &format!("## {heading}"));
            line(&mut body, "");
            line(&mut body, "| status | ok | side effects possible | meaning |");
            line(&mut body, "|---|---|---|---|");
            for StatusInfo { status, ok, side_effects, meaning } in statuses {
                line(
                    &mut body,
                    &format!("| `{status}` | {ok} | {} | {meaning} |", if *side_effects { "yes" } else { "no" }),
                );
            }
            line(&mut body, "");
        }
        line(&mut body, "An unknown failed status must be read as `partial`.");
        line(&mut body, "");
        line(&mut body, "## Summary traces");
        line(&mut body, "");
        line(
            &mut body,
            &format!(
                "At `summary`, steps carry `id`, `outcome`, `t_ms`, decisions and `output`, never `input`. An output whose compact JSON text is at most {SUMMARY_OUTPUT_MAX_BYTES} bytes is kept whole; a longer one is replaced by `{{\"truncated\": true, \"bytes\": N, \"preview\": \"<first {SUMMARY_PREVIEW_CHARS} characters of the JSON text>…\"}}`, where N is the byte length of the full JSON text. When the output is an object, the marker also carries `scalars`: its top-level members whose values are numbers, booleans or null (counts and flags stay readable as fields). The outputs of one summary trace take at most {SUMMARY_OUTPUTS_MAX_BYTES} bytes of that JSON in all: from the first step whose output would pass it, steps carry no `output` (fetch the trace at `full` for them)."
            ),
        );
        line(&mut body, "");
        if let Some(output) = prose.output {
            line(&mut body, "## Run output");
            line(&mut body, "");
            line(&mut body, output.trim_end());
            line(&mut body, "");
        }
    }

    Guide {
        id: id.to_owned(),
        title: format!("{}: closed sets (codes, statuses, kinds, risk, rules)", info.name),
        level: GuideLevel::Reference,
        topics: vec!["closed-sets".to_owned()],
        version: content_version(&body),
        format: "text/markdown".to_owned(),
        body,
        topic_bodies: Vec::new(),
    }
}

/// A short version string derived from content (FNV-1a 64), so a guide's
/// `version` changes whenever its body does (Part II §5.2).
pub fn content_version(body: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in body.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{hash:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ExecutionMode, Features, LocatorDialect, ProgramKind, SubprogramTracing, TraceCeiling};

    fn info() -> LanguageInfo {
        LanguageInfo {
            name: "demo/v1".into(),
            title: "Demo".into(),
            program_kind: ProgramKind::Json,
            program_argument: "program".into(),
            locator: LocatorDialect::JsonPointer,
            execution: ExecutionMode::Immediate,
            trace: TraceCeiling::Full,
            trace_subprogram: SubprogramTracing::Opaque,
            context_schema: None,
            features: Features { plan: true, catalog: true, execute: true, test_run: false, promotion: false },
            diagnostic_codes: diagnostic_codes(&[("unknown_capability", "No visible entry has this id.")]),
            run_statuses: run_statuses(&[]),
            step_statuses: step_statuses(&[("success", true, true, "Done.")]),
            entry_kinds: vec![KindInfo {
                kind: "capability".into(),
                callable: true,
                meaning: "An HTTP action.".into(),
            }],
            risk_levels: vec![RiskInfo { risk: "safe".into(), hints: crate::diag::SAFE, meaning: "Reads.".into() }],
            guides: vec![],
        }
    }

    #[test]
    fn the_guide_lists_every_declared_and_reserved_value() {
        let guide =
            render("demo-closed-sets", &info(), &Prose { output: Some("The mapped output."), ..Prose::default() });
        for needle in [
            "`constraint`",
            "`input_binding`",
            "`context_binding`",
            "`unknown_capability`",
            "`validation_error`",
            "`catalog_drift`",
            "`promotion_drift`",
            "`partial`",
            "`timeout`",
            "`resource_exhausted`",
            "`engine_fault`",
            "`capability`",
            "`safe`",
            "truncated",
            "The mapped output.",
        ] {
            assert!(guide.body.contains(needle), "missing {needle}");
        }
        assert_eq!(guide.level, GuideLevel::Reference);
        assert_eq!(guide.topics, ["closed-sets"]);
    }

    const SETS: ClosedSets<'static> = ClosedSets {
        codes: &[("unknown_capability", "No visible entry has this id.")],
        run_statuses: &[("stopped", false, true, "Stopped by the program.")],
        step_statuses: &[("success", true, true, "Done.")],
        entry_kinds: &[("capability", true, "An HTTP action."), ("table", false, "Rows.")],
        risk_levels: &crate::language::STANDARD_RISK_LEVELS,
        prose: Prose { decisions: Some("Each `if` decides once."), ..Prose::EMPTY },
    };

    #[test]
    fn closed_sets_fill_the_description_and_its_guide_alike() {
        let mut info = LanguageInfo {
            name: "demo/v1".into(),
            features: Features { plan: true, catalog: true, execute: true, test_run: false, promotion: false },
            ..SETS.language_info()
        };
        assert_eq!(info.diagnostic_codes.len(), 4, "the reserved three, then the own one");
        assert_eq!(info.run_statuses.last().map(|s| s.status.as_str()), Some("stopped"));
        assert_eq!((info.locator, info.program_kind), (LocatorDialect::JsonPointer, ProgramKind::Json));
        info.guides.push(SETS.guide("demo-closed-sets", &info));
        let body = &info.guides[0].body;
        for needle in
            ["`unknown_capability`", "`stopped`", "`table` | no", "`external_write`", "Each `if` decides once."]
        {
            assert!(body.contains(needle), "missing {needle}");
        }
        assert_eq!(info.guides[0].body, render("demo-closed-sets", &info, &SETS.prose).body);
    }

    #[test]
    fn only_declared_callable_kinds_are_callable() {
        assert!(SETS.is_callable("capability"));
        assert!(!SETS.is_callable("table"), "declared, not callable");
        assert!(!SETS.is_callable("Capability") && !SETS.is_callable("view"), "undeclared");
    }

    #[test]
    fn version_follows_content() {
        let a = render("x", &info(), &Prose::default());
        let mut changed = info();
        changed.diagnostic_codes.push(CodeInfo { code: "new_code".into(), meaning: "m".into() });
        let b = render("x", &changed, &Prose::default());
        assert_ne!(a.version, b.version);
        assert_eq!(a.version, render("x", &info(), &Prose::default()).version);
    }
}
