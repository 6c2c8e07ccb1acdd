//! The JSON-RPC edge classifier (`pilotage_protocol::jsonrpc::classify`):
//! any bytes give an accepted message or a JSON-RPC error; never a panic.
//! An error serializes to a valid JSON-RPC error response (code one of the
//! three, string message, id null or a valid id); an accepted message has
//! `jsonrpc: "2.0"`, a valid id where its kind needs one, and classifies
//! the same when serialized again.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pilotage_protocol::jsonrpc::{self, MessageKind};
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    match jsonrpc::classify(data) {
        Err(error) => {
            assert!(
                [jsonrpc::PARSE_ERROR, jsonrpc::INVALID_REQUEST, jsonrpc::INVALID_PARAMS].contains(&error.code),
                "{error:?}"
            );
            assert!(error.id.is_null() || jsonrpc::is_valid_id(&error.id), "{error:?}");
            assert!(!error.message.is_empty());
            let text = error.to_response().to_string();
            let response: Value = serde_json::from_str(&text).expect("the error response is JSON");
            assert_eq!(response["jsonrpc"], "2.0");
            assert_eq!(response["error"]["code"].as_i64(), Some(error.code));
            assert!(response["error"]["message"].is_string());
            assert_eq!(response["id"], error.id);
            assert!(response.get("result").is_none());
            // The error response is itself a valid error message.
            let again = jsonrpc::classify(text.as_bytes()).expect("an error response is a valid message");
            assert_eq!(again.kind, MessageKind::Error);
        }
        Ok(message) => {
            assert_eq!(message.value["jsonrpc"], "2.0");
            match message.kind {
                MessageKind::Request | MessageKind::Response => assert!(jsonrpc::is_valid_id(&message.id)),
                MessageKind::Notification => assert!(message.id.is_null() && message.value.get("id").is_none()),
                MessageKind::Error => assert!(message.id.is_null() || jsonrpc::is_valid_id(&message.id)),
                other => panic!("a message kind this target does not check: {other:?}"),
            }
            if matches!(message.kind, MessageKind::Request | MessageKind::Notification) {
                assert!(message.value["method"].is_string());
                assert!(message.value.get("params").is_none_or(Value::is_object));
            }
            let text = message.value.to_string();
            let again = jsonrpc::classify(text.as_bytes()).expect("a serialized accepted message is accepted");
            assert_eq!(again, message);
        }
    }
});
