//! `hostile/v1`: a Language component that misbehaves on request, so the
//! platform's tests can prove the host's answer to each misbehaviour and
//! that the next call is served.
//!
//! The program text selects the behaviour: `validate:<mode>` misbehaves in
//! `validate`, `execute:<mode>` validates cleanly (a plan calling `cap_a`)
//! and misbehaves in `execute`. Anything else is a well-behaved program
//! whose plan calls `cap_a` once.
//!
//! Modes: `spin` (loops forever), `alloc` (allocates without bound),
//! `recurse` (recurses without bound), `huge` (returns a huge result),
//! `trap` (panics), `undeclared_code` (emits a code outside its set),
//! `claims_valid` (an error diagnostic alongside a plan), `bad_step_id`
//! (a plan step id with `#`), `outside_plan` (invokes `cap_b`, which is not
//! in its plan), `hide_call` (invokes `cap_a`, traces nothing),
//! `invent_call` (traces a call to `cap_a` it never made), `wrong_branch`
//! (traces a step the plan does not have).

#![allow(unsafe_code)] // wit-bindgen's export glue.

use pilotage_guest_sdk::closed_sets::{self, Prose};
use pilotage_guest_sdk::diag::{SAFE, error_at, failure, success};
use pilotage_guest_sdk::{
    Diagnostic, ExecutionMode, Features, Guest, KindInfo, LanguageInfo, LocatorDialect, Plan, PlanStep, ProgramKind,
    RiskInfo, RunRequest, RunResult, SubprogramTracing, TraceCeiling, TraceStep, Validation, host,
};

struct Hostile;

fn info() -> LanguageInfo {
    let mut info = LanguageInfo {
        name: "hostile/v1".into(),
        title: "A misbehaving Language for the platform's tests".into(),
        program_kind: ProgramKind::Text,
        program_argument: "program".into(),
        locator: LocatorDialect::TextRange,
        execution: ExecutionMode::Immediate,
        trace: TraceCeiling::Full,
        trace_subprogram: SubprogramTracing::Opaque,
        context_schema: None,
        features: Features { plan: true, catalog: true, execute: true, test_run: false, promotion: false },
        diagnostic_codes: closed_sets::diagnostic_codes(&[("declared_code", "The one code this Language declares.")]),
        run_statuses: closed_sets::run_statuses(&[]),
        step_statuses: closed_sets::step_statuses(&[
            ("success", true, true, "Done."),
            ("error", false, true, "Failed."),
        ]),
        entry_kinds: vec![KindInfo { kind: "capability".into(), callable: true, meaning: "Callable.".into() }],
        risk_levels: vec![RiskInfo { risk: "safe".into(), hints: SAFE, meaning: "Reads.".into() }],
        guides: Vec::new(),
    };
    let closed = closed_sets::render(
        "hostile-closed-sets",
        &info,
        &Prose {
            step_ids: Some("The plan has one step, `call-a`."),
            parameter_binding: Some("No input is read."),
            output: Some("Always absent."),
            ..Prose::default()
        },
    );
    let core_body = "# hostile/v1\n\nA program is a line of text naming a misbehaviour.\n".to_owned();
    info.guides = vec![
        pilotage_guest_sdk::Guide {
            id: "hostile-core".into(),
            title: "hostile/v1 core".into(),
            level: pilotage_guest_sdk::GuideLevel::Core,
            topics: vec!["grammar".into()],
            version: closed_sets::content_version(&core_body),
            format: "text/markdown".into(),
            body: core_body,
            topic_bodies: Vec::new(),
        },
        closed,
    ];
    info
}

fn plan_calling_a() -> Plan {
    Plan {
        steps: vec![PlanStep {
            id: "call-a".into(),
            calls: Some("cap_a".into()),
            arm: None,
            loop_: None,
            risk: "safe".into(),
            risk_hints: SAFE,
        }],
        max_risk: "safe".into(),
    }
}

fn whole() -> pilotage_guest_sdk::TextRange {
    pilotage_guest_sdk::diag::text_range((1, 1), (1, 1))
}

/// Never returns: a tight loop the host must interrupt.
#[allow(clippy::empty_loop)]
fn spin() -> ! {
    let mut counter: u64 = 0;
    loop {
        counter = std::hint::black_box(counter.wrapping_add(1));
    }
}

