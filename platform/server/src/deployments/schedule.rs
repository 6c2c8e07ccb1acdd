//! Schedule triggers: a cron pattern evaluated in an IANA time zone
//! (`croner` over `chrono-tz`). Daylight-saving changes follow croner's
//! rules (the Open Cron Pattern Specification): a fixed local time that
//! does not exist (the skipped hour) fires at the first instant after the
//! gap, a fixed local time that happens twice fires once, at its first
//! occurrence; wildcard and stepped patterns fire on the wall clock as it
//! is (nothing inside the gap, each pass of a repeated hour).

use std::str::FromStr;

use chrono::{DateTime, TimeZone, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds};

/// Occurs when a schedule trigger does not parse; the message is meant for
/// the deployer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum ScheduleError {
    /// Occurs when the zone is not an IANA time zone name.
    #[error("'{0}' is not an IANA time zone name (for example Europe/Paris or America/New_York)")]
    TimeZone(String),
    /// Occurs when the pattern has neither 5 nor 6 fields.
    #[error("'{pattern}' has {fields} fields; a schedule has 5 (minute hour day month weekday) or 6 (seconds first)")]
    Fields {
        /// The pattern given.
        pattern: String,
        /// How many fields it has.
        fields: usize,
    },
    /// Occurs when croner refuses the pattern.
    #[error("'{pattern}' is not a cron pattern: {message}")]
    Pattern {
        /// The pattern given.
        pattern: String,
        /// croner's reason.
        message: String,
    },
}

/// A parsed schedule.
#[derive(Clone, Debug)]
pub(crate) struct Schedule {
    cron: Cron,
    zone: Tz,
}

impl Schedule {
    /// Parses a 5-field (minute first) or 6-field (seconds first) cron
    /// pattern and an IANA zone name.
    ///
    /// # Errors
    /// [`ScheduleError`] naming what is wrong.
    pub(crate) fn parse(pattern: &str, time_zone: &str) -> Result<Schedule, ScheduleError> {
        let zone = Tz::from_str(time_zone).map_err(|_| ScheduleError::TimeZone(time_zone.to_owned()))?;
        let fields = pattern.split_whitespace().count();
        if !(5..=6).contains(&fields) {
            return Err(ScheduleError::Fields { pattern: pattern.to_owned(), fields });
        }
        let cron = CronParser::builder()
            .seconds(Seconds::Optional)
            .build()
            .parse(pattern)
            .map_err(|error| ScheduleError::Pattern { pattern: pattern.to_owned(), message: error.to_string() })?;
        Ok(Schedule { cron, zone })
    }

    /// The first tick strictly after `after_ms` (ms since the Unix epoch),
    /// or none when the pattern never matches again.
    pub(crate) fn next_after(&self, after_ms: i64) -> Option<i64> {
        let start = self.zone.timestamp_millis_opt(after_ms).single()?;
        let next: DateTime<Tz> = self.cron.find_next_occurrence(&start, false).ok()?;
        Some(next.with_timezone(&Utc).timestamp_millis())
    }

    /// The last tick at or before `at_ms`, when there is one (the missed-tick
    /// policy fires only the latest missed tick).
    pub(crate) fn latest_at_or_before(&self, at_ms: i64) -> Option<i64> {
        let start = self.zone.timestamp_millis_opt(at_ms).single()?;
        let previous: DateTime<Tz> = self.cron.find_previous_occurrence(&start, true).ok()?;
        Some(previous.with_timezone(&Utc).timestamp_millis())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(text: &str) -> i64 {
        DateTime::parse_from_rfc3339(text).unwrap().timestamp_millis()
    }

    fn show(ms: i64) -> String {
        Utc.timestamp_millis_opt(ms).unwrap().to_rfc3339()
    }

    #[test]
    fn a_daily_time_follows_the_zone() {
        let schedule = Schedule::parse("30 22 * * *", "Europe/Paris").unwrap();
        // Winter: Paris is UTC+1.
        assert_eq!(show(schedule.next_after(utc("2026-12-03T12:00:00Z")).unwrap()), "2026-12-03T21:30:00+00:00");
        // Summer: UTC+2.
        assert_eq!(show(schedule.next_after(utc("2026-07-01T12:00:00Z")).unwrap()), "2026-07-01T20:30:00+00:00");
    }

    #[test]
    fn a_time_in_the_spring_gap_fires_once_just_after_it() {
        // 2026-03-29 in Paris: 02:00 → 03:00; 02:30 does not exist.
        let schedule = Schedule::parse("30 2 * * *", "Europe/Paris").unwrap();
        let first = schedule.next_after(utc("2026-03-28T12:00:00Z")).unwrap();
        assert_eq!(show(first), "2026-03-29T01:00:00+00:00", "03:00 local, the first instant after the gap");
        let second = schedule.next_after(first).unwrap();
        assert_eq!(show(second), "2026-03-30T00:30:00+00:00", "then 02:30 CEST the next day");
    }

    #[test]
    fn a_time_in_the_autumn_overlap_fires_once() {
        // 2026-10-25 in Paris: 03:00 → 02:00; 02:30 happens twice.
        let schedule = Schedule::parse("30 2 * * *", "Europe/Paris").unwrap();
        let first = schedule.next_after(utc("2026-10-24T12:00:00Z")).unwrap();
        assert_eq!(show(first), "2026-10-25T00:30:00+00:00", "the first 02:30 (CEST)");
        let second = schedule.next_after(first).unwrap();
        assert_eq!(show(second), "2026-10-26T01:30:00+00:00", "not the second 02:30 (CET): the next day");
    }

    #[test]
    fn seconds_and_the_latest_tick() {
        let schedule = Schedule::parse("*/10 * * * * *", "UTC").unwrap();
        assert_eq!(schedule.next_after(utc("2026-12-03T10:00:03Z")), Some(utc("2026-12-03T10:00:10Z")));
        assert_eq!(schedule.latest_at_or_before(utc("2026-12-03T10:00:13Z")), Some(utc("2026-12-03T10:00:10Z")));
        assert_eq!(schedule.latest_at_or_before(utc("2026-12-03T10:00:10Z")), Some(utc("2026-12-03T10:00:10Z")));
    }

    #[test]
    fn bad_patterns_and_zones_are_refused_with_the_reason() {
        assert!(matches!(Schedule::parse("30 22 * * *", "Europe/Pariss"), Err(ScheduleError::TimeZone(_))));
        assert!(matches!(Schedule::parse("30 22 * *", "UTC"), Err(ScheduleError::Fields { fields: 4, .. })));
        assert!(matches!(Schedule::parse("61 22 * * *", "UTC"), Err(ScheduleError::Pattern { .. })));
        assert!(Schedule::parse("* * * * * * * *", "UTC").is_err());
    }
}
