//! `unfit/v1`: a well-formed component whose self-description breaks
//! Part II: no closed-sets guide, no reserved diagnostic codes, no core
//! guide. The admin API must refuse it with the lint's findings.

#![allow(unsafe_code)] // wit-bindgen's export glue.

use pilotage_guest_sdk::{
    Diagnostic, ExecutionMode, Features, Guest, LanguageInfo, LocatorDialect, ProgramKind, RunRequest, RunResult,
    SubprogramTracing, TraceCeiling, Validation, diag::success,
};

struct Unfit;

impl Guest for Unfit {
    fn describe() -> LanguageInfo {
        LanguageInfo {
            name: "unfit/v1".into(),
            title: "A Language that skipped its homework".into(),
            program_kind: ProgramKind::Text,
            program_argument: "program".into(),
            locator: LocatorDialect::TextRange,
            execution: ExecutionMode::Immediate,
            trace: TraceCeiling::Full,
            trace_subprogram: SubprogramTracing::Opaque,
            context_schema: None,
            features: Features { plan: false, catalog: false, execute: true, test_run: false, promotion: false },
            diagnostic_codes: Vec::new(),
            run_statuses: Vec::new(),
            step_statuses: Vec::new(),
            entry_kinds: Vec::new(),
            risk_levels: Vec::new(),
            guides: Vec::new(),
        }
    }

    fn validate(_program: String, _context: Option<String>) -> Validation {
        Validation { diagnostics: Vec::new(), plan: None, references: Vec::new(), statements: Vec::new() }
    }

    fn bind_input(_program: String, _input: Option<String>) -> Vec<Diagnostic> {
        Vec::new()
    }

    fn execute(_request: RunRequest) -> RunResult {
        RunResult { outcome: success(), output: None, steps: Vec::new(), stats: None }
    }

    fn deploy(_request: RunRequest) -> pilotage_guest_sdk::DeployResult {
        pilotage_guest_sdk::diag::does_not_deploy()
    }
}

pilotage_guest_sdk::export_language!(Unfit);
