//! PostgreSQL values in their binary wire format, to and from JSON: result
//! columns decoded by type, and `$n` parameters encoded for the type
//! PostgreSQL inferred for them. Written against the documented binary
//! formats (the `*send`/`*recv` functions), so the platform needs no extra
//! sqlx type features.
//!
//! Decoding never fails: a type without a JSON rendering becomes the string
//! `\x<hex of its binary form>` (the Language's closed-sets guide says so).

use serde_json::{Number, Value};

/// Type OIDs this module knows (`pg_type.oid`).
pub(crate) mod oid {
    /// boolean
    pub(crate) const BOOL: u32 = 16;
    /// bytea
    pub(crate) const BYTEA: u32 = 17;
    /// "char"
    pub(crate) const CHAR: u32 = 18;
    /// name
    pub(crate) const NAME: u32 = 19;
    /// bigint
    pub(crate) const INT8: u32 = 20;
    /// smallint
    pub(crate) const INT2: u32 = 21;
    /// integer
    pub(crate) const INT4: u32 = 23;
    /// text
    pub(crate) const TEXT: u32 = 25;
    /// oid
    pub(crate) const OID: u32 = 26;
    /// json
    pub(crate) const JSON: u32 = 114;
    /// real
    pub(crate) const FLOAT4: u32 = 700;
    /// double precision
    pub(crate) const FLOAT8: u32 = 701;
    /// unknown (an untyped literal or parameter)
    pub(crate) const UNKNOWN: u32 = 705;
    /// character(n)
    pub(crate) const BPCHAR: u32 = 1042;
    /// character varying
    pub(crate) const VARCHAR: u32 = 1043;
    /// date
    pub(crate) const DATE: u32 = 1082;
    /// time without time zone
    pub(crate) const TIME: u32 = 1083;
    /// timestamp without time zone
    pub(crate) const TIMESTAMP: u32 = 1114;
    /// timestamp with time zone
    pub(crate) const TIMESTAMPTZ: u32 = 1184;
    /// interval
    pub(crate) const INTERVAL: u32 = 1186;
    /// numeric
    pub(crate) const NUMERIC: u32 = 1700;
    /// uuid
    pub(crate) const UUID: u32 = 2950;
    /// jsonb
    pub(crate) const JSONB: u32 = 3802;

    /// The element type of a one-dimensional array type this module
    /// decodes, e.g. `_int4` → `int4`.
    pub(crate) fn array_element(array: u32) -> Option<u32> {
        Some(match array {
            1000 => BOOL,
            1005 => INT2,
            1007 => INT4,
            1016 => INT8,
            1009 => TEXT,
            1015 => VARCHAR,
            1014 => BPCHAR,
            1021 => FLOAT4,
            1022 => FLOAT8,
            1231 => NUMERIC,
            1182 => DATE,
            1115 => TIMESTAMP,
            1185 => TIMESTAMPTZ,
            2951 => UUID,
            199 => JSON,
            3807 => JSONB,
            _ => return None,
        })
    }
}

/// Days from 1970-01-01 to 2000-01-01, PostgreSQL's epoch.
const PG_EPOCH_DAYS: i64 = 10_957;
const MICROS_PER_DAY: i64 = 86_400_000_000;

fn hex(bytes: &[u8]) -> String {
    let mut text = String::with_capacity(2 + bytes.len() * 2);
    text.push_str("\\x");
    for byte in bytes {
        text.push_str(&format!("{byte:02x}"));
    }
    text
}

fn be<const N: usize>(bytes: &[u8]) -> Option<[u8; N]> {
    bytes.get(..N)?.try_into().ok()
}

/// A JSON number from a float, or its text when not finite.
fn float(value: f64) -> Value {
    Number::from_f64(value).map_or_else(|| Value::String(value.to_string()), Value::Number)
}

/// Decodes one non-null value of type `type_oid` from its binary form.
/// Unknown types (and malformed bytes) come out as `\x…` hex text.
pub(crate) fn decode(type_oid: u32, bytes: &[u8]) -> Value {
    decode_known(type_oid, bytes).unwrap_or_else(|| Value::String(hex(bytes)))
}

