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
//! [`Sql`] implements the guest SDK's [`Language`] over its [`Catalog`]
//! and [`Effects`] (statements run through [`Effects::query`], the host's
//! `sql` import), so the logic is plain Rust tested natively with a fake
//! catalog and a scripted database; on `wasm32`,
//! [`pilotage_guest_sdk::export!`] makes it the component's exports, with
//! the host's imports behind those traits. The analyzer reads the catalog
//! through its own narrow view, [`analyze::Catalog`], which every SDK
//! catalog is (see [`validate`]).
//!
//! ```
//! use pilotage_guest_sdk::{Catalog, CatalogEntry, Language};
//! struct Empty;
//! impl Catalog for Empty {
//!     fn entry(&self, _: &str) -> Option<CatalogEntry> { None }
//!     fn ids(&self) -> Vec<String> { Vec::new() }
//! }
//! let validation = sql::Sql::validate("SELECT 1 AS one", None, &Empty);
//! assert!(validation.diagnostics.is_empty());
//! assert_eq!(validation.statements, ["SELECT 1 AS one"]);
//! assert_eq!(validation.plan.unwrap().steps[0].id, "stmt-1");
//! ```

use pilotage_guest_sdk::diag::{INPUT_BINDING, error_at};
use pilotage_guest_sdk::{Catalog, Diagnostic, Effects, Language, LanguageInfo, RunRequest, RunResult, Validation};
use serde_json::Value;

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

/// sql/postgres-15, exported as the component by
/// [`export!`](pilotage_guest_sdk::export) below.
pub struct Sql;

pilotage_guest_sdk::export!(Sql);

/// `input` (JSON text) parsed, or the `input_binding` message.
fn parse_input(input: Option<&str>) -> Result<Option<Value>, String> {
    input.map(serde_json::from_str::<Value>).transpose().map_err(|error| format!("input is not JSON: {error}"))
}

impl Language for Sql {
    /// The self-description and guides (Part II §5.1, §5.2).
    fn describe() -> LanguageInfo {
        describe::language_info()
    }

    /// Diagnostics, plan, references and the statements the program may
    /// run (Part II §5.5, §5.6, §6.4; Part IV §7).
    fn validate(program: &str, _context: Option<&str>, catalog: &impl Catalog) -> Validation {
        // Context binding is the host's job: sql/postgres-15 declares no
        // context_schema, so the host reports any supplied context.
        validate::validate(program, catalog)
    }

    /// `input` against the program's parameters (Part II §6.5.5); input
    /// that is not JSON is one finding at the root.
    fn bind_input(program: &str, input: Option<&str>) -> Vec<Diagnostic> {
        match parse_input(input) {
            Ok(input) => validate::bind_input(program, input.as_ref()),
            Err(message) => vec![error_at(INPUT_BINDING, "", message)],
        }
    }

    /// Runs the validated statements (Part II §6.5); input that is not
    /// JSON runs as absent.
    fn execute(request: &RunRequest, host: &mut (impl Catalog + Effects)) -> RunResult {
        let input = parse_input(request.input.as_deref()).ok().flatten();
        execute::execute(&request.program, input.as_ref(), host)
    }
}
