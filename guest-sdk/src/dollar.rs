//! `$` references: strings of a JSON program that read a value instead of
//! being one, `$ROOT` or `$ROOT.FIELD.FIELD…` (`$input.userId`,
//! `$profile.address.city`), as recipe/v1 and the Languages made from it
//! write data flow.
//!
//! - [`visit`] walks every reference of a value with its [`At`] locator;
//! - [`Reference::parse`] splits one into its root and fields;
//! - [`Scope`] checks references against the steps visible at a place and
//!   their entries' output schemas ([`UNKNOWN_REFERENCE`],
//!   [`UNKNOWN_FIELD`], Part II §5.5);
//! - [`resolve`] replaces each by the value it reads, at run time;
//! - [`bind_input`] is the input convention "`input` is an object holding
//!   every `NAME` read as `$input.NAME`" (Part II §6.5.5).
//!
//! `$input.NAME…` reads the Run's input; `$STEP.FIELD…` the output of call
//! step `STEP`. Where a step is visible is the Language's own rule: it
//! fills a [`Scope`] as it walks.
//!
//! ```
//! use std::collections::BTreeMap;
//! use pilotage_guest_sdk::dollar;
//! use serde_json::json;
//! let values = BTreeMap::from([("profile".to_owned(), json!({"tier": "gold"}))]);
//! let with = json!({"reason": "$profile.tier", "order_id": "o-1"});
//! assert_eq!(dollar::resolve(&with, &values), Ok(json!({"reason": "gold", "order_id": "o-1"})));
//! ```

use std::collections::BTreeMap;

use serde_json::Value;

use crate::diag::INPUT_BINDING;
use crate::findings::Findings;
use crate::language::json_or_null;
use crate::pointer::At;
use crate::{CatalogEntry, Diagnostic};

/// Whether `value` is a `$` reference: a string that starts with `$`.
pub fn is_reference(value: &Value) -> bool {
    value.as_str().is_some_and(|text| text.starts_with('$'))
}

/// Calls `found(text, at)` for every `$` reference inside `value` (itself
/// included), `at` extended by member names and indexes down to it, in
/// document order. Walking allocates nothing; `at` becomes pointer text
/// only when the caller reports something there.
pub fn visit<'v>(value: &'v Value, at: &At<'_>, found: &mut impl FnMut(&'v str, &At<'_>)) {
    match value {
        Value::String(text) if text.starts_with('$') => found(text, at),
        Value::Array(items) => items.iter().enumerate().for_each(|(index, item)| visit(item, &at.index(index), found)),
        Value::Object(members) => members.iter().for_each(|(name, member)| visit(member, &at.at(name), found)),
        _ => {}
    }
}

/// One well-formed `$` reference: `$ROOT` then `.FIELD`s, no part empty.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reference<'a> {
    /// What the reference reads from (`input`, a step id).
    pub root: &'a str,
    /// The fields after the root, `.`-separated (empty for `$ROOT`).
    fields: &'a str,
}

impl<'a> Reference<'a> {
    /// Splits `text`; `None` when it does not start with `$` or has an
    /// empty part (`$`, `$a..b`, `$a.`).
    pub fn parse(text: &'a str) -> Option<Reference<'a>> {
        let body = text.strip_prefix('$')?;
        if body.split('.').any(str::is_empty) {
            return None;
        }
        let (root, fields) = body.split_once('.').unwrap_or((body, ""));
        Some(Reference { root, fields })
    }

    /// The first field (`tier` of `$profile.tier`), if any.
    pub fn field(&self) -> Option<&'a str> {
        self.fields().next()
    }

    /// Every field, in order.
    pub fn fields(&self) -> impl Iterator<Item = &'a str> {
        self.fields.split('.').filter(|field| !field.is_empty())
    }
}

/// The code of a malformed `$` reference or one naming no visible step
/// (an error); list it among the Language's diagnostic codes.
pub const UNKNOWN_REFERENCE: &str = "unknown_reference";
/// The code of a `$STEP.FIELD` reading a field the entry's `output_schema`
/// does not list (a warning: the program stays valid).
pub const UNKNOWN_FIELD: &str = "unknown_field";

/// The call steps whose outputs `$STEP…` may read at a place, each with
/// its entry's output schema; `$input.NAME…` is always readable. A
/// Language inserts each call step once checked, and clones the scope
/// where what is added must not outlive a block (a branch arm).
#[derive(Clone, Debug, Default)]
pub struct Scope {
    /// Step id → the output schema of the entry it calls (`null` when the
    /// entry declares none), in id order for stable hints.
    steps: BTreeMap<String, Value>,
}

impl Scope {
    /// Nothing visible but `$input`.
    pub fn new() -> Scope {
        Scope::default()
    }

    /// Makes call step `id`, calling `entry`, readable from here on.
    pub fn insert(&mut self, id: &str, entry: &CatalogEntry) {
        self.steps.insert(id.to_owned(), json_or_null(entry.output_schema.as_deref()));
    }

