//! What the commands print: lines that end the process quietly when stdout
//! is closed (`| head`), JSON printed for people to read, and the admin
//! commands' answers as tables for a person at a terminal.

use serde_json::Value;

/// `println!` that ends the process quietly when stdout is closed (`| head`)
/// instead of panicking.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if let Err(error) = writeln!(std::io::stdout().lock(), $($arg)*) {
            if error.kind() == std::io::ErrorKind::BrokenPipe {
                std::process::exit(0);
            }
        }
    }};
}
pub(crate) use say;

/// Prints `value` as indented JSON.
///
/// # Errors
/// When `value` does not serialize.
pub(crate) fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    say!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// How an admin command prints the API's answer (`--output`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Output {
    /// Columns for a list, `name  value` lines for one object.
    Table,
    /// The API's JSON, indented.
    Json,
}

impl Output {
    /// The format asked for, else a table for a person at a terminal and
    /// JSON for a program reading the output.
    pub(crate) fn chosen(asked: Option<Output>) -> Output {
        asked.unwrap_or_else(|| {
            if std::io::IsTerminal::is_terminal(&std::io::stdout()) { Output::Table } else { Output::Json }
        })
    }
}

/// Prints an admin API answer in `output`.
///
/// # Errors
/// When `value` does not serialize.
pub(crate) fn print_value(value: &Value, output: Output) -> anyhow::Result<()> {
    match output {
        Output::Json => print_json(value),
        Output::Table => {
            for line in table_lines(value) {
                say!("{line}");
            }
            Ok(())
        }
    }
}

/// The widest a table cell gets; longer text is cut with `…` (the JSON
/// output has it whole).
const CELL: usize = 48;

/// `value` as lines: a list (an array of objects, or an object holding one
/// such array beside scalars, as every list route answers) as columns, any
/// other object as `name  value` lines with nested members dotted.
fn table_lines(value: &Value) -> Vec<String> {
    if let Some((rows, rest)) = list_of(value) {
        let mut lines = columns(rows);
        if !rest.as_object().is_some_and(serde_json::Map::is_empty) {
            lines.extend(pairs(&rest));
        }
        return lines;
    }
    match value {
        Value::Object(_) => pairs(value),
        other => vec![plain(None, other)],
    }
}

/// The rows of a list answer and the object's other members.
fn list_of(value: &Value) -> Option<(&[Value], Value)> {
    let is_rows = |v: &Value| v.as_array().is_some_and(|rows| rows.iter().all(Value::is_object));
    match value {
        Value::Array(rows) if is_rows(value) => Some((rows, Value::Object(serde_json::Map::new()))),
        // One thing (a tenant, an approval) has an id; its own arrays
        // (a tenant's issuers) are members, not a list.
        Value::Object(members) if !members.contains_key("id") => {
            let mut lists = members.iter().filter(|(_, member)| is_rows(member));
            let (name, rows) = lists.next()?;
            if lists.next().is_some() || members.values().any(|m| m.is_array() && !is_rows(m)) {
                return None;
            }
            let rest = members.iter().filter(|(other, _)| *other != name).map(|(k, v)| (k.clone(), v.clone()));
            Some((rows.as_array()?, Value::Object(rest.collect())))
        }
        _ => None,
    }
}

fn columns(rows: &[Value]) -> Vec<String> {
    if rows.is_empty() {
        return vec!["(none)".to_owned()];
    }
    let mut names: Vec<&str> = Vec::new();
    for row in rows {
        for name in row.as_object().into_iter().flat_map(|members| members.keys()) {
            if !names.contains(&name.as_str()) {
                names.push(name);
            }
        }
    }
    let cells: Vec<Vec<String>> =
        rows.iter().map(|row| names.iter().map(|name| cut(&plain(Some(name), &row[*name]))).collect()).collect();
    let widths: Vec<usize> = names
        .iter()
        .enumerate()
        .map(|(i, name)| cells.iter().map(|row| row[i].chars().count()).chain([name.len()]).max().unwrap_or(0))
        .collect();
    let line = |texts: Vec<String>| {
        let padded: Vec<String> = texts.iter().zip(&widths).map(|(text, width)| format!("{text:<width$}")).collect();
        padded.join("  ").trim_end().to_owned()
    };
    let mut lines = vec![line(names.iter().map(|name| name.to_uppercase()).collect())];
    lines.extend(cells.into_iter().map(line));
    lines
}

