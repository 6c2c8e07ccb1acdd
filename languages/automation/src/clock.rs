//! Time: IANA zones, `HH:MM` windows read in a zone's local time, and the
//! light syntax checks of cron expressions and MQTT topic filters (the
//! platform parses both fully when it installs a trigger).

use std::str::FromStr;

use chrono::{DateTime, Datelike, Offset, Timelike};
use chrono_tz::{TZ_VARIANTS, Tz};
use pilotage_guest_sdk::hints::hint;

/// A daily window of local time: from `after` (included) to `before`
/// (excluded), in minutes since local midnight. When `after` is later than
/// `before`, the window crosses midnight.
#[derive(Clone, Copy, Debug)]
pub struct Window {
    /// Opening, minutes since midnight.
    pub after: u32,
    /// Closing, minutes since midnight.
    pub before: u32,
    /// The zone the times are local to.
    pub zone: Tz,
}

impl Window {
    /// Whether the instant `now_ms` (milliseconds since the Unix epoch)
    /// falls inside the window, and the reason in words, naming the local
    /// clock and the window's edges.
    pub fn check(&self, now_ms: u64) -> (bool, String) {
        let edges = format!("the window opens at {} and closes at {}", hh_mm(self.after), hh_mm(self.before));
        let Some(local) = local(now_ms, self.zone) else {
            return (false, format!("the clock ({now_ms} ms) is outside the calendar; {edges}"));
        };
        let minute = local.hour() * 60 + local.minute();
        let inside = if self.after < self.before {
            self.after <= minute && minute < self.before
        } else {
            minute >= self.after || minute < self.before
        };
        (inside, format!("it is {}; {edges}", describe(&local)))
    }
}

/// The instant `now_ms` in `zone`.
pub fn local(now_ms: u64, zone: Tz) -> Option<DateTime<Tz>> {
    let utc = DateTime::from_timestamp_millis(i64::try_from(now_ms).ok()?)?;
    Some(utc.with_timezone(&zone))
}

/// `14:03 in Europe/Paris (2026-07-14, UTC+02:00)`: the local clock, the
/// date and the offset in force, so a reader can check daylight-saving time.
pub fn describe(local: &DateTime<Tz>) -> String {
    let offset = local.offset().fix().local_minus_utc();
    let (sign, offset) = if offset < 0 { ('-', -offset) } else { ('+', offset) };
    format!(
        "{:02}:{:02} in {} ({:04}-{:02}-{:02}, UTC{sign}{:02}:{:02})",
        local.hour(),
        local.minute(),
        local.timezone().name(),
        local.year(),
        local.month(),
        local.day(),
        offset / 3600,
        offset % 3600 / 60,
    )
}

fn hh_mm(minutes: u32) -> String {
    format!("{:02}:{:02}", minutes / 60, minutes % 60)
}

/// Minutes since midnight of a 24-hour `HH:MM` (two digits each).
pub fn minutes(text: &str) -> Option<u32> {
    let (hours, minutes) = text.split_once(':')?;
    let two_digits = |part: &str| -> Option<u32> {
        (part.len() == 2 && part.bytes().all(|b| b.is_ascii_digit())).then(|| part.parse().ok()).flatten()
    };
    let (hours, minutes) = (two_digits(hours)?, two_digits(minutes)?);
    (hours < 24 && minutes < 60).then_some(hours * 60 + minutes)
}

/// The IANA zone named `name`, or the hint naming close zones (by the
/// whole name, or by its city alone: `Paris` → `Europe/Paris`).
pub fn zone(name: &str) -> Result<Tz, Option<String>> {
    Tz::from_str(name).map_err(|_| {
        let wanted = name.trim().replace(' ', "_").to_lowercase();
        let cities: Vec<&str> = TZ_VARIANTS
            .iter()
            .map(|zone| zone.name())
            .filter(|zone| zone.rsplit('/').next().is_some_and(|city| city.to_lowercase() == wanted))
            .take(3)
            .collect();
        if cities.is_empty() {
            hint(name, TZ_VARIANTS.iter().map(|zone| zone.name()))
        } else {
            Some(format!("close match{}: {}", if cities.len() > 1 { "es" } else { "" }, cities.join(", ")))
        }
    })
}

/// What is wrong with a cron expression at a glance, with a hint: the
/// number of fields, characters no cron field uses, and plain numbers out
/// of their field's range.
pub fn cron_problem(cron: &str) -> Option<(String, Option<String>)> {
    let example = Some(
        "five fields, minute hour day-of-month month day-of-week, e.g. \"30 22 * * *\" for 22:30 every day".to_owned(),
    );
    if cron.trim_start().starts_with('@') {
        return Some((format!("'{cron}': shortcuts such as @daily are not accepted"), example));
    }
    let fields: Vec<&str> = cron.split_whitespace().collect();
    let names: &[(&str, u32, u32)] = match fields.len() {
        5 => &[("minute", 0, 59), ("hour", 0, 23), ("day-of-month", 1, 31), ("month", 1, 12), ("day-of-week", 0, 7)],
        6 => &[
            ("second", 0, 59),
            ("minute", 0, 59),
            ("hour", 0, 23),
            ("day-of-month", 1, 31),
            ("month", 1, 12),
            ("day-of-week", 0, 7),
        ],
        n => return Some((format!("'{cron}' has {n} fields; a cron has 5, or 6 with seconds first"), example)),
    };
    for (field, (name, low, high)) in fields.iter().zip(names) {
        if let Some(bad) = field.chars().find(|c| !(c.is_ascii_alphanumeric() || "*,-/?#".contains(*c))) {
            return Some((format!("the {name} field '{field}' contains '{bad}'"), example));
        }
        let numbers = field.split(',').flat_map(|part| part.split('/').next().unwrap_or_default().split('-'));
        for number in numbers.filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())) {
            if number.parse::<u32>().map_or(true, |n| n < *low || n > *high) {
                return Some((format!("the {name} field '{field}' has {number}, outside {low}–{high}"), example));
            }
        }
    }
    None
}

/// What is wrong with an MQTT topic filter: `+` must be a whole level,
/// `#` a whole level and the last one.
pub fn topic_problem(topic: &str) -> Option<String> {
    if topic.is_empty() {
        return Some("the topic filter is empty".into());
    }
    if topic.contains('\0') {
        return Some("the topic filter contains a NUL character".into());
    }
    let levels: Vec<&str> = topic.split('/').collect();
    for (i, level) in levels.iter().enumerate() {
        if level.contains('#') && (*level != "#" || i + 1 != levels.len()) {
            return Some(format!("in '{topic}', `#` must be a whole level and the last one"));
        }
        if level.contains('+') && *level != "+" {
            return Some(format!("in '{topic}', `+` must be a whole level, not '{level}'"));
        }
    }
    None
}