    /// Checks every `$` reference inside `value` (found at `at`):
    ///
    /// - [`UNKNOWN_REFERENCE`] error, no hint, for a malformed one (not
    ///   [`Reference::parse`]-able, or `$input` without a name): `'TEXT' is
    ///   not $input.NAME… or $STEP.FIELD…`;
    /// - [`UNKNOWN_REFERENCE`] error for a root that is neither `input` nor
    ///   a visible step: `'TEXT': no call step 'ROOT' is visible here`,
    ///   hinting at close visible step ids;
    /// - [`UNKNOWN_FIELD`] warning when the step's output schema lists
    ///   `properties` without the first field: `'ROOT' lists no output
    ///   field 'FIELD'`, hinting at close property names. Deeper fields are
    ///   not checked.
    pub fn check(&self, value: &Value, at: &At<'_>, found: &mut impl Findings) {
        visit(value, at, &mut |text, at| {
            let reference = Reference::parse(text).filter(|r| r.root != "input" || r.field().is_some());
            let Some(Reference { root, .. }) = reference else {
                found.error(UNKNOWN_REFERENCE, at, format!("'{text}' is not $input.NAME… or $STEP.FIELD…"));
                return;
            };
            if root == "input" {
                return;
            }
            let Some(schema) = self.steps.get(root) else {
                let message = format!("'{text}': no call step '{root}' is visible here");
                return found
                    .error(UNKNOWN_REFERENCE, at, message)
                    .close_to(root, self.steps.keys().map(String::as_str));
            };
            if let (Some(field), Some(fields)) = (reference.and_then(|r| r.field()), schema["properties"].as_object())
                && !fields.contains_key(field)
            {
                let message = format!("'{root}' lists no output field '{field}'");
                found.warning(UNKNOWN_FIELD, at, message).close_to(field, fields.keys().map(String::as_str));
            }
        });
    }
}

/// `template` with every `$` reference replaced by the value it reads:
/// `$ROOT` is `values[ROOT]`, each `.FIELD` a member of the value before.
///
/// # Errors
/// The first reference that cannot be read: `'ROOT' has no value` when
/// `values` lacks the root, `'$TEXT': no field 'FIELD' in VALUE` when a
/// member is missing (or the value is not an object).
pub fn resolve(template: &Value, values: &BTreeMap<String, Value>) -> Result<Value, String> {
    match template {
        Value::String(text) if text.starts_with('$') => {
            let mut parts = text[1..].split('.');
            let root = parts.next().unwrap_or_default();
            let mut value = values.get(root).ok_or_else(|| format!("'{root}' has no value"))?;
            for field in parts {
                value = value.get(field).ok_or_else(|| format!("'{text}': no field '{field}' in {value}"))?;
            }
            Ok(value.clone())
        }
        Value::Array(items) => items.iter().map(|item| resolve(item, values)).collect(),
        Value::Object(members) => {
            members.iter().map(|(name, member)| Ok((name.clone(), resolve(member, values)?))).collect()
        }
        other => Ok(other.clone()),
    }
}