fn decode_known(type_oid: u32, bytes: &[u8]) -> Option<Value> {
    Some(match type_oid {
        oid::BOOL => Value::Bool(*bytes.first()? != 0),
        oid::INT2 => Value::from(i16::from_be_bytes(be(bytes)?)),
        oid::INT4 => Value::from(i32::from_be_bytes(be(bytes)?)),
        oid::INT8 => Value::from(i64::from_be_bytes(be(bytes)?)),
        oid::OID => Value::from(u32::from_be_bytes(be(bytes)?)),
        oid::FLOAT4 => float(f64::from(f32::from_be_bytes(be(bytes)?))),
        oid::FLOAT8 => float(f64::from_be_bytes(be(bytes)?)),
        oid::NUMERIC => Value::String(numeric_text(bytes)?),
        oid::TEXT | oid::VARCHAR | oid::BPCHAR | oid::NAME | oid::CHAR | oid::UNKNOWN => {
            Value::String(String::from_utf8(bytes.to_vec()).ok()?)
        }
        oid::JSON => serde_json::from_slice(bytes).ok()?,
        oid::JSONB => serde_json::from_slice(bytes.strip_prefix(&[1])?).ok()?,
        oid::UUID => {
            let b: [u8; 16] = be(bytes)?;
            let h: Vec<String> = b.iter().map(|x| format!("{x:02x}")).collect();
            Value::String(format!(
                "{}-{}-{}-{}-{}",
                h[0..4].concat(),
                h[4..6].concat(),
                h[6..8].concat(),
                h[8..10].concat(),
                h[10..16].concat()
            ))
        }
        oid::DATE => {
            let days = i32::from_be_bytes(be(bytes)?);
            match days {
                i32::MAX => Value::String("infinity".into()),
                i32::MIN => Value::String("-infinity".into()),
                _ => Value::String(date_text(i64::from(days) + PG_EPOCH_DAYS)),
            }
        }
        oid::TIMESTAMP | oid::TIMESTAMPTZ => {
            let micros = i64::from_be_bytes(be(bytes)?);
            match micros {
                i64::MAX => Value::String("infinity".into()),
                i64::MIN => Value::String("-infinity".into()),
                _ => {
                    let mut text = timestamp_text(micros);
                    if type_oid == oid::TIMESTAMPTZ {
                        text.push('Z');
                    }
                    Value::String(text)
                }
            }
        }
        oid::TIME => Value::String(time_text(i64::from_be_bytes(be(bytes)?))),
        oid::INTERVAL => {
            let micros = i64::from_be_bytes(be(&bytes[0..])?);
            let days = i32::from_be_bytes(be(bytes.get(8..)?)?);
            let months = i32::from_be_bytes(be(bytes.get(12..)?)?);
            let seconds = micros as f64 / 1_000_000.0;
            Value::String(format!("P{months}M{days}DT{seconds}S"))
        }
        oid::BYTEA => Value::String(hex(bytes)),
        other => return array(oid::array_element(other)?, bytes),
    })
}

/// A one-dimensional array of a known element type.
fn array(element: u32, bytes: &[u8]) -> Option<Value> {
    let dimensions = i32::from_be_bytes(be(bytes)?);
    if dimensions == 0 {
        return Some(Value::Array(Vec::new()));
    }
    if dimensions != 1 {
        return None;
    }
    let length = i32::from_be_bytes(be(bytes.get(12..)?)?);
    let mut rest = bytes.get(20..)?;
    let mut items = Vec::with_capacity(length.max(0) as usize);
    for _ in 0..length {
        let size = i32::from_be_bytes(be(rest)?);
        rest = rest.get(4..)?;
        if size < 0 {
            items.push(Value::Null);
            continue;
        }
        let size = size as usize;
        items.push(decode(element, rest.get(..size)?));
        rest = rest.get(size..)?;
    }
    Some(Value::Array(items))
}

