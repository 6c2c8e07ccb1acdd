//! A Language in plain Rust: the [`Language`] trait over two small traits
//! standing for the host's imports ([`Catalog`], [`Effects`], the latter
//! with the `sql` import as [`Effects::query`]), so the whole language runs
//! natively in tests with a fake catalog, and [`export!`], which makes a
//! type implementing [`Language`] the component's exports.
//!
//! Also what most Languages over a capability catalog share: the five
//! standard risk levels with [`risk_label`], [`argument_mismatches`],
//! which checks a call's arguments against an entry's `input_schema`, and
//! [`json_or_null`].
//!
//! ```text
//! struct Recipe;
//! impl pilotage_guest_sdk::Language for Recipe { /* describe, validate, bind_input, execute */ }
//! pilotage_guest_sdk::export!(Recipe);
//! ```
//!
//! [`export!`]: crate::export

use serde_json::Value;

use crate::{
    CatalogEntry, DeployResult, Diagnostic, InvokeError, LanguageInfo, QueryResult, RiskHints, RunRequest, RunResult,
    SqlError, Validation,
};

/// The caller's visible catalog, pinned to one snapshot per call (the
/// `catalog` import, Part II §6.3). Invisible entries do not exist here.
pub trait Catalog {
    /// A visible entry by id.
    fn entry(&self, id: &str) -> Option<CatalogEntry>;
    /// Every visible entry id, in id order (for close-match hints).
    fn ids(&self) -> Vec<String>;
    /// Every visible entry id of `kind` (e.g. `table`), in id order: the
    /// import's `ids` with a kind, for a Language whose entries of several
    /// kinds are looked up apart.
    ///
    /// The default reads [`Catalog::ids`] and keeps the ids whose
    /// [`Catalog::entry`] has that kind (one lookup per id, enough for a
    /// fake catalog); the host's catalog ([`Imports`]) asks the host for
    /// that kind alone. An unknown kind gives no ids, not an error.
    fn ids_of_kind(&self, kind: &str) -> Vec<String> {
        self.ids().into_iter().filter(|id| self.entry(id).is_some_and(|entry| entry.kind == kind)).collect()
    }
}

/// What a Run may do to the world (the `effects` import, and the `sql`
/// import for Languages over a data source): available during `execute`
/// only; the host refuses calls outside the validated plan or statements
/// outside the validation's `statements`.
pub trait Effects {
    /// Invokes `entry_id` with `input` for trace step `step_id` (the
    /// iteration-qualified trace id); the entry's output, parsed.
    ///
    /// # Errors
    /// `Refused` when the host refused (the Run must stop), `Failed` when the
    /// entry failed or its output is not JSON.
    fn invoke(&mut self, step_id: &str, entry_id: &str, input: &Value) -> Result<Value, InvokeError>;
    /// Milliseconds since the Unix epoch, as the host sees it.
    fn now(&self) -> u64;
    /// Runs `statement`, exactly as the validation returned it in
    /// `statements`, on the tenant's data source for trace step `step_id`,
    /// with `params` (a JSON array bound to `$1…$n`); the result's `rows`
    /// are a JSON array of arrays in column order, at most the host's row
    /// cap (the `sql` import's `query`, Part IV §7). The host runs every
    /// statement of a Run in one transaction, read-only when the plan is.
    ///
    /// The default, for a host without a data source (a Language's fakes
    /// that never query), refuses; the host's effects ([`Imports`]) call
    /// the import.
    ///
    /// # Errors
    /// `Refused` when the host refused the statement (not validated, no
    /// data source, a bound reached: the Run must stop), `Failed` when the
    /// database reported an error (the transaction is rolled back).
    fn query(&mut self, step_id: &str, statement: &str, params: &Value) -> Result<QueryResult, SqlError> {
        let _ = (step_id, statement, params);
        Err(SqlError::Refused("no data source: this host runs no statements".into()))
    }
}

