//! Catalog entry ids of relations: `schema.relation`, each part written
//! bare when it is a plain lower-case name and double-quoted otherwise
//! (Part II §5.4 entry ids). This one crate is the rule for both sides:
//! the Language (`languages/sql`) decodes ids with it, and the host's
//! introspection (`pilotage-server`'s data sources) encodes them with it,
//! so the two cannot drift apart.
//!
//! The rule: a part is written bare when it matches `[a-z_][a-z0-9_]*`,
//! else as `"…"` with every `"` inside doubled, as PostgreSQL quotes an
//! identifier. A bare part holds no `.` and no `"`, so the dots between
//! parts are found without ambiguity, and a part that could be bare is
//! never quoted, so every (schema, relation) pair has exactly one id and
//! every id exactly one pair. Dots, quotes, upper case, spaces and
//! non-ASCII letters all land in quoted parts: `a."b.c"` (relation `b.c`
//! in schema `a`) and `"a.b".c` (relation `c` in schema `a.b`) are
//! different ids.
//!
//! Rationale: ids made by joining the names with a dot collide as soon as
//! a name holds a dot, and a visible entry could then run another
//! relation than the one its plan names.

/// Whether `name` is written bare in an entry id.
fn is_bare(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|first| first.is_ascii_lowercase() || first == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// One part of an entry id: `name` bare, or quoted with `"` doubled.
pub fn encode_part(name: &str) -> String {
    if is_bare(name) { name.to_owned() } else { format!("\"{}\"", name.replace('"', "\"\"")) }
}

/// The entry id of relation `relation` in schema `schema`.
pub fn relation_id(schema: &str, relation: &str) -> String {
    format!("{}.{}", encode_part(schema), encode_part(relation))
}

/// The parts of an entry id, or `None` when `id` is not written by the
/// rule (an unclosed quote, a quoted part that would be bare, a bare part
/// with other characters, an empty part).
pub fn parts(id: &str) -> Option<Vec<String>> {
    let mut parts = Vec::new();
    let mut rest = id;
    loop {
        let (part, after) = if let Some(quoted) = rest.strip_prefix('"') {
            let mut value = String::new();
            let mut chars = quoted.char_indices();
            let end = loop {
                match chars.next() {
                    Some((index, '"')) => {
                        if quoted[index + 1..].starts_with('"') {
                            value.push('"');
                            chars.next();
                        } else {
                            break index + 1;
                        }
                    }
                    Some((_, c)) => value.push(c),
                    None => return None,
                }
            };
            if is_bare(&value) || value.is_empty() {
                return None;
            }
            (value, &quoted[end..])
        } else {
            let end = rest.find('.').unwrap_or(rest.len());
            let bare = &rest[..end];
            if !is_bare(bare) {
                return None;
            }
            (bare.to_owned(), &rest[end..])
        };
        parts.push(part);
        match after.strip_prefix('.') {
            Some(next) => rest = next,
            None if after.is_empty() => return Some(parts),
            None => return None,
        }
    }
}

/// The schema and relation of a relation's entry id, or `None` when `id`
/// is not one (see [`parts`]).
pub fn split(id: &str) -> Option<(String, String)> {
    let mut parts = parts(id)?;
    if parts.len() != 2 {
        return None;
    }
    let relation = parts.pop()?;
    let schema = parts.pop()?;
    Some((schema, relation))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cases both sides are tested against (the host compiles this file too).
    const CASES: [(&str, &str, &str); 9] = [
        ("public", "orders", "public.orders"),
        ("a", "b.c", "a.\"b.c\""),
        ("a.b", "c", "\"a.b\".c"),
        ("s", "Orders", "s.\"Orders\""),
        ("s", "say \"hi\"", "s.\"say \"\"hi\"\"\""),
        ("s", "café", "s.\"café\""),
        ("s", "1st", "s.\"1st\""),
        ("s", "a\"\".b", "s.\"a\"\"\"\".b\""),
        ("_x9", "t_1", "_x9.t_1"),
    ];

    #[test]
    fn ids_round_trip_for_dots_quotes_case_and_unicode() {
        for (schema, relation, id) in CASES {
            assert_eq!(relation_id(schema, relation), id);
            assert_eq!(split(id), Some((schema.to_owned(), relation.to_owned())), "{id}");
        }
    }

    #[test]
    fn names_with_dots_never_share_an_id() {
        assert_ne!(relation_id("a", "b.c"), relation_id("a.b", "c"));
        assert_ne!(relation_id("a", "B"), relation_id("a", "b"));
    }

    #[test]
    fn ids_not_written_by_the_rule_are_refused() {
        for bad in ["a.b.c", "\"a\".b", "a.\"b", "A.b", "a..b", "a.", "\"\".b", "a.\"b\"x", "a b.c", "a"] {
            assert_eq!(split(bad), None, "{bad}");
        }
        assert_eq!(parts("a"), Some(vec!["a".to_owned()]));
    }
}