/// `name  value` lines of an object's scalar members, nested objects'
/// members dotted (`quotas.max_concurrent_runs`), an array of objects one
/// compact JSON line each.
fn pairs(value: &Value) -> Vec<String> {
    let mut flat: Vec<(String, String)> = Vec::new();
    flatten("", value, &mut flat);
    let width = flat.iter().map(|(name, _)| name.chars().count()).max().unwrap_or(0);
    flat.into_iter().map(|(name, text)| format!("{name:<width$}  {text}").trim_end().to_owned()).collect()
}

fn flatten(prefix: &str, value: &Value, into: &mut Vec<(String, String)>) {
    let Value::Object(members) = value else {
        into.push((prefix.to_owned(), plain(Some(prefix), value)));
        return;
    };
    for (name, member) in members {
        let path = if prefix.is_empty() { name.clone() } else { format!("{prefix}.{name}") };
        match member {
            Value::Object(inner) if !inner.is_empty() => flatten(&path, member, into),
            Value::Array(items) if items.iter().any(|item| item.is_object() || item.is_array()) => {
                for (i, item) in items.iter().enumerate() {
                    into.push((format!("{path}[{i}]"), item.to_string()));
                }
            }
            _ => into.push((path.clone(), plain(Some(&path), member))),
        }
    }
}

/// A value as a cell's text: strings bare, `null` empty, scalar arrays
/// comma-separated, a `…_at` time in epoch milliseconds as UTC.
fn plain(name: Option<&str>, value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(text) => text.clone(),
        Value::Number(number) if name.is_some_and(|name| name.ends_with("_at")) => number
            .as_i64()
            .filter(|ms| *ms > 100_000_000_000)
            .and_then(chrono::DateTime::from_timestamp_millis)
            .map_or_else(|| number.to_string(), |at| at.format("%Y-%m-%d %H:%M:%S UTC").to_string()),
        Value::Array(items) if items.iter().all(|item| !item.is_object() && !item.is_array()) => {
            items.iter().map(|item| plain(None, item)).collect::<Vec<_>>().join(", ")
        }
        other => other.to_string(),
    }
}

fn cut(text: &str) -> String {
    let one_line = text.replace('\n', " ");
    if one_line.chars().count() <= CELL {
        return one_line;
    }
    let mut kept: String = one_line.chars().take(CELL - 1).collect();
    kept.push('…');
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_list_answer_prints_as_columns_and_its_cursor_after() {
        let lines = table_lines(&json!({"tenants": [
            {"id": "acme", "disabled": false, "created_at": 1_796_000_000_000_i64, "quotas": {"a": 1}},
            {"id": "b", "disabled": true, "name": "Bee"}
        ], "next_after": "b"}));
        assert_eq!(lines[0], "ID    DISABLED  CREATED_AT               QUOTAS   NAME");
        assert_eq!(lines[1], "acme  false     2026-11-30 00:53:20 UTC  {\"a\":1}");
        assert_eq!(lines[2], "b     true                                        Bee");
        assert_eq!(lines[3], "next_after  b");
        assert_eq!(table_lines(&json!({"approvals": []})), vec!["(none)"]);
    }

    #[test]
    fn a_list_with_totals_prints_its_rows_then_the_rest() {
        let lines = table_lines(&json!({"from": "2026-12-01", "days": [{"day": "2026-12-07", "runs": 2}],
                                        "totals": {"runs": 2}}));
        assert_eq!(lines, vec!["DAY         RUNS", "2026-12-07  2", "from         2026-12-01", "totals.runs  2"]);
        // A thing with an id keeps its own empty list as a member.
        assert_eq!(table_lines(&json!({"id": "acme", "issuers": []})), vec!["id       acme", "issuers"]);
    }

    #[test]
    fn one_object_prints_as_dotted_pairs() {
        let lines = table_lines(&json!({"id": "acme", "quotas": {"max_concurrent_runs": 16},
                                        "egress": {"allow": ["10.0.0.0/8", "a.example"]},
                                        "issuers": [{"issuer": "https://id"}]}));
        assert_eq!(
            lines,
            vec![
                "id                          acme",
                "quotas.max_concurrent_runs  16",
                "egress.allow                10.0.0.0/8, a.example",
                "issuers[0]                  {\"issuer\":\"https://id\"}",
            ]
        );
    }

    #[test]
    fn a_long_cell_is_cut_and_a_small_time_stays_a_number() {
        assert_eq!(cut(&"x".repeat(60)).chars().count(), CELL);
        assert_eq!(plain(Some("expires_at"), &json!(5)), "5");
    }
}