/// A Language, as [`export!`](crate::export) exposes it to the host. Each
/// function is one export of the WIT world `pilotage:language` (its docs
/// give the contract); the host has already checked sizes and nesting.
pub trait Language {
    /// Identity, features, closed sets and guides (Part II §5.1, §5.2).
    fn describe() -> LanguageInfo;
    /// Diagnostics, plan and references of `program` (JSON text or text)
    /// with an optional `context` (JSON text), against `catalog`. Side-effect
    /// free (Part II §6.4).
    fn validate(program: &str, context: Option<&str>, catalog: &impl Catalog) -> Validation;
    /// `input_binding` findings of `input` (JSON text) for `program` (Part II
    /// §6.5.5).
    fn bind_input(program: &str, input: Option<&str>) -> Vec<Diagnostic>;
    /// Runs a validated program (Part II §6.5); every effect through `host`.
    fn execute(request: &RunRequest, host: &mut (impl Catalog + Effects)) -> RunResult;
    /// Installs a validated program (`execution` `deploy` or `both`, Part
    /// II §6.5.7): the installation Run and what the host should install.
    /// The default, for Languages that only run immediately, installs
    /// nothing.
    fn deploy(request: &RunRequest, host: &mut (impl Catalog + Effects)) -> DeployResult {
        let _ = (request, host);
        crate::diag::does_not_deploy()
    }
}

/// The host's imports as [`Catalog`] and [`Effects`] (in the component).
#[derive(Clone, Copy, Debug, Default)]
pub struct Imports;

#[cfg(target_arch = "wasm32")]
impl Catalog for Imports {
    fn entry(&self, id: &str) -> Option<CatalogEntry> {
        crate::host::catalog_get(id)
    }
    fn ids(&self) -> Vec<String> {
        crate::host::catalog_ids(None)
    }
    fn ids_of_kind(&self, kind: &str) -> Vec<String> {
        crate::host::catalog_ids(Some(kind))
    }
}

#[cfg(target_arch = "wasm32")]
impl Effects for Imports {
    fn invoke(&mut self, step_id: &str, entry_id: &str, input: &Value) -> Result<Value, InvokeError> {
        let output = crate::host::invoke(step_id, entry_id, &input.to_string())?;
        serde_json::from_str(&output).map_err(|e| InvokeError::Failed(format!("the entry's output is not JSON: {e}")))
    }
    fn now(&self) -> u64 {
        crate::host::now()
    }
    fn query(&mut self, step_id: &str, statement: &str, params: &Value) -> Result<QueryResult, SqlError> {
        crate::host::sql_query(step_id, statement, &params.to_string())
    }
}

/// Exports a type implementing [`Language`] as the component's `describe`,
/// `validate`, `bind-input`, `execute` and `deploy`, with [`Imports`] as its catalog
/// and effects. Expands to nothing outside `wasm32`, so native tests link.
#[macro_export]
macro_rules! export {
    ($language:ty) => {
        #[cfg(target_arch = "wasm32")]
        #[allow(unsafe_code)] // wit-bindgen's export glue
        const _: () = {
            struct Exports;
            impl $crate::Guest for Exports {
                fn describe() -> $crate::LanguageInfo {
                    <$language as $crate::language::Language>::describe()
                }
                fn validate(program: String, context: Option<String>) -> $crate::Validation {
                    <$language as $crate::language::Language>::validate(
                        &program,
                        context.as_deref(),
                        &$crate::language::Imports,
                    )
                }
                fn bind_input(program: String, input: Option<String>) -> Vec<$crate::Diagnostic> {
                    <$language as $crate::language::Language>::bind_input(&program, input.as_deref())
                }
                fn execute(request: $crate::RunRequest) -> $crate::RunResult {
                    <$language as $crate::language::Language>::execute(&request, &mut $crate::language::Imports)
                }
                fn deploy(request: $crate::RunRequest) -> $crate::DeployResult {
                    <$language as $crate::language::Language>::deploy(&request, &mut $crate::language::Imports)
                }
            }
            $crate::export_language!(Exports);
        };
    };
}

