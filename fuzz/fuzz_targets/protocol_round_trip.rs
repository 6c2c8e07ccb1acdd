//! The protocol deserializers: the first byte picks a type of
//! `pilotage_protocol` (requests, responses, plans, traces, outcomes,
//! catalog entries, manifests, guides, diagnostics, request errors); the
//! rest is JSON. Whatever deserializes must serialize (except the
//! receiver-side `Unrecognized` fallbacks of Part II §1.3), deserialize
//! again and compare equal (round trip), and serialize to the same JSON
//! twice.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pilotage_protocol::{catalog, diagnostic, guide, manifest, outcome, plan, request_error, requests, risk, trace};
use serde::Serialize;
use serde::de::DeserializeOwned;

fn round_trip<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(json: &[u8]) {
    let Ok(first) = serde_json::from_slice::<T>(json) else { return };
    let value = match serde_json::to_value(&first) {
        Ok(value) => value,
        // Part II §1.3 fallbacks (`Unrecognized`) are receiver-side only and
        // refuse to serialize, by design; nothing else may fail.
        Err(error) if error.to_string().contains("::Unrecognized cannot be serialized") => return,
        Err(error) => panic!("a deserialized value does not serialize: {error}"),
    };
    let second: T = serde_json::from_value(value.clone())
        .unwrap_or_else(|error| panic!("its serialization does not deserialize: {error}\n{value}"));
    assert_eq!(first, second, "round trip changed the value; serialized as {value}");
    assert_eq!(serde_json::to_value(&second).unwrap(), value, "serialization is not stable");
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, json)) = data.split_first() else { return };
    match selector % 22 {
        0 => round_trip::<requests::ValidateResponse>(json),
        1 => round_trip::<requests::ExecuteRequest>(json),
        2 => round_trip::<requests::ExecuteResponse>(json),
        3 => round_trip::<requests::TraceFetchRequest>(json),
        4 => round_trip::<requests::TraceFetchResponse>(json),
        5 => round_trip::<plan::Plan>(json),
        6 => round_trip::<plan::PlanStep>(json),
        7 => round_trip::<trace::Trace>(json),
        8 => round_trip::<trace::TraceStep>(json),
        9 => round_trip::<outcome::Outcome>(json),
        10 => round_trip::<catalog::CatalogEntry>(json),
        11 => round_trip::<catalog::CatalogListResult>(json),
        12 => round_trip::<catalog::CatalogGetResult>(json),
        13 => round_trip::<catalog::CatalogChangedResult>(json),
        14 => round_trip::<manifest::Manifest>(json),
        15 => round_trip::<manifest::LanguageEntry>(json),
        16 => round_trip::<guide::Guide>(json),
        17 => round_trip::<guide::GuideIndexResult>(json),
        18 => round_trip::<guide::GuideFetchResult>(json),
        19 => round_trip::<diagnostic::Diagnostic>(json),
        20 => round_trip::<request_error::RequestError>(json),
        _ => round_trip::<risk::RiskHints>(json),
    }
});
