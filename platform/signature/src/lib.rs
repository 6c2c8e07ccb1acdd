//! Signed webhook deliveries (docs/architecture.md "Deployments"): a sender
//! puts the Unix time in `Pilotage-Timestamp` and
//! `sha256=<hex HMAC-SHA256(key, "<timestamp>.<body>")>` in
//! `Pilotage-Signature`. [`sign`] computes it; [`Signed::parse`] reads the
//! two headers; [`Signed::verify`] checks the MAC in constant time; and
//! [`Signed::replay_id`] names the delivery for replay detection.
//!
//! Invariant: a delivery's replay identity is its MAC's bytes, never the
//! header's text, so every encoding of one MAC (upper, lower or mixed-case
//! hex) is one delivery: whoever saw a delivery cannot fire it again by
//! re-casing its signature. Nothing here reads a clock or the network.
//!
//! ```
//! use pilotage_signature::{Signed, sign};
//! let header = sign(b"key", 1_700_000_000, b"{}");
//! let signed = Signed::parse("1700000000", &header.to_uppercase().replace("SHA256=", "sha256=")).unwrap();
//! assert!(signed.verify(b"key", b"{}"));
//! assert_eq!(signed.replay_id(), Signed::parse("1700000000", &header).unwrap().replay_id());
//! ```
#![deny(unsafe_code)]

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// The header carrying the delivery's Unix time, in seconds.
pub const TIMESTAMP_HEADER: &str = "pilotage-timestamp";

/// The header carrying `sha256=<hex MAC>`.
pub const SIGNATURE_HEADER: &str = "pilotage-signature";

/// The prefix of the signature header's value.
const SCHEME: &str = "sha256=";

/// Occurs when a delivery's headers are not a signature.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SignatureError {
    /// Occurs when the timestamp is not Unix seconds written in decimal
    /// digits (no sign, no leading zero).
    #[error("{TIMESTAMP_HEADER} is not Unix seconds")]
    Timestamp,
    /// Occurs when the signature is not `sha256=` and 64 hexadecimal digits.
    #[error("{SIGNATURE_HEADER} is not sha256=<64 hex digits>")]
    Signature,
}

/// The signature header's value for `body` sent at `timestamp` (Unix
/// seconds) under `key`: what a sender computes.
pub fn sign(key: &[u8], timestamp: i64, body: &[u8]) -> String {
    format!("{SCHEME}{}", hex::encode(mac(key, timestamp.to_string().as_bytes(), body)))
}

fn mac(key: &[u8], timestamp: &[u8], body: &[u8]) -> [u8; 32] {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(timestamp);
    mac.update(b".");
    mac.update(body);
    mac.finalize().into_bytes().into()
}

/// A delivery's signature headers, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signed {
    timestamp_text: String,
    timestamp: i64,
    mac: [u8; 32],
}

impl Signed {
    /// Reads the timestamp header (decimal digits without a leading zero,
    /// so one time has one text) and the signature header (`sha256=` then 64 hex digits of any
    /// case).
    ///
    /// # Errors
    /// [`SignatureError`] naming the header that is not one.
    pub fn parse(timestamp: &str, signature: &str) -> Result<Signed, SignatureError> {
        let canonical = !timestamp.is_empty()
            && timestamp.len() <= 19
            && timestamp.bytes().all(|b| b.is_ascii_digit())
            && (timestamp == "0" || !timestamp.starts_with('0'));
        if !canonical {
            return Err(SignatureError::Timestamp);
        }
        let seconds = timestamp.parse::<i64>().map_err(|_| SignatureError::Timestamp)?;
        let digits = signature.strip_prefix(SCHEME).ok_or(SignatureError::Signature)?;
        let bytes = hex::decode(digits).map_err(|_| SignatureError::Signature)?;
        let mac: [u8; 32] = bytes.try_into().map_err(|_| SignatureError::Signature)?;
        Ok(Signed { timestamp_text: timestamp.to_owned(), timestamp: seconds, mac })
    }

    /// The Unix time the sender put in the delivery, in seconds.
    pub fn timestamp(&self) -> i64 {
        self.timestamp
    }

    /// Whether the MAC is `body`'s at this timestamp under `key` (compared
    /// in constant time).
    pub fn verify(&self, key: &[u8], body: &[u8]) -> bool {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes a key of any length");
        mac.update(self.timestamp_text.as_bytes());
        mac.update(b".");
        mac.update(body);
        mac.verify_slice(&self.mac).is_ok()
    }

    /// The delivery's identity for replay detection: its MAC as lower-case
    /// hex, whatever case the header used.
    pub fn replay_id(&self) -> String {
        hex::encode(self.mac)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BODY: &[u8] = b"{\"state\":\"open\"}";

    #[test]
    fn a_signature_verifies_only_for_its_key_timestamp_and_body() {
        let header = sign(b"key", 1_700_000_000, BODY);
        let signed = Signed::parse("1700000000", &header).unwrap();
        assert!(signed.verify(b"key", BODY));
        assert!(!signed.verify(b"other", BODY));
        assert!(!signed.verify(b"key", b"{\"state\":\"closed\"}"));
        assert!(!Signed::parse("1700000001", &header).unwrap().verify(b"key", BODY));
    }

    #[test]
    fn every_encoding_of_one_mac_is_one_delivery() {
        let header = sign(b"key", 1_700_000_000, BODY);
        let digits = header.strip_prefix("sha256=").unwrap();
        let mixed: String =
            digits.chars().enumerate().map(|(i, c)| if i % 2 == 0 { c.to_ascii_uppercase() } else { c }).collect();
        let canonical = Signed::parse("1700000000", &header).unwrap().replay_id();
        assert_eq!(canonical, digits);
        for encoding in [digits.to_owned(), digits.to_ascii_uppercase(), mixed] {
            let signed = Signed::parse("1700000000", &format!("sha256={encoding}")).unwrap();
            assert!(signed.verify(b"key", BODY), "{encoding}");
            assert_eq!(signed.replay_id(), canonical, "{encoding}");
        }
    }

    #[test]
    fn headers_that_are_not_a_signature_are_refused() {
        let header = sign(b"key", 1_700_000_000, BODY);
        for timestamp in ["", "+1700000000", " 1700000000", "01700000000", "1.7e9", "17000000000000000000", "-1"] {
            assert_eq!(Signed::parse(timestamp, &header), Err(SignatureError::Timestamp), "{timestamp:?}");
        }
        let digits = header.strip_prefix("sha256=").unwrap();
        for signature in [
            digits.to_owned(),
            format!("SHA256={digits}"),
            format!("sha256={}", &digits[..62]),
            format!("sha256={digits}00"),
            format!("sha256={}zz", &digits[..62]),
            format!("sha256= {digits}"),
        ] {
            assert_eq!(Signed::parse("1700000000", &signature), Err(SignatureError::Signature), "{signature}");
        }
    }
}