/// The five standard risk levels of Languages over a capability catalog:
/// (risk, readOnly, destructive, openWorld, meaning), for
/// [`closed_sets::risk_levels`](crate::closed_sets::risk_levels).
pub const STANDARD_RISK_LEVELS: [(&str, bool, bool, bool, &str); 5] = [
    ("safe", true, false, false, "Reads state inside this service; no change."),
    ("external_read", true, false, true, "Reads from a system outside this service."),
    ("write", false, false, false, "Changes state inside this service, reversibly."),
    (
        "external_write",
        false,
        false,
        true,
        "Changes state in, or sends to, a system outside this service (for example an email).",
    ),
    ("destructive", false, true, false, "Deletes or irreversibly alters state."),
];

/// The highest of [`STANDARD_RISK_LEVELS`] that `hints` reach (Part II §5.3).
pub fn risk_label(hints: RiskHints) -> &'static str {
    match (hints.read_only, hints.destructive, hints.open_world) {
        (_, true, _) => "destructive",
        (false, false, true) => "external_write",
        (false, false, false) => "write",
        (true, false, true) => "external_read",
        (true, false, false) => "safe",
    }
}

/// `text` parsed as JSON, or `null` when it is absent or not JSON: for a
/// program the host has already validated, an optional `input`, or an
/// entry's optional schema.
pub fn json_or_null(text: Option<&str>) -> Value {
    text.and_then(|text| serde_json::from_str(text).ok()).unwrap_or(Value::Null)
}

/// One finding of [`argument_mismatches`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    /// The argument at fault; `None` for a required one that is missing.
    pub argument: Option<String>,
    /// What is wrong, naming the entry.
    pub message: String,
    /// Close matches among the schema's properties, for an unknown one.
    pub hint: Option<String>,
}

/// Checks call arguments against an entry's `input_schema` (JSON text), the
/// way agents get them wrong: a `required` property missing, a property the
/// schema refuses (`additionalProperties: false`), a literal of the wrong
/// JSON `type`. Arguments for which `is_literal` is false (references the
/// Language resolves at run time) are not type-checked. A schema without
/// `properties` accepts everything.
pub fn argument_mismatches(
    entry: &CatalogEntry,
    arguments: &serde_json::Map<String, Value>,
    is_literal: impl Fn(&Value) -> bool,
) -> Vec<Mismatch> {
    let schema: Value =
        entry.input_schema.as_deref().and_then(|text| serde_json::from_str(text).ok()).unwrap_or_default();
    let Some(properties) = schema["properties"].as_object() else { return Vec::new() };
    let id = &entry.id;
    let mut found: Vec<Mismatch> = schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|required| !arguments.contains_key(*required))
        .map(|required| Mismatch { argument: None, message: format!("'{id}' requires '{required}'"), hint: None })
        .collect();
    for (name, value) in arguments {
        let declared = properties.get(name).and_then(|property| property["type"].as_str());
        if !properties.contains_key(name) && schema["additionalProperties"] == false {
            let hint = crate::hints::hint(name, properties.keys().map(String::as_str));
            found.push(Mismatch { argument: Some(name.clone()), message: format!("'{id}' takes no '{name}'"), hint });
        } else if let Some(ty) = declared.filter(|ty| is_literal(value) && !has_type(value, ty)) {
            let message = format!("'{name}' of '{id}' is a JSON {ty}, not {value}");
            found.push(Mismatch { argument: Some(name.clone()), message, hint: None });
        }
    }
    found
}

fn has_type(value: &Value, ty: &str) -> bool {
    match ty {
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "object" => value.is_object(),
        "array" => value.is_array(),
        "null" => value.is_null(),
        _ => true,
    }
}

