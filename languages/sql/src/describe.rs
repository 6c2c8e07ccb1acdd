//! The self-description of sql/postgres-15: declarations, the closed sets
//! from [`crate::codes`], and the guides (the closed-sets guide is
//! rendered from the same tables the code emits, and the core guide's
//! function list from the allow-list the validator checks).

use pilotage_guest_sdk::closed_sets::{self, Prose};
use pilotage_guest_sdk::{
    ExecutionMode, Features, GuideLevel, LanguageInfo, LocatorDialect, ProgramKind, SubprogramTracing, TraceCeiling,
};

use crate::codes;

/// The Language identifier.
pub const NAME: &str = "sql/postgres-15";

/// The tool argument that carries a program.
pub const PROGRAM_ARGUMENT: &str = "query";

const CORE: &str = include_str!("../guides/core.md");
const EXAMPLES: &str = include_str!("../guides/examples.md");

const PARAMETER_BINDING: &str = "\
Statements use positional placeholders `$1`, `$2`, … (no `?`, `:name` or `$name`). The Run's `input` is a JSON array `[v1, …, vn]`, or an object `{\"params\": [v1, …, vn]}` with nothing else; element k binds `$k` in every statement of the program. A program without placeholders takes no input (absent, `[]` or `{\"params\": []}`).
- Validation: every number from `$1` to the highest must be used somewhere (`parameter_mismatch`), and each statement must use every parameter up to its own highest, because PostgreSQL cannot type a parameter a statement never uses.
- Binding (`input_binding`, `path` into `input`): a wrong shape is reported at `\"\"`; too few values at `\"\"` (or `/params`); the first extra value at `/n` (or `/params/n`); a non-finite number at its element.
- At execution a value binds to the type PostgreSQL infers for its placeholder: JSON booleans to boolean; numbers to smallint, integer, bigint, real, double precision or numeric; strings to the text types, uuid, date, timestamp and timestamptz (ISO 8601), and to numeric; any JSON to json and jsonb; `null` to SQL NULL. A value that does not fit its type fails the statement (the Run ends `rolled_back`). For another type, cast a text parameter (`$1::text::interval`).
- sql/postgres-15 takes no validation `context`: supplying one is a `context_binding` diagnostic.";

const STEP_IDS: &str = "\
SQL text has no native step identifiers, so they are generated, identically in the plan and the trace for the same text and catalog:
- Statement k of the program (1-based, in text order, counting only statements, not comments) is step `stmt-k`. It carries no `calls`; its risk is what it can destroy (Part II §5.3): a query `safe`, an INSERT `write` (it only adds rows), an UPDATE, an `INSERT … ON CONFLICT … DO UPDATE` and a DELETE `destructive` (they overwrite or remove values irreversibly, so a Host asks for approval).
- After it, one reference sub-step `stmt-k.ref-j` per catalog relation the statement references, carrying `calls` = the entry id (`schema.relation`, each part bare or double-quoted as the `table` kind says). Each relation appears once per statement, numbered j = 1, 2, … in resolution order: WITH definitions first, then the FROM items left to right (joins in order), with subqueries and CTE bodies resolved where they occur, then WHERE, the select list, GROUP BY, HAVING and ORDER BY; for INSERT the source query comes before the target; for UPDATE and DELETE the target comes first. A CTE or alias is not a relation and gets no sub-step. A sub-step's risk is its access, also in the trace's `access`: `read` `safe`, `insert` `write`, `update` and `delete` `destructive`.
- The trace lists the same ids in the same order: `stmt-1`, `stmt-1.ref-1`, …, `stmt-2`, …; a Run that stops at a failed statement ends after that statement's sub-steps.
- A Run the platform stopped before the Language could report (`timeout` at the wall-time bound, `resource_exhausted`) carries the platform's own record instead: one `stmt-k` step per statement that ran, `input` `{\"statement\", \"params\"}`, `output` `{\"rows_matched\"}` (`null` for the statement that failed), without reference sub-steps.";

const OUTPUT: &str = "\
The Run's `output` is the rows of the program's last statement (for a data change, its RETURNING rows, else `[]`), as an array of JSON objects keyed by column name in column order; a repeated column name gets `_2`, `_3`, …. Values are JSON by column type: integers and floating point as numbers, numeric as a string (exact), booleans, text, json/jsonb as JSON, uuid as a string, date as `YYYY-MM-DD`, timestamp as `YYYY-MM-DDTHH:MM:SS[.ffffff]`, timestamptz the same in UTC with `Z`, time as `HH:MM:SS[.ffffff]`, interval as `P<months>M<days>DT<seconds>S`, bytea as `\\x` followed by hex, one-dimensional arrays of these as JSON arrays, NULL as `null`; a value of another type is the string `\\x` followed by the hex of its binary form (cast the column to text to read it). Rows are capped by the data source (row cap and byte cap): `truncated` in the statement step says so, and `output` then holds only the rows kept.
Each statement step's trace `input` is `{\"statement\": <the SQL that ran, every relation schema-qualified>, \"params\": [...]}` and its `output` is `{\"rows_matched\", \"rows_returned\", \"truncated\", \"columns\": [{\"name\", \"type\"}], \"rows\": [[...]]}`: `rows_matched` counts the rows the statement returned or changed before the cap, `rows_returned` those kept; `t_ms` is the statement's time in the database. A reference sub-step's `input` is `{\"relation\", \"access\"}` and its `output` adds the statement it belongs to. The trace `stats` lists every statement run with its counts.";

