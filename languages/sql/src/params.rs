//! Parameters: the `$1…$n` placeholders of a program and their binding
//! from the Run's `input` (Part II §6.5.5).
//!
//! Convention: `input` is a JSON array `[v1, …, vn]` (or an object
//! `{"params": [v1, …, vn]}`) whose k-th element binds `$k` in every
//! statement; a program without placeholders takes no input (absent, `[]`
//! or `{"params": []}`).

use pilotage_guest_sdk::Diagnostic;
use pilotage_guest_sdk::diag::{INPUT_BINDING, error_at, error_in};
use serde_json::Value;

use crate::analyze::Placeholder;
use crate::codes;

/// The most parameters one program may use.
pub const MAX_PARAMETERS: u32 = 100;

/// Checks one statement's placeholders: each of the form `$n`, and the
/// numbers it uses exactly `$1…$k` (PostgreSQL cannot type a parameter a
/// statement never uses). Returns the `k` the statement needs and its
/// findings.
pub fn statement_parameters(
    placeholders: &[Placeholder],
    statement_range: &pilotage_guest_sdk::TextRange,
) -> (u32, Vec<Diagnostic>) {
    let mut findings = Vec::new();
    let mut numbers = Vec::new();
    for placeholder in placeholders {
        let range = placeholder.range.unwrap_or(*statement_range);
        match placeholder.number {
            Some(n) if n <= MAX_PARAMETERS => numbers.push(n),
            Some(_) => findings.push(error_in(
                codes::PARAMETER_MISMATCH,
                range,
                format!("{} is above the bound of ${MAX_PARAMETERS}", placeholder.text),
            )),
            None => findings.push(pilotage_guest_sdk::diag::with_hint(
                error_in(
                    codes::PARAMETER_MISMATCH,
                    range,
                    format!("placeholder '{}' is not of the form $1…$n", placeholder.text),
                ),
                Some("number the parameters $1, $2, … and pass their values in input as a JSON array".into()),
            )),
        }
    }
    numbers.sort_unstable();
    numbers.dedup();
    let needed = numbers.last().copied().unwrap_or(0);
    if let Some(missing) = (1..=needed).find(|n| !numbers.contains(n)) {
        findings.push(error_in(
            codes::PARAMETER_MISMATCH,
            *statement_range,
            format!("this statement uses ${needed} but not ${missing}; each statement must use every parameter up to its highest"),
        ));
    }
    (needed, findings)
}

/// The parameter values bound from `input` for a program needing `count`
/// parameters.
///
/// # Errors
/// `input_binding` diagnostics with JSON Pointers into `input`: `""` when
/// the shape is wrong, `/k` (or `/params/k`) for an element.
pub fn bind(count: u32, input: Option<&Value>) -> Result<Vec<Value>, Vec<Diagnostic>> {
    let (values, prefix) = match input {
        None | Some(Value::Null) => (Vec::new(), ""),
        Some(Value::Array(values)) => (values.clone(), ""),
        Some(Value::Object(object)) => match (object.get("params"), object.len()) {
            (Some(Value::Array(values)), 1) => (values.clone(), "/params"),
            _ => {
                return Err(vec![error_at(
                    INPUT_BINDING,
                    "",
                    "input must be a JSON array of parameter values, or an object {\"params\": [...]} and nothing else",
                )]);
            }
        },
        Some(_) => {
            return Err(vec![error_at(
                INPUT_BINDING,
                "",
                "input must be a JSON array of parameter values ($1 is the first element)",
            )]);
        }
    };
    let count = count as usize;
    if values.len() != count {
        let pointer = if values.len() > count { format!("{prefix}/{count}") } else { prefix.to_owned() };
        let message = match count {
            0 => format!("the program has no parameters but input supplies {}", values.len()),
            _ => format!("the program uses $1…${count} but input supplies {} values", values.len()),
        };
        return Err(vec![error_at(INPUT_BINDING, pointer, message)]);
    }
    let mut findings = Vec::new();
    for (index, value) in values.iter().enumerate() {
        if matches!(value, Value::Object(_)) || matches!(value, Value::Array(_)) {
            // JSON values bind to json/jsonb parameters only; the database
            // reports any other use. Nothing to check here.
            continue;
        }
        if let Value::Number(number) = value
            && number.as_f64().is_none_or(|f| !f.is_finite())
        {
            findings.push(error_at(INPUT_BINDING, format!("{prefix}/{index}"), "the number is not finite"));
        }
    }
    if findings.is_empty() { Ok(values) } else { Err(findings) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pilotage_guest_sdk::Locator;
    use pilotage_guest_sdk::diag::text_range;
    use serde_json::json;

    fn placeholder(text: &str) -> Placeholder {
        let number = text.strip_prefix('$').and_then(|d| d.parse().ok()).filter(|n| *n > 0);
        Placeholder { number, text: text.into(), range: None }
    }

    #[test]
    fn statements_need_contiguous_dollar_placeholders() {
        let range = text_range((1, 1), (1, 9));
        let (needed, findings) =
            statement_parameters(&[placeholder("$1"), placeholder("$2"), placeholder("$1")], &range);
        assert_eq!((needed, findings.len()), (2, 0));
        let (_, findings) = statement_parameters(&[placeholder("$2")], &range);
        assert_eq!(findings[0].code, codes::PARAMETER_MISMATCH);
        let (_, findings) = statement_parameters(&[placeholder("?")], &range);
        assert_eq!(findings[0].code, codes::PARAMETER_MISMATCH);
    }

    #[test]
    fn input_binds_as_an_array_or_params_object() {
        assert_eq!(bind(2, Some(&json!(["a", 3]))).unwrap(), vec![json!("a"), json!(3)]);
        assert_eq!(bind(1, Some(&json!({"params": [true]}))).unwrap(), vec![json!(true)]);
        assert!(bind(0, None).unwrap().is_empty());
        assert!(bind(0, Some(&json!([]))).unwrap().is_empty());
    }

    #[test]
    fn mismatches_are_input_binding_with_pointers() {
        let missing = bind(2, Some(&json!(["a"]))).unwrap_err();
        assert_eq!(missing[0].code, INPUT_BINDING);
        assert_eq!(missing[0].path, Locator::Pointer(String::new()));
        let extra = bind(1, Some(&json!({"params": [1, 2]}))).unwrap_err();
        assert_eq!(extra[0].path, Locator::Pointer("/params/1".into()));
        let shape = bind(1, Some(&json!({"customer": 1}))).unwrap_err();
        assert_eq!(shape[0].path, Locator::Pointer(String::new()));
        assert!(bind(0, Some(&json!([1]))).is_err());
        assert!(bind(1, None).is_err());
    }
}
