//! The JSON-RPC 2.0 message rules applied at the MCP edge (Part III §7.1,
//! JSON-RPC 2.0 §4–§6): [`classify`] takes the bytes of one HTTP body and
//! returns either the accepted [`Message`] or the exact JSON-RPC error
//! ([`EdgeError`]) the carrier answers with.
//!
//! The rules, in the order they are checked:
//!
//! 1. the body is JSON, else -32700 Parse error (trailing bytes after the
//!    value included);
//! 2. it is one object: a batch (array) or any other value is -32600;
//! 3. `id`, when present, is a string or an integer from -2^63 to 2^63-1
//!    written as an integer (no fraction, no exponent); anything else is
//!    -32600 answered with a null id;
//! 4. `jsonrpc` is exactly the string `"2.0"`;
//! 5. the member set says what the message is: `method` with `id` is a
//!    request, `method` without `id` a notification, `result` a response,
//!    `error` an error response; `method` beside `result`/`error`, or
//!    `result` beside `error`, or none of them, is -32600;
//! 6. `method` is a string; a request's `id` is not null;
//! 7. `params`, when present, is an object or an array (JSON-RPC §4.2),
//!    else -32600; an array is -32602 Invalid params, because every MCP
//!    method takes named parameters (an object);
//! 8. a response has a non-null id; an error response's `error` is an
//!    object with an integer `code` and a string `message`.
//!
//! Unknown members are ignored (Part II §1.2). Every error after rule 3
//! echoes the message's id when it is a valid one, else null.
//!
//! What this does not cover: whether a method exists or its parameters fit
//! the method's schema; the MCP layer answers those.
//!
//! ```
//! use pilotage_protocol::jsonrpc::{classify, MessageKind};
//! let message = classify(br#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#).unwrap();
//! assert_eq!(message.kind, MessageKind::Request);
//! let refused = classify(br#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#).unwrap_err();
//! assert_eq!(refused.code, -32600);
//! assert!(refused.id.is_null());
//! ```

use serde_json::{Map, Value, json};

/// JSON-RPC 2.0 Parse error: the body is not JSON.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC 2.0 Invalid Request: JSON that is not a valid message.
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC 2.0 Invalid params.
pub const INVALID_PARAMS: i64 = -32602;

/// What an accepted message is (JSON-RPC 2.0 §4, §4.1, §5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MessageKind {
    /// `method` and a non-null `id`: answered with a response.
    Request,
    /// `method` without `id`: never answered.
    Notification,
    /// `result` and an `id`.
    Response,
    /// `error` and an `id` (possibly null).
    Error,
}

/// A message that passed every rule of [`classify`].
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    /// What it is.
    pub kind: MessageKind,
    /// Its valid id: `Value::Null` for a notification and for an error
    /// response sent with a null id; else a string or an `i64` number.
    pub id: Value,
    /// The whole message as parsed.
    pub value: Value,
}

/// The JSON-RPC error to answer a refused body with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EdgeError {
    /// [`PARSE_ERROR`], [`INVALID_REQUEST`] or [`INVALID_PARAMS`].
    pub code: i64,
    /// What was wrong, for a person.
    pub message: String,
    /// The id to echo: the message's id when valid, else null.
    pub id: Value,
}

impl EdgeError {
    fn new(code: i64, id: &Value, message: impl Into<String>) -> Self {
        Self { code, message: message.into(), id: id.clone() }
    }

    /// The JSON-RPC 2.0 response object carrying this error (§5, §5.1).
    pub fn to_response(&self) -> Value {
        json!({"jsonrpc": "2.0", "id": self.id, "error": {"code": self.code, "message": self.message}})
    }
}

/// The JSON type's name of a value, for error messages.
fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(number) if number.is_i64() || number.is_u64() => "an integer",
        Value::Number(_) => "a number with a fraction or an exponent",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Whether `value` is a valid JSON-RPC id as accepted here: a string, or
/// an integer in `i64` (the range MCP SDKs, rmcp among them, represent).
/// Null is not (rule 6 allows it only on error responses).
pub fn is_valid_id(value: &Value) -> bool {
    match value {
        Value::String(_) => true,
        Value::Number(number) => number.is_i64(),
        _ => false,
    }
}

/// Classifies the bytes of one HTTP body as a JSON-RPC 2.0 message.
///
/// Total: never panics, whatever the bytes; the nesting depth is bounded
/// by serde_json's recursion limit (128), a deeper body being a parse
/// error.
///
/// # Errors
///
/// [`EdgeError`] with [`PARSE_ERROR`], [`INVALID_REQUEST`] or
/// [`INVALID_PARAMS`] by the rules of the module documentation.
pub fn classify(bytes: &[u8]) -> Result<Message, EdgeError> {
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|error| EdgeError::new(PARSE_ERROR, &Value::Null, format!("Parse error: {error}")))?;
    classify_value(value)
}