/// The decimal text of a binary `numeric`.
fn numeric_text(bytes: &[u8]) -> Option<String> {
    let count = u16::from_be_bytes(be(bytes)?) as usize;
    let weight = i16::from_be_bytes(be(bytes.get(2..)?)?) as i64;
    let sign = u16::from_be_bytes(be(bytes.get(4..)?)?);
    let scale = u16::from_be_bytes(be(bytes.get(6..)?)?) as usize;
    match sign {
        0xC000 => return Some("NaN".into()),
        0xD000 => return Some("Infinity".into()),
        0xF000 => return Some("-Infinity".into()),
        _ => {}
    }
    let mut digits = Vec::with_capacity(count);
    for index in 0..count {
        digits.push(i16::from_be_bytes(be(bytes.get(8 + 2 * index..)?)?) as i64);
    }
    // Integer part: groups 0..=weight; fraction: groups after.
    let mut integer = String::new();
    for group in 0..=weight.max(-1) {
        let value = digits.get(group as usize).copied().unwrap_or(0);
        if integer.is_empty() {
            if value != 0 || group == weight {
                integer.push_str(&value.to_string());
            }
        } else {
            integer.push_str(&format!("{value:04}"));
        }
    }
    if integer.is_empty() {
        integer.push('0');
    }
    let mut fraction = String::new();
    let mut group = weight + 1;
    while fraction.len() < scale {
        let value = if group < 0 { 0 } else { digits.get(group as usize).copied().unwrap_or(0) };
        fraction.push_str(&format!("{value:04}"));
        group += 1;
    }
    fraction.truncate(scale);
    let mut text = String::new();
    if sign == 0x4000 {
        text.push('-');
    }
    text.push_str(&integer);
    if scale > 0 {
        text.push('.');
        text.push_str(&fraction);
    }
    Some(text)
}

/// Civil date from days since 1970-01-01 (proleptic Gregorian).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Days since 1970-01-01 of a civil date.
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year.rem_euclid(400);
    let month = i64::from(month);
    let doy = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn date_text(unix_days: i64) -> String {
    let (year, month, day) = civil(unix_days);
    format!("{year:04}-{month:02}-{day:02}")
}

fn time_text(micros: i64) -> String {
    let seconds = micros.div_euclid(1_000_000);
    let fraction = micros.rem_euclid(1_000_000);
    let text = format!("{:02}:{:02}:{:02}", seconds / 3600, (seconds / 60) % 60, seconds % 60);
    if fraction == 0 { text } else { format!("{text}.{fraction:06}") }
}

fn timestamp_text(pg_micros: i64) -> String {
    let days = pg_micros.div_euclid(MICROS_PER_DAY);
    let rest = pg_micros.rem_euclid(MICROS_PER_DAY);
    format!("{}T{}", date_text(days + PG_EPOCH_DAYS), time_text(rest))
}

/// Why a JSON value cannot bind to a parameter.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct EncodeError(pub String);

/// Encodes `value` for a parameter of type `type_oid` (`type_name` for
/// messages): `None` for SQL NULL.
///
/// # Errors
/// [`EncodeError`] when the value does not fit the type, or the type is
/// one this data source cannot bind (the message says how to cast).
pub(crate) fn encode(type_oid: u32, type_name: &str, value: &Value) -> Result<Option<Vec<u8>>, EncodeError> {
    if value.is_null() {
        return Ok(None);
    }
    let wrong = || EncodeError(format!("{value} is not a valid {type_name}"));
    let text = || match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    let integer = || -> Result<i64, EncodeError> {
        match value {
            Value::Number(n) => n.as_i64().ok_or_else(wrong),
            Value::String(s) => s.trim().parse().map_err(|_| wrong()),
            _ => Err(wrong()),
        }
    };
    let real = || -> Result<f64, EncodeError> {
        match value {
            Value::Number(n) => n.as_f64().ok_or_else(wrong),
            Value::String(s) => s.trim().parse().map_err(|_| wrong()),
            _ => Err(wrong()),
        }
    };
    let bytes = match type_oid {
        oid::BOOL => match value {
            Value::Bool(b) => vec![u8::from(*b)],
            Value::String(s) if s == "true" || s == "false" => vec![u8::from(s == "true")],
            _ => return Err(wrong()),
        },
        oid::INT2 => i16::try_from(integer()?).map_err(|_| wrong())?.to_be_bytes().to_vec(),
        oid::INT4 => i32::try_from(integer()?).map_err(|_| wrong())?.to_be_bytes().to_vec(),
        oid::INT8 => integer()?.to_be_bytes().to_vec(),
        oid::OID => u32::try_from(integer()?).map_err(|_| wrong())?.to_be_bytes().to_vec(),
        oid::FLOAT4 => (real()? as f32).to_be_bytes().to_vec(),
        oid::FLOAT8 => real()?.to_be_bytes().to_vec(),
        oid::NUMERIC => numeric_bytes(&text()).ok_or_else(wrong)?,
        oid::TEXT | oid::VARCHAR | oid::BPCHAR | oid::NAME | oid::UNKNOWN | oid::CHAR => text().into_bytes(),
        oid::JSON => value.to_string().into_bytes(),
        oid::JSONB => {
            let mut bytes = vec![1];
            bytes.extend(value.to_string().into_bytes());
            bytes
        }
        oid::UUID => {
            let digits: String = text().chars().filter(|c| *c != '-').collect();
            if digits.len() != 32 {
                return Err(wrong());
            }
            (0..16)
                .map(|i| u8::from_str_radix(&digits[2 * i..2 * i + 2], 16))
                .collect::<Result<Vec<u8>, _>>()
                .map_err(|_| wrong())?
        }
        oid::DATE => {
            let (days, _) = parse_timestamp(&text(), false).ok_or_else(wrong)?;
            let days = i32::try_from(days.div_euclid(MICROS_PER_DAY)).map_err(|_| wrong())?;
            days.to_be_bytes().to_vec()
        }
        oid::TIMESTAMP | oid::TIMESTAMPTZ => {
            let (micros, offset) = parse_timestamp(&text(), type_oid == oid::TIMESTAMPTZ).ok_or_else(wrong)?;
            if offset && type_oid == oid::TIMESTAMP {
                return Err(EncodeError(format!(
                    "{value} carries a time zone; the parameter is a timestamp without one"
                )));
            }
            micros.to_be_bytes().to_vec()
        }
        _ => {
            return Err(EncodeError(format!(
                "parameters of type {type_name} cannot be bound; cast a text parameter instead ($1::text::{type_name})"
            )));
        }
    };
    Ok(Some(bytes))
}