/// Allocates until the host's memory cap stops it.
fn allocate() -> usize {
    let mut hoard: Vec<Vec<u8>> = Vec::new();
    loop {
        hoard.push(vec![1u8; 1 << 20]);
        std::hint::black_box(&hoard);
        if hoard.len() == usize::MAX {
            return hoard.len();
        }
    }
}

/// Recurses until the host's stack bound stops it.
fn recurse(depth: u64) -> u64 {
    let frame = std::hint::black_box([depth; 16]);
    recurse(depth + 1).wrapping_add(frame[3])
}

fn huge_text() -> String {
    "x".repeat(48 << 20)
}

fn common(mode: &str) {
    match mode {
        "spin" => spin(),
        "alloc" => {
            allocate();
        }
        "recurse" => {
            recurse(0);
        }
        "trap" => panic!("hostile component panics on purpose"),
        _ => {}
    }
}

impl Guest for Hostile {
    fn describe() -> LanguageInfo {
        info()
    }

    fn validate(program: String, _context: Option<String>) -> Validation {
        let mode = program.strip_prefix("validate:").unwrap_or("");
        common(mode);
        let mut diagnostics: Vec<Diagnostic> = Vec::new();
        let mut plan = Some(plan_calling_a());
        match mode {
            "huge" => diagnostics.push(error_at("declared_code", "", huge_text())),
            "undeclared_code" => {
                let mut diagnostic = error_at("made_up_code", "", "a code this Language never declared");
                diagnostic.path = pilotage_guest_sdk::Locator::Range(whole());
                diagnostics.push(diagnostic);
                plan = None;
            }
            "claims_valid" => {
                let mut diagnostic = error_at("declared_code", "", "an error, yet a plan comes with it");
                diagnostic.path = pilotage_guest_sdk::Locator::Range(whole());
                diagnostics.push(diagnostic);
            }
            "bad_step_id" => {
                if let Some(plan) = plan.as_mut() {
                    plan.steps[0].id = "call#a".into();
                }
            }
            _ => {}
        }
        Validation { diagnostics, plan, references: vec!["cap_a".into()], statements: Vec::new() }
    }

    fn bind_input(_program: String, _input: Option<String>) -> Vec<Diagnostic> {
        Vec::new()
    }

    fn execute(request: RunRequest) -> RunResult {
        let mode = request.program.strip_prefix("execute:").unwrap_or("");
        common(mode);
        let step = |calls: Option<&str>| TraceStep {
            id: "call-a".into(),
            calls: calls.map(Into::into),
            input: Some("{}".into()),
            output: Some("{}".into()),
            outcome: success(),
            t_ms: Some(0),
            decisions: Vec::new(),
        };
        let done = |steps: Vec<TraceStep>| RunResult { outcome: success(), output: None, steps, stats: None };
        match mode {
            "huge" => RunResult {
                outcome: success(),
                output: Some(format!("\"{}\"", huge_text())),
                steps: vec![step(Some("cap_a"))],
                stats: None,
            },
            "outside_plan" => match host::invoke("call-a", "cap_b", "{}") {
                Ok(_) => done(vec![step(Some("cap_b"))]),
                Err(_) => RunResult {
                    outcome: failure("partial", "the host refused cap_b"),
                    output: None,
                    steps: Vec::new(),
                    stats: None,
                },
            },
            "hide_call" => {
                let _ = host::invoke("call-a", "cap_a", "{}");
                done(Vec::new())
            }
            "invent_call" => done(vec![step(Some("cap_a"))]),
            "wrong_branch" => {
                let _ = host::invoke("call-a", "cap_a", "{}");
                let mut ghost = step(None);
                ghost.id = "ghost".into();
                done(vec![step(Some("cap_a")), ghost])
            }
            _ => {
                let _ = host::invoke("call-a", "cap_a", "{}");
                done(vec![step(Some("cap_a"))])
            }
        }
    }

    fn deploy(_request: RunRequest) -> pilotage_guest_sdk::DeployResult {
        pilotage_guest_sdk::diag::does_not_deploy()
    }
}

pilotage_guest_sdk::export_language!(Hostile);