/// The core guide, with the function allow-list and the built-in types
/// filled in from the tables the validator checks.
pub fn core_guide_body() -> String {
    let mut functions = String::new();
    functions.push_str("aggregates: ");
    functions.push_str(&codes::AGGREGATE_FUNCTIONS.map(|f| format!("`{f}`")).join(", "));
    functions.push_str("; window and scalar: ");
    functions.push_str(&codes::SCALAR_FUNCTIONS.map(|f| format!("`{f}`")).join(", "));
    functions.push('.');
    let types = crate::types::BUILT_IN_TYPES.map(|t| format!("`{t}`")).join(", ");
    CORE.replace("{functions}", &functions).replace("{types}", &types)
}

/// The full declaration of sql/postgres-15.
pub fn language_info() -> LanguageInfo {
    let mut info = LanguageInfo {
        name: NAME.to_owned(),
        title: "PostgreSQL 15 queries and data changes over the tenant's database".to_owned(),
        program_kind: ProgramKind::Text,
        program_argument: PROGRAM_ARGUMENT.to_owned(),
        locator: LocatorDialect::TextRange,
        execution: ExecutionMode::Immediate,
        trace: TraceCeiling::Full,
        trace_subprogram: SubprogramTracing::Opaque,
        context_schema: None,
        features: Features { plan: true, catalog: true, execute: true, test_run: false, promotion: false },
        diagnostic_codes: closed_sets::diagnostic_codes(&codes::OWN_CODES),
        run_statuses: closed_sets::run_statuses(&codes::OWN_RUN_STATUSES),
        step_statuses: closed_sets::step_statuses(&codes::STEP_STATUSES),
        entry_kinds: closed_sets::entry_kinds(&codes::ENTRY_KINDS),
        risk_levels: closed_sets::risk_levels(&codes::RISK_LEVELS),
        guides: Vec::new(),
    };
    let prose = Prose {
        scope_rules: None,
        parameter_binding: Some(PARAMETER_BINDING),
        step_ids: Some(STEP_IDS),
        output: Some(OUTPUT),
        decisions: None,
    };
    let closed = closed_sets::render("sql-closed-sets", &info, &prose);
    info.guides = vec![
        closed_sets::guide(
            "sql-core",
            "sql/postgres-15 core: statements, names, subset, functions, parameters, one runnable example",
            GuideLevel::Core,
            &["statements", "names", "subset", "functions", "parameters", "example"],
            core_guide_body(),
        ),
        closed,
        closed_sets::guide(
            "sql-examples",
            "sql/postgres-15 examples: joins, parameters, CTEs, windows, scripts, common mistakes",
            GuideLevel::Examples,
            &["joins", "parameters", "cte", "window", "script", "mistakes"],
            EXAMPLES.to_owned(),
        ),
    ];
    info
}

/// The SQL examples of a guide body: each fenced `sql` block, with the
/// `json` block right after it as its input.
pub fn guide_examples(body: &str) -> Vec<(String, Option<String>)> {
    let mut examples: Vec<(String, Option<String>)> = Vec::new();
    let mut lines = body.lines().peekable();
    let mut last_was_sql = false;
    while let Some(line) = lines.next() {
        let fence = line.trim();
        if fence == "```sql" || fence == "```json" {
            let mut block = String::new();
            for inner in lines.by_ref() {
                if inner.trim() == "```" {
                    break;
                }
                block.push_str(inner);
                block.push('\n');
            }
            if fence == "```sql" {
                examples.push((block, None));
                last_was_sql = true;
            } else if last_was_sql && let Some(last) = examples.last_mut() {
                last.1 = Some(block);
                last_was_sql = false;
            }
        } else if !fence.is_empty() {
            last_was_sql = false;
        }
    }
    examples
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_guide_is_small_and_lists_the_allow_list() {
        let info = language_info();
        let core = info.guides.iter().find(|g| g.level == GuideLevel::Core).unwrap();
        assert!(core.body.len() <= 8192, "core guide is {} bytes", core.body.len());
        assert!(!core.body.contains("{functions}") && !core.body.contains("{types}"));
        for name in crate::types::BUILT_IN_TYPES {
            assert!(core.body.contains(&format!("`{name}`")), "{name}");
        }
        for function in codes::allowed_functions() {
            assert!(core.body.contains(&format!("`{function}`")), "{function}");
        }
        assert_eq!(info.guides.iter().filter(|g| g.topics.iter().any(|t| t == "closed-sets")).count(), 1);
    }

    #[test]
    fn the_closed_sets_guide_lists_every_code_and_the_step_scheme() {
        let info = language_info();
        let closed = info.guides.iter().find(|g| g.id == "sql-closed-sets").unwrap();
        for (code, _) in codes::OWN_CODES {
            assert!(closed.body.contains(&format!("`{code}`")), "{code}");
        }
        for needle in ["`rolled_back`", "stmt-k.ref-j", "`table`", "`view`", "`destructive`", "Parameter binding"] {
            assert!(closed.body.contains(needle), "{needle}");
        }
    }

    #[test]
    fn examples_are_extracted_with_their_inputs() {
        let examples = guide_examples(&core_guide_body());
        assert_eq!(examples.len(), 1);
        assert!(examples[0].0.contains("date_trunc"));
        assert!(examples[0].1.as_deref().unwrap().contains("2025-01-01"));
        assert!(guide_examples(EXAMPLES).len() >= 5);
    }
}