/// Parses `YYYY-MM-DD[(T| )HH:MM[:SS[.ffffff]]][Z|±HH[:MM]]` into
/// microseconds since 2000-01-01 UTC, and whether an offset was given.
/// An offset is applied only when `with_zone`.
fn parse_timestamp(text: &str, with_zone: bool) -> Option<(i64, bool)> {
    let text = text.trim();
    let date = text.get(..10)?;
    let mut parts = date.split('-');
    let year: i64 = parts.next()?.parse().ok()?;
    let month: u32 = parts.next()?.parse().ok()?;
    let day: u32 = parts.next()?.parse().ok()?;
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    let days = days_from_civil(year, month, day);
    if civil(days) != (year, month, day) {
        return None;
    }
    let mut micros = (days - PG_EPOCH_DAYS) * MICROS_PER_DAY;
    let mut rest = &text[10..];
    let mut offset_given = false;
    if let Some(time) = rest.strip_prefix(['T', ' ']) {
        let end = time.find(['Z', '+', '-']).unwrap_or(time.len());
        let (clock, zone) = time.split_at(end);
        let mut fields = clock.split(':');
        let hours: i64 = fields.next()?.parse().ok()?;
        let minutes: i64 = fields.next()?.parse().ok()?;
        let seconds: f64 = fields.next().map_or(Some(0.0), |s| s.parse().ok())?;
        if hours > 23 || minutes > 59 || !(0.0..61.0).contains(&seconds) {
            return None;
        }
        micros += (hours * 3600 + minutes * 60) * 1_000_000 + (seconds * 1_000_000.0).round() as i64;
        rest = zone;
    }
    if !rest.is_empty() {
        offset_given = true;
        let offset_micros = if rest == "Z" {
            0
        } else {
            let sign = if rest.starts_with('-') { -1 } else { 1 };
            let zone = &rest[1..];
            let (hours, minutes) = match zone.split_once(':') {
                Some((h, m)) => (h.parse::<i64>().ok()?, m.parse::<i64>().ok()?),
                None if zone.len() == 4 => (zone[..2].parse().ok()?, zone[2..].parse().ok()?),
                None => (zone.parse().ok()?, 0),
            };
            sign * (hours * 3600 + minutes * 60) * 1_000_000
        };
        if with_zone {
            micros -= offset_micros;
        }
    }
    Some((micros, offset_given))
}