/// [`classify`] for a body already parsed as JSON (rules 2–8).
///
/// # Errors
///
/// [`EdgeError`] with [`INVALID_REQUEST`] or [`INVALID_PARAMS`].
pub fn classify_value(value: Value) -> Result<Message, EdgeError> {
    let null = Value::Null;
    let object = match &value {
        Value::Object(object) => object,
        Value::Array(_) => {
            return Err(EdgeError::new(
                INVALID_REQUEST,
                &null,
                "Invalid Request: batches are not supported; send one JSON-RPC message per request",
            ));
        }
        other => {
            return Err(EdgeError::new(
                INVALID_REQUEST,
                &null,
                format!("Invalid Request: a JSON-RPC message is an object, not {}", type_name(other)),
            ));
        }
    };
    let id = match object.get("id") {
        None | Some(Value::Null) => null.clone(),
        Some(id) if is_valid_id(id) => id.clone(),
        Some(id) => {
            return Err(EdgeError::new(
                INVALID_REQUEST,
                &null,
                format!(
                    "Invalid Request: 'id' must be a string or an integer from -2^63 to 2^63-1 written without fraction or exponent, not {}",
                    describe_bad_id(id)
                ),
            ));
        }
    };
    match object.get("jsonrpc") {
        Some(Value::String(version)) if version == "2.0" => {}
        None => {
            return Err(EdgeError::new(
                INVALID_REQUEST,
                &id,
                "Invalid Request: the member 'jsonrpc' is missing; it must be the string \"2.0\"",
            ));
        }
        Some(other) => {
            return Err(EdgeError::new(
                INVALID_REQUEST,
                &id,
                format!("Invalid Request: 'jsonrpc' must be the string \"2.0\", not {other}"),
            ));
        }
    }
    let (has_method, has_result, has_error) =
        (object.contains_key("method"), object.contains_key("result"), object.contains_key("error"));
    let kind = match (has_method, has_result, has_error) {
        (true, false, false) if object.contains_key("id") => MessageKind::Request,
        (true, false, false) => MessageKind::Notification,
        (false, true, false) => MessageKind::Response,
        (false, false, true) => MessageKind::Error,
        (false, false, false) => {
            return Err(EdgeError::new(
                INVALID_REQUEST,
                &id,
                "Invalid Request: the message has none of 'method' (a request or notification), 'result' or 'error' (a response)",
            ));
        }
        _ => {
            return Err(EdgeError::new(
                INVALID_REQUEST,
                &id,
                "Invalid Request: a message has exactly one of 'method', 'result' and 'error'",
            ));
        }
    };
    match kind {
        MessageKind::Request | MessageKind::Notification => check_call(object, kind, &id)?,
        MessageKind::Response => {
            if id.is_null() {
                return Err(EdgeError::new(
                    INVALID_REQUEST,
                    &id,
                    "Invalid Request: a response must carry the id of the request it answers",
                ));
            }
        }
        MessageKind::Error => check_error_object(object, &id)?,
    }
    Ok(Message { kind, id, value })
}

fn describe_bad_id(id: &Value) -> String {
    match id {
        Value::Number(number) if number.is_u64() => format!("{number}, which is above 2^63-1"),
        Value::Number(number) => format!("{number} ({})", type_name(id)),
        other => type_name(other).to_owned(),
    }
}

/// Rules 6 and 7 for requests and notifications.
fn check_call(object: &Map<String, Value>, kind: MessageKind, id: &Value) -> Result<(), EdgeError> {
    if kind == MessageKind::Request && id.is_null() {
        return Err(EdgeError::new(
            INVALID_REQUEST,
            id,
            "Invalid Request: a request's 'id' must not be null (omit 'id' for a notification)",
        ));
    }
    match object.get("method") {
        // `None` cannot happen: a call has a `method` member (rule 5).
        Some(Value::String(_)) | None => {}
        Some(other) => {
            return Err(EdgeError::new(
                INVALID_REQUEST,
                id,
                format!("Invalid Request: 'method' must be a string, not {}", type_name(other)),
            ));
        }
    }
    match object.get("params") {
        None | Some(Value::Object(_)) => Ok(()),
        // Rationale: by-position params are valid JSON-RPC, so the message is
        // well formed; they are the wrong params for every MCP method.
        Some(Value::Array(_)) => Err(EdgeError::new(
            INVALID_PARAMS,
            id,
            "Invalid params: 'params' must be an object; MCP methods take named parameters, not an array",
        )),
        Some(other) => Err(EdgeError::new(
            INVALID_REQUEST,
            id,
            format!("Invalid Request: 'params' must be an object (or omitted), not {}", type_name(other)),
        )),
    }
}

