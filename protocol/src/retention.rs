//! Run retention (Part II §6.6): `none`, `session`, or an ISO 8601
//! duration, parsed with the `iso8601-duration` library.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A Language's declared retention of run records (Part II §6.6).
#[derive(Clone, Debug, PartialEq)]
pub enum Retention {
    /// Runs are never retrievable; `trace_fetch` must not be declared.
    None,
    /// Runs are retrievable within the Session that executed them.
    Session,
    /// Runs are retrievable for at least this long, across restarts.
    Duration {
        /// The ISO 8601 text as declared, e.g. `PT1H`.
        text: String,
        /// The same span; calendar units use 365-day years and 30-day months.
        span: Duration,
    },
    /// A value this version does not understand (Part II §1.3: the
    /// conditioned capability is treated as undeclared).
    Unrecognized(String),
}

/// Occurs when a retention string is neither `none`, `session` nor an
/// ISO 8601 duration.
#[derive(Debug, thiserror::Error)]
#[error("'{0}' is not a retention value: expected none, session, or an ISO 8601 duration such as PT1H")]
pub struct RetentionParseError(pub String);

impl Retention {
    /// Parses a declared retention value strictly.
    ///
    /// # Errors
    /// [`RetentionParseError`] when the text is not `none`, `session` or a
    /// positive ISO 8601 duration.
    pub fn parse(text: &str) -> Result<Retention, RetentionParseError> {
        match text {
            "none" => Ok(Retention::None),
            "session" => Ok(Retention::Session),
            _ => parse_duration(text)
                .map(|span| Retention::Duration { text: text.to_owned(), span })
                .ok_or_else(|| RetentionParseError(text.to_owned())),
        }
    }

    /// The wire text.
    pub fn as_str(&self) -> &str {
        match self {
            Retention::None => "none",
            Retention::Session => "session",
            Retention::Duration { text, .. } => text,
            Retention::Unrecognized(text) => text,
        }
    }

    /// Whether runs are kept at all under this policy when `store` is absent.
    pub fn retains(&self) -> bool {
        matches!(self, Retention::Session | Retention::Duration { .. })
    }
}

/// Parses an ISO 8601 duration (`P1DT2H`, `PT0.5S`, `P2W`) into a span.
/// Returns `None` for anything else, including an empty `P` and a span too
/// large for [`Duration`] (found by fuzzing: `PT1e400S` must not panic).
pub fn parse_duration(text: &str) -> Option<Duration> {
    if !text.starts_with('P') || text.len() < 3 {
        return None;
    }
    let parsed = iso8601_duration::Duration::parse(text).ok()?;
    let seconds = f64::from(parsed.year) * 365.0 * 86_400.0
        + f64::from(parsed.month) * 30.0 * 86_400.0
        + f64::from(parsed.day) * 86_400.0
        + f64::from(parsed.hour) * 3_600.0
        + f64::from(parsed.minute) * 60.0
        + f64::from(parsed.second);
    Duration::try_from_secs_f64(seconds).ok()
}

impl fmt::Display for Retention {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Retention {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Retention {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Ok(Retention::parse(&text).unwrap_or(Retention::Unrecognized(text)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_two_words_and_durations() {
        assert_eq!(Retention::parse("none").unwrap(), Retention::None);
        assert_eq!(Retention::parse("session").unwrap(), Retention::Session);
        match Retention::parse("PT1H").unwrap() {
            Retention::Duration { span, .. } => assert_eq!(span, Duration::from_secs(3600)),
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(parse_duration("P1DT2H30M"), Some(Duration::from_secs(86_400 + 9_000)));
        assert_eq!(parse_duration("PT0.5S"), Some(Duration::from_millis(500)));
    }

    #[test]
    fn rejects_what_is_not_a_retention() {
        assert!(Retention::parse("forever").is_err());
        assert!(Retention::parse("P").is_err());
        assert!(Retention::parse("1H").is_err());
        assert!(Retention::parse("").is_err());
        // Beyond what a Duration holds: an error, never a panic.
        assert!(Retention::parse("P99999999999999999999Y").is_err());
        assert!(Retention::parse(&format!("PT{}S", "9".repeat(400))).is_err());
    }

    #[test]
    fn unknown_wire_values_are_kept_as_unrecognized() {
        let parsed: Retention = serde_json::from_str("\"eternal\"").unwrap();
        assert_eq!(parsed, Retention::Unrecognized("eternal".into()));
        assert!(!parsed.retains());
    }

    #[test]
    fn round_trips_as_its_text() {
        let retention = Retention::parse("P7D").unwrap();
        let text = serde_json::to_string(&retention).unwrap();
        assert_eq!(text, "\"P7D\"");
        assert_eq!(serde_json::from_str::<Retention>(&text).unwrap(), retention);
    }
}