/// The binary `numeric` of a decimal text such as `-12.50`.
fn numeric_bytes(text: &str) -> Option<Vec<u8>> {
    let text = text.trim();
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    // Exponent forms (1e3) come from JSON numbers: expand through f64.
    if digits.contains(['e', 'E']) {
        let value: f64 = text.parse().ok()?;
        if !value.is_finite() {
            return None;
        }
        return numeric_bytes(&format!("{value}"));
    }
    let (integer, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    if integer.is_empty() && fraction.is_empty() || !integer.chars().chain(fraction.chars()).all(|c| c.is_ascii_digit())
    {
        return None;
    }
    let scale = fraction.len() as u16;
    let integer = integer.trim_start_matches('0');
    // Pad the integer part to a multiple of 4 on the left, the fraction on
    // the right, then cut into base-10000 groups.
    let pad_left = (4 - integer.len() % 4) % 4;
    let pad_right = (4 - fraction.len() % 4) % 4;
    let all = format!("{}{integer}{fraction}{}", "0".repeat(pad_left), "0".repeat(pad_right));
    let integer_groups = (integer.len() + pad_left) / 4;
    let mut groups: Vec<i16> =
        all.as_bytes().chunks(4).map(|c| std::str::from_utf8(c).ok()?.parse().ok()).collect::<Option<_>>()?;
    let mut weight = integer_groups as i16 - 1;
    while groups.first() == Some(&0) {
        groups.remove(0);
        weight -= 1;
    }
    while groups.last() == Some(&0) {
        groups.pop();
    }
    if groups.is_empty() {
        weight = 0;
    }
    let mut bytes = Vec::with_capacity(8 + groups.len() * 2);
    bytes.extend((groups.len() as u16).to_be_bytes());
    bytes.extend(weight.to_be_bytes());
    bytes.extend((if negative && !groups.is_empty() { 0x4000u16 } else { 0 }).to_be_bytes());
    bytes.extend(scale.to_be_bytes());
    for group in groups {
        bytes.extend(group.to_be_bytes());
    }
    Some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numerics_round_trip_through_the_binary_form() {
        for text in ["0", "1", "-1", "12.50", "123456789.0001", "0.0005", "-0.25", "10000", "99990000.1"] {
            let bytes = numeric_bytes(text).unwrap();
            assert_eq!(numeric_text(&bytes).unwrap(), text, "{text}");
        }
        assert!(numeric_bytes("12a").is_none());
        assert_eq!(numeric_text(&numeric_bytes("1e3").unwrap()).unwrap(), "1000");
    }

    #[test]
    fn dates_and_timestamps_round_trip() {
        let (micros, zoned) = parse_timestamp("2025-03-01T10:30:00Z", true).unwrap();
        assert!(zoned);
        assert_eq!(timestamp_text(micros), "2025-03-01T10:30:00");
        let (micros, _) = parse_timestamp("2025-03-01T12:30:00.5+02:00", true).unwrap();
        assert_eq!(timestamp_text(micros), "2025-03-01T10:30:00.500000");
        let (micros, _) = parse_timestamp("1999-12-31", false).unwrap();
        assert_eq!(micros, -MICROS_PER_DAY);
        assert!(parse_timestamp("2025-02-30", false).is_none());
        let date = encode(oid::DATE, "date", &json!("2000-01-02")).unwrap().unwrap();
        assert_eq!(decode(oid::DATE, &date), json!("2000-01-02"));
    }

    #[test]
    fn parameters_encode_by_inferred_type() {
        assert_eq!(encode(oid::INT4, "int4", &json!(7)).unwrap().unwrap(), 7i32.to_be_bytes());
        assert_eq!(encode(oid::INT4, "int4", &json!("7")).unwrap().unwrap(), 7i32.to_be_bytes());
        assert!(encode(oid::INT2, "int2", &json!(70000)).is_err());
        assert_eq!(encode(oid::TEXT, "text", &json!("hé")).unwrap().unwrap(), "hé".as_bytes());
        assert_eq!(encode(oid::BOOL, "bool", &json!(true)).unwrap().unwrap(), [1]);
        assert_eq!(encode(oid::INT8, "int8", &Value::Null).unwrap(), None);
        assert_eq!(encode(oid::JSONB, "jsonb", &json!({"a": 1})).unwrap().unwrap()[0], 1);
        let uuid = encode(oid::UUID, "uuid", &json!("123e4567-e89b-12d3-a456-426614174000")).unwrap().unwrap();
        assert_eq!(decode(oid::UUID, &uuid), json!("123e4567-e89b-12d3-a456-426614174000"));
        assert!(encode(oid::INTERVAL, "interval", &json!("1 day")).unwrap_err().0.contains("::text::interval"));
        assert!(encode(oid::TIMESTAMP, "timestamp", &json!("2025-01-01T00:00:00Z")).is_err());
    }

    #[test]
    fn decoding_falls_back_to_hex() {
        assert_eq!(decode(99_999, &[0xab, 0x01]), json!("\\xab01"));
        assert_eq!(decode(oid::INT4, &[1]), json!("\\x01"));
        assert_eq!(decode(oid::FLOAT8, &f64::NAN.to_be_bytes()), json!("NaN"));
    }
}