/// The `input_binding` findings of `input` (JSON text) for `program` (JSON
/// text) under the convention "`input` is an object holding every `NAME`
/// the program reads as `$input.NAME`" (Part II §6.5.5): none when the
/// program reads no input; one at `""` when `input` is absent or not an
/// object ("input must be an object holding NAME, …"); otherwise one at
/// `/NAME` per missing name ("input lacks 'NAME'"). Names are listed as
/// often, and in the order, the program reads them.
pub fn bind_input(program: &str, input: Option<&str>) -> Vec<Diagnostic> {
    let mut read = Vec::new();
    visit(&json_or_null(Some(program)), &At::root(), &mut |text, _| {
        read.extend(text.strip_prefix("$input.").map(|rest| rest.split('.').next().unwrap_or_default().to_owned()));
    });
    let input = json_or_null(input);
    let mut found = Vec::new();
    if read.is_empty() {
        return found;
    }
    let Some(members) = input.as_object() else {
        found.error(INPUT_BINDING, "", format!("input must be an object holding {}", read.join(", ")));
        return found;
    };
    for name in read.iter().filter(|name| !members.contains_key(name.as_str())) {
        found.error(INPUT_BINDING, &At::root().at(name), format!("input lacks '{name}'"));
    }
    found
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::Locator;

    #[test]
    fn visit_finds_every_reference_with_its_pointer() {
        let program = json!({"with": {"a/b": "$input.x", "n": 1, "list": ["plain", "$s.f"]}, "note": "$"});
        let mut seen = Vec::new();
        visit(&program, &At::root(), &mut |text, at| seen.push((text, at.pointer())));
        assert_eq!(seen, [("$input.x", "/with/a~1b".into()), ("$s.f", "/with/list/1".into()), ("$", "/note".into())]);
        let mut none = 0;
        visit(&json!({"a": ["x", 1, null, {"b": "y$"}]}), &At::root(), &mut |_, _| none += 1);
        assert_eq!(none, 0, "strings that do not start with $ are values");
    }

    #[test]
    fn references_parse_into_root_and_fields() {
        let reference = Reference::parse("$profile.address.city").unwrap();
        assert_eq!((reference.root, reference.field()), ("profile", Some("address")));
        assert_eq!(reference.fields().collect::<Vec<_>>(), ["address", "city"]);
        assert_eq!(Reference::parse("$profile").map(|r| (r.root, r.field())), Some(("profile", None)));
        for malformed in ["$", "$.x", "$a..b", "$a.", "profile.tier", ""] {
            assert_eq!(Reference::parse(malformed), None, "{malformed}");
        }
    }

    fn entry(id: &str, output_schema: Value) -> CatalogEntry {
        crate::language::test_entry(id, None, Some(output_schema), crate::diag::SAFE)
    }

    /// (code, pointer, message, hint) of each finding of `value` in `scope`.
    fn check(scope: &Scope, value: Value) -> Vec<(String, String, String, Option<String>)> {
        let mut found = Vec::new();
        scope.check(&value, &At::root().at("with"), &mut found);
        found
            .into_iter()
            .map(|d| {
                let Locator::Pointer(path) = d.path else { unreachable!("json-pointer") };
                (d.code, path, d.message, d.hint)
            })
            .collect()
    }

    #[test]
    fn references_to_visible_steps_and_listed_fields_pass() {
        let mut scope = Scope::new();
        scope.insert("profile", &entry("cap", json!({"properties": {"name": {}, "tier": {}}})));
        scope.insert("open", &entry("cap_open", json!({"type": "object"})));
        let good = json!({"a": "$input.userId", "b": "$profile.tier.x", "c": "$profile", "d": "$open.anything"});
        assert_eq!(check(&scope, good), []);
    }

    #[test]
    fn bad_references_are_reported_where_they_are() {
        let mut scope = Scope::new();
        scope.insert("profile", &entry("cap", json!({"properties": {"name": {}, "tier": {}}})));
        let found = check(&scope, json!({"x": ["$input", "$profle.tier", "$profile.tierr", "$a..b"]}));
        let code = |i: usize| (found[i].0.as_str(), found[i].1.as_str(), found[i].3.as_deref());
        assert_eq!(code(0), (UNKNOWN_REFERENCE, "/with/x/0", None));
        assert_eq!(found[0].2, "'$input' is not $input.NAME… or $STEP.FIELD…");
        assert_eq!(code(1), (UNKNOWN_REFERENCE, "/with/x/1", Some("close match: profile")));
        assert_eq!(found[1].2, "'$profle.tier': no call step 'profle' is visible here");
        assert_eq!(code(2), (UNKNOWN_FIELD, "/with/x/2", Some("close match: tier")));
        assert_eq!(found[2].2, "'profile' lists no output field 'tierr'");
        assert_eq!(code(3), (UNKNOWN_REFERENCE, "/with/x/3", None));
        assert_eq!(found.len(), 4);
    }

    #[test]
    fn a_cloned_scope_keeps_what_is_added_to_it() {
        let mut outer = Scope::new();
        let mut arm = outer.clone();
        arm.insert("flag", &entry("cap_flag", json!({})));
        assert_eq!(check(&arm, json!("$flag")), []);
        assert_eq!(check(&outer, json!("$flag")).len(), 1, "not visible after the arm");
        outer.insert("flag", &entry("cap_flag", json!({})));
        assert_eq!(check(&outer, json!("$flag.x")), []);
    }

    #[test]
    fn resolve_reads_values_and_says_what_is_missing() {
        let values = BTreeMap::from([("input".to_owned(), json!({"user": "42"}))]);
        let template = json!({"id": "$input.user", "all": ["$input", 3]});
        assert_eq!(resolve(&template, &values), Ok(json!({"id": "42", "all": [{"user": "42"}, 3]})));
        assert_eq!(resolve(&json!("$profile.tier"), &values), Err("'profile' has no value".into()));
        assert_eq!(
            resolve(&json!(["$input.user.id"]), &values),
            Err(r#"'$input.user.id': no field 'id' in "42""#.into())
        );
    }

    #[test]
    fn bind_input_names_each_missing_member() {
        let program = r#"{"steps": [{"with": {"a": "$input.userId", "b": "$input.a/b.c"}}]}"#;
        assert!(bind_input(program, Some(r#"{"userId": 1, "a/b": {}}"#)).is_empty());
        let missing = bind_input(program, Some(r#"{"userId": 1}"#));
        assert_eq!(missing.len(), 1);
        assert_eq!((missing[0].code.as_str(), &missing[0].path), (INPUT_BINDING, &Locator::Pointer("/a~1b".into())));
        assert_eq!(missing[0].message, "input lacks 'a/b'");
        let absent = bind_input(program, None);
        assert_eq!(
            (&absent[0].path, absent[0].message.as_str()),
            (&Locator::Pointer(String::new()), "input must be an object holding userId, a/b")
        );
        assert!(bind_input(r#"{"steps": []}"#, None).is_empty(), "a program that reads no input accepts any");
    }
}
