//! The webhook signature reader (`pilotage_signature::Signed`): any
//! timestamp and signature headers and any body are read without a panic.
//! A signature that parses names a 64-digit lower-case replay identity; a
//! delivery that verifies under the key has the identity of the signature a
//! sender computes for it, in whichever case its hex was written, so a
//! re-cased replay is always recognized.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pilotage_signature::{Signed, sign};

const KEY: &[u8] = b"fuzz-webhook-key";

fuzz_target!(|data: &[u8]| {
    // The input is `<timestamp>\n<signature>\n<body>`.
    let mut parts = data.splitn(3, |byte| *byte == b'\n');
    let timestamp = String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned();
    let signature = String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned();
    let body = parts.next().unwrap_or_default();
    let Ok(signed) = Signed::parse(&timestamp, &signature) else { return };
    let id = signed.replay_id();
    assert_eq!(id.len(), 64);
    assert!(id.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)), "{id}");
    // The same MAC written in another case is the same delivery.
    let digits = &signature["sha256=".len()..];
    for other in [digits.to_ascii_uppercase(), digits.to_ascii_lowercase()] {
        let again = Signed::parse(&timestamp, &format!("sha256={other}")).expect("a re-cased signature parses");
        assert_eq!(again.replay_id(), id);
        assert_eq!(again.verify(KEY, body), signed.verify(KEY, body));
    }
    // What a sender signs verifies and has the canonical identity.
    let sent = sign(KEY, signed.timestamp(), body);
    let canonical = Signed::parse(&signed.timestamp().to_string(), &sent).expect("a signature the sender made parses");
    assert!(canonical.verify(KEY, body));
    if signed.verify(KEY, body) {
        assert_eq!(canonical.replay_id(), id, "a verified delivery is the sender's, whatever its case");
    }
});
