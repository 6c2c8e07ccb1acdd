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
//! The logic is plain Rust over two small traits ([`validate::Catalog`],
//! [`execute::Effects`]), so it is tested natively; on `wasm32` the same
//! code is exported as a component whose catalog and effects are the host's
//! imports.

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

#[cfg(target_arch = "wasm32")]
#[allow(unsafe_code)] // wit-bindgen's export glue
mod component {
    use pilotage_guest_sdk::{
        CatalogEntry, Diagnostic, Guest, InvokeError, LanguageInfo, RunRequest, RunResult, Validation, host,
    };
    use serde_json::Value;

    struct HostCatalog;

    impl crate::validate::Catalog for HostCatalog {
        fn get(&self, id: &str) -> Option<CatalogEntry> {
            host::catalog_get(id)
        }
        fn ids(&self) -> Vec<String> {
            host::catalog_ids(None)
        }
    }

    struct HostEffects;

    impl crate::execute::Effects for HostEffects {
        fn invoke(&mut self, step_id: &str, entry_id: &str, input: &Value) -> Result<Value, InvokeError> {
            let output = host::invoke(step_id, entry_id, &input.to_string())?;
            serde_json::from_str(&output)
                .map_err(|error| InvokeError::Failed(format!("the entry's output is not JSON: {error}")))
        }
        fn now(&self) -> u64 {
            host::now()
        }
    }

    struct Workflow;

    impl Guest for Workflow {
        fn describe() -> LanguageInfo {
            crate::describe::language_info()
        }

        fn validate(program: String, _context: Option<String>) -> Validation {
            // Context binding is the host's job: workflow/v1 declares no
            // context_schema, so the host reports any supplied context.
            crate::validate::validate(&program, &HostCatalog)
        }

        fn bind_input(program: String, input: Option<String>) -> Vec<Diagnostic> {
            let input = match input.as_deref().map(serde_json::from_str::<Value>) {
                Some(Ok(value)) => Some(value),
                Some(Err(error)) => {
                    return vec![pilotage_guest_sdk::diag::error_at(
                        pilotage_guest_sdk::diag::INPUT_BINDING,
                        "",
                        format!("input is not JSON: {error}"),
                    )];
                }
                None => None,
            };
            crate::validate::bind_input(&program, input.as_ref())
        }

        fn execute(request: RunRequest) -> RunResult {
            let input = request.input.as_deref().and_then(|text| serde_json::from_str(text).ok());
            crate::execute::execute(&request.program, input, &mut HostEffects)
        }

        fn deploy(_request: RunRequest) -> pilotage_guest_sdk::DeployResult {
            pilotage_guest_sdk::diag::does_not_deploy()
        }
    }

    pilotage_guest_sdk::export_language!(Workflow);
}
