//! sql/postgres-15: a Pilotage Language of PostgreSQL statements over a
//! tenant's database.
//!
//! A program is SQL text: one statement, or a script of queries. It is
//! parsed whole with the PostgreSQL dialect of the `sqlparser` library
//! (so comments hide nothing), checked against the caller's visible
//! catalog of tables and views, and planned as one step per statement
//! (`stmt-k`) plus one reference sub-step per relation (`stmt-k.ref-j`)
//! carrying `calls` (Part IV §7). Execution sends the validated
//! statements, rendered from their parse trees with every relation
//! schema-qualified as it resolved (so the database's `search_path` never
//! picks another relation), through the host's `sql` import; the host
//! runs nothing else.
//!
//! - [`program`]: parsing, text ranges, rendering;
//! - [`analyze`]: statement classes, name resolution, the function
//!   allow-list, placeholders, references;
//! - [`entry_id`]: the unambiguous `schema.relation` ids of relations'
//!   catalog entries, and their two names;
//! - [`types`]: the closed set of types a cast or typed literal may name;
//! - [`qualify`]: the resolved relation names, schema-qualified for
//!   execution;
//! - [`params`]: `$1…$n` and their binding from `input`;
//! - [`validate`]: diagnostics, plan, step ids, input binding;
//! - [`execute`]: the Run and its flat trace;
//! - [`codes`]: the closed sets, declared once;
//! - [`describe`]: the Language's self-description and guides.
//!
//! The logic is plain Rust over two small traits ([`analyze::Catalog`],
//! [`execute::Database`]), so it is tested natively; on `wasm32` the same
//! code is exported as a component whose catalog and database are the
//! host's imports.
//!
//! ```
//! use sql::analyze::Catalog;
//! use pilotage_guest_sdk::CatalogEntry;
//! struct Empty;
//! impl Catalog for Empty {
//!     fn get(&self, _: &str) -> Option<CatalogEntry> { None }
//!     fn ids(&self, _: &str) -> Vec<String> { Vec::new() }
//! }
//! let validation = sql::validate::validate("SELECT 1 AS one", &Empty);
//! assert!(validation.diagnostics.is_empty());
//! assert_eq!(validation.statements, ["SELECT 1 AS one"]);
//! assert_eq!(validation.plan.unwrap().steps[0].id, "stmt-1");
//! ```

pub mod analyze;
pub mod codes;
pub mod describe;
pub use sql_entry_id as entry_id;
pub mod execute;
pub mod params;
pub mod program;
pub mod qualify;
pub mod types;
pub mod validate;

#[cfg(test)]
mod tests;

// One fresh instance per call: see the guest SDK's `alloc` module.
pilotage_guest_sdk::use_language_allocator!();

#[cfg(target_arch = "wasm32")]
#[allow(unsafe_code)] // wit-bindgen's export glue
mod component {
    use pilotage_guest_sdk::bindings::pilotage::language::sql::{self, QueryResult, SqlError};
    use pilotage_guest_sdk::{CatalogEntry, Diagnostic, Guest, LanguageInfo, RunRequest, RunResult, Validation, host};
    use serde_json::Value;

    struct HostCatalog;

    impl crate::analyze::Catalog for HostCatalog {
        fn get(&self, id: &str) -> Option<CatalogEntry> {
            host::catalog_get(id)
        }
        fn ids(&self, kind: &str) -> Vec<String> {
            host::catalog_ids(Some(kind))
        }
    }

    struct HostDatabase;

    impl crate::execute::Database for HostDatabase {
        fn query(&mut self, step_id: &str, statement: &str, params: &Value) -> Result<QueryResult, SqlError> {
            sql::query(step_id, statement, &params.to_string())
        }
    }

    fn parse_input(input: Option<&str>) -> Result<Option<Value>, String> {
        input.map(serde_json::from_str::<Value>).transpose().map_err(|error| format!("input is not JSON: {error}"))
    }

    struct Sql;

    impl Guest for Sql {
        fn describe() -> LanguageInfo {
            crate::describe::language_info()
        }

        fn validate(program: String, _context: Option<String>) -> Validation {
            // Context binding is the host's job: sql/postgres-15 declares no
            // context_schema, so the host reports any supplied context.
            crate::validate::validate(&program, &HostCatalog)
        }

        fn bind_input(program: String, input: Option<String>) -> Vec<Diagnostic> {
            match parse_input(input.as_deref()) {
                Ok(input) => crate::validate::bind_input(&program, input.as_ref()),
                Err(message) => {
                    vec![pilotage_guest_sdk::diag::error_at(pilotage_guest_sdk::diag::INPUT_BINDING, "", message)]
                }
            }
        }

        fn execute(request: RunRequest) -> RunResult {
            let input = parse_input(request.input.as_deref()).ok().flatten();
            crate::execute::execute(&request.program, input.as_ref(), &HostCatalog, &mut HostDatabase)
        }

        fn deploy(_request: RunRequest) -> pilotage_guest_sdk::DeployResult {
            pilotage_guest_sdk::diag::does_not_deploy()
        }
    }

    pilotage_guest_sdk::export_language!(Sql);
}