/// A `capability` entry for the SDK's own tests: `id`, its schemas, its
/// hints (and the standard level they reach as `risk`).
#[cfg(test)]
pub(crate) fn test_entry(id: &str, input: Option<Value>, output: Option<Value>, risk_hints: RiskHints) -> CatalogEntry {
    CatalogEntry {
        id: id.into(),
        kind: "capability".into(),
        name: id.into(),
        description: None,
        input_schema: input.map(|schema| schema.to_string()),
        output_schema: output.map(|schema| schema.to_string()),
        risk: risk_label(risk_hints).into(),
        risk_hints,
        tags: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn entry(schema: Value) -> CatalogEntry {
        test_entry("cap", Some(schema), None, crate::diag::SAFE)
    }

    #[test]
    fn arguments_are_checked_as_agents_get_them_wrong() {
        let cap = entry(json!({"type": "object", "properties": {"user_id": {"type": "string"}},
                               "required": ["user_id"], "additionalProperties": false}));
        let literal = |value: &Value| !value.as_str().is_some_and(|s| s.starts_with('$'));
        let check = |arguments: Value| argument_mismatches(&cap, arguments.as_object().unwrap(), literal);
        assert!(check(json!({"user_id": "42"})).is_empty());
        assert!(check(json!({"user_id": "$input.id"})).is_empty(), "references are not type-checked");
        assert_eq!(check(json!({}))[0].message, "'cap' requires 'user_id'");
        let typed = check(json!({"user_id": 42}));
        assert_eq!(
            (typed[0].argument.as_deref(), typed[0].message.as_str()),
            (Some("user_id"), "'user_id' of 'cap' is a JSON string, not 42")
        );
        let extra = check(json!({"user_id": "42", "userid": "42"}));
        assert_eq!(extra[0].hint.as_deref(), Some("close match: user_id"));
        let open = entry(json!({"type": "object"}));
        assert!(argument_mismatches(&open, json!({"x": 1}).as_object().unwrap(), literal).is_empty());
    }

    #[test]
    fn json_or_null_reads_json_and_nothing_else() {
        assert_eq!(json_or_null(Some(r#"{"a": 1}"#)), json!({"a": 1}));
        assert_eq!(json_or_null(Some("{not json")), Value::Null);
        assert_eq!(json_or_null(None), Value::Null);
    }

    /// A catalog of `(id, kind)` entries that implements only what it must.
    struct Kinds(Vec<(&'static str, &'static str)>);

    impl Catalog for Kinds {
        fn entry(&self, id: &str) -> Option<CatalogEntry> {
            let &(id, kind) = self.0.iter().find(|(known, _)| *known == id)?;
            Some(CatalogEntry { kind: kind.into(), ..test_entry(id, None, None, crate::diag::SAFE) })
        }
        fn ids(&self) -> Vec<String> {
            self.0.iter().map(|(id, _)| (*id).to_owned()).collect()
        }
    }

    impl Effects for Kinds {
        fn invoke(&mut self, _step_id: &str, entry_id: &str, _input: &Value) -> Result<Value, InvokeError> {
            Err(InvokeError::Refused(format!("{entry_id} is not in the plan")))
        }
        fn now(&self) -> u64 {
            0
        }
    }

    #[test]
    fn ids_of_kind_keeps_that_kind_in_id_order_by_default() {
        let catalog = Kinds(vec![("s.a", "table"), ("s.b", "view"), ("s.c", "table")]);
        assert_eq!(catalog.ids_of_kind("table"), ["s.a", "s.c"]);
        assert_eq!(catalog.ids_of_kind("view"), ["s.b"]);
        assert!(catalog.ids_of_kind("capability").is_empty(), "an unknown kind gives no ids");
    }

    #[test]
    fn a_host_without_a_data_source_refuses_statements() {
        let refused = Kinds(Vec::new()).query("stmt-1", "SELECT 1", &serde_json::json!([]));
        assert!(matches!(refused, Err(SqlError::Refused(message)) if message.contains("no data source")));
    }

    #[test]
    fn risk_labels_follow_the_hints() {
        for (risk, read_only, destructive, open_world, _) in STANDARD_RISK_LEVELS {
            assert_eq!(risk_label(RiskHints { read_only, destructive, open_world }), risk);
        }
    }
}
