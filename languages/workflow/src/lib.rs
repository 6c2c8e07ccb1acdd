//! workflow/v1: a Pilotage Language of JSON workflows.
//!
//! A workflow is a JSON object with `steps` (calls to catalog entries, pure
//! values, branches and loops), an optional `input` declaration and an
//! optional `output` mapping; data flows through path expressions such as
//! `$.input.userId` and `$.steps.profile.output.name`. The spec's own
//! example programs (Part III §9.3, §9.4) are workflow/v1 programs.
//!
//! - [`doc`]: the program document as a borrowed, ordered JSON tree;
//! - [`program`]: parsing the document, with diagnostics;
//! - [`expr`]: path expressions, templates and conditions;
//! - [`validate`]: static checks, scope rules, plan derivation, input binding;
//! - [`execute`]: the interpreter and its flat trace;
//! - [`schema`]: the parts of entries' JSON Schemas validation reads;
//! - [`codes`]: the closed sets, declared once;
//! - [`describe`]: the Language's self-description and guides.
//!
//! [`Workflow`] implements the guest SDK's [`Language`] over its
//! [`Catalog`] and [`Effects`], so the logic is plain Rust tested natively
//! with a fake catalog and a scripted world; on `wasm32`,
//! [`pilotage_guest_sdk::export!`] makes it the component's exports, with
//! the host's imports behind those traits.
//!
//! ```
//! use pilotage_guest_sdk::{Catalog, CatalogEntry, Language};
//! struct Empty;
//! impl Catalog for Empty {
//!     fn entry(&self, _: &str) -> Option<CatalogEntry> { None }
//!     fn ids(&self) -> Vec<String> { Vec::new() }
//! }
//! let program = r#"{"steps": [{"id": "greeting", "kind": "set", "value": "hello"}],
//!                    "output": "$.steps.greeting.output"}"#;
//! let validation = workflow::Workflow::validate(program, None, &Empty);
//! assert!(validation.diagnostics.is_empty(), "{:?}", validation.diagnostics);
//! assert_eq!(validation.plan.unwrap().steps[0].id, "greeting");
//! ```

use pilotage_guest_sdk::diag::{INPUT_BINDING, error_at};
use pilotage_guest_sdk::{Catalog, Diagnostic, Effects, Language, LanguageInfo, RunRequest, RunResult, Validation};
use serde_json::Value;

pub mod codes;
pub mod describe;
pub mod doc;
pub mod execute;
pub mod expr;
pub mod program;
pub mod schema;
pub mod validate;

#[cfg(test)]
mod tests;

// One fresh instance per call: see the guest SDK's `alloc` module.
pilotage_guest_sdk::use_language_allocator!();

/// workflow/v1, exported as the component by
/// [`export!`](pilotage_guest_sdk::export) below.
pub struct Workflow;

pilotage_guest_sdk::export!(Workflow);

impl Language for Workflow {
    /// The self-description and guides (Part II §5.1, §5.2).
    fn describe() -> LanguageInfo {
        describe::language_info()
    }

    /// Static checks, plan and references (Part II §5.5, §5.6, §6.4).
    fn validate(program: &str, _context: Option<&str>, catalog: &impl Catalog) -> Validation {
        // Context binding is the host's job: workflow/v1 declares no
        // context_schema, so the host reports any supplied context.
        validate::validate(program, catalog)
    }

    /// `input` against the program's `input` declaration (Part II
    /// §6.5.5); input that is not JSON is one finding at the root.
    fn bind_input(program: &str, input: Option<&str>) -> Vec<Diagnostic> {
        let input = match input.map(serde_json::from_str::<Value>) {
            Some(Ok(value)) => Some(value),
            Some(Err(error)) => return vec![error_at(INPUT_BINDING, "", format!("input is not JSON: {error}"))],
            None => None,
        };
        validate::bind_input(program, input.as_ref())
    }

    /// Runs the program (Part II §6.5); input that is absent or not JSON
    /// runs as an empty object.
    fn execute(request: &RunRequest, host: &mut (impl Catalog + Effects)) -> RunResult {
        let input = request.input.as_deref().and_then(|text| serde_json::from_str(text).ok());
        execute::execute(&request.program, input, host)
    }
}