/// Rule 8 for error responses (JSON-RPC 2.0 §5.1).
fn check_error_object(object: &Map<String, Value>, id: &Value) -> Result<(), EdgeError> {
    let Some(Value::Object(error)) = object.get("error") else {
        return Err(EdgeError::new(INVALID_REQUEST, id, "Invalid Request: 'error' must be an object"));
    };
    if error.get("code").is_none_or(|code| code.as_i64().is_none()) {
        return Err(EdgeError::new(
            INVALID_REQUEST,
            id,
            "Invalid Request: 'error.code' must be an integer from -2^63 to 2^63-1",
        ));
    }
    if error.get("message").is_none_or(|message| !message.is_string()) {
        return Err(EdgeError::new(INVALID_REQUEST, id, "Invalid Request: 'error.message' must be a string"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `check(body, expect)`: `Ok(kind)` or `Err((code, echoed id))`.
    fn check(body: &str, expect: Result<MessageKind, (i64, Value)>) {
        let got = classify(body.as_bytes()).map(|message| message.kind).map_err(|error| (error.code, error.id));
        assert_eq!(got, expect, "{body}");
    }

    #[test]
    fn ids_that_are_strings_or_i64_integers_are_accepted() {
        for id in ["0", "-1", "9223372036854775807", "-9223372036854775808", "\"a\"", "\"\"", "\"ünï😀\""] {
            check(&format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#), Ok(MessageKind::Request));
        }
    }

    #[test]
    fn ids_of_other_types_or_out_of_range_are_invalid_requests_with_a_null_id() {
        let invalid = (INVALID_REQUEST, Value::Null);
        for id in ["null", "1.5", "1e3", "1.0", "true", "{}", "[]", "9223372036854775808", "-18446744073709551616"] {
            check(&format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#), Err(invalid.clone()));
        }
    }

    /// A number too large for an integer is an f64; serializing the parsed
    /// message and parsing it again must give the same value, or a relay
    /// would change a client's numbers (found by the `jsonrpc_classify`
    /// fuzz target; needs serde_json's correctly rounded parsing).
    #[test]
    fn large_numbers_survive_a_serialize_and_parse_round_trip() {
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"ping","junk":[777777777777777777777777777777777777777777777777777777777772,1e308,5e-324]}"#;
        let message = classify(body.as_bytes()).expect("accepted");
        let again = classify(message.value.to_string().as_bytes()).expect("accepted again");
        assert_eq!(again, message);
    }

    #[test]
    fn the_envelope_rules() {
        let invalid = |id: Value| Err((INVALID_REQUEST, id));
        check(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#, Ok(MessageKind::Notification));
        check(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#, Ok(MessageKind::Response));
        check(r#"{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"no"}}"#, Ok(MessageKind::Error));
        check(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-1,"message":"no"}}"#, Ok(MessageKind::Error));
        check(r#"{"jsonrpc":"2.0","id":1,"method":"ping","junk":[1,2]}"#, Ok(MessageKind::Request));
        check(r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#, invalid(json!(1)));
        check(r#"{"jsonrpc":2.0,"id":1,"method":"ping"}"#, invalid(json!(1)));
        check(r#"{"id":"x","method":"ping"}"#, invalid(json!("x")));
        check(r#"{"jsonrpc":"2.0","id":1,"method":7}"#, invalid(json!(1)));
        check(r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":"x"}"#, invalid(json!(1)));
        check(r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":3}"#, invalid(json!(1)));
        check(r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":null}"#, invalid(json!(1)));
        check(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":[]}"#, Err((INVALID_PARAMS, json!(1))));
        check(r#"{"jsonrpc":"2.0","id":1,"method":"ping","result":{}}"#, invalid(json!(1)));
        check(r#"{"jsonrpc":"2.0","id":1,"result":{},"error":{}}"#, invalid(json!(1)));
        check(r#"{"jsonrpc":"2.0","id":1}"#, invalid(json!(1)));
        check(r#"{"jsonrpc":"2.0","result":{}}"#, invalid(Value::Null));
        check(r#"{"jsonrpc":"2.0","id":1,"error":"no"}"#, invalid(json!(1)));
        check(r#"{"jsonrpc":"2.0","id":1,"error":{"code":1.5,"message":"no"}}"#, invalid(json!(1)));
        check(r#"{"jsonrpc":"2.0","id":1,"error":{"code":1}}"#, invalid(json!(1)));
        check(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#, invalid(Value::Null));
        check(r#"[]"#, invalid(Value::Null));
        check(r#""ping""#, invalid(Value::Null));
        check(r#"{"jsonrpc":"2.0","id":1,"method":"ping"} junk"#, Err((PARSE_ERROR, Value::Null)));
        check("{ not json", Err((PARSE_ERROR, Value::Null)));
        check(&"[".repeat(100_000), Err((PARSE_ERROR, Value::Null)));
    }

    #[test]
    fn messages_say_what_was_wrong() {
        let error = classify(br#"{"jsonrpc":"2.0","id":9223372036854775808,"method":"ping"}"#).unwrap_err();
        assert!(error.message.contains("above 2^63-1"), "{}", error.message);
        let error = classify(br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":"x"}"#).unwrap_err();
        assert!(error.message.contains("'params' must be an object") && error.message.contains("a string"));
        let response = error.to_response();
        assert_eq!(response["jsonrpc"], "2.0");
        assert_eq!(response["id"], 1);
        assert_eq!(response["error"]["code"], INVALID_REQUEST);
    }
}
