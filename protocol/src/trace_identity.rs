//! Trace step identity (Part II §3.4, §5.8.2): iteration qualification
//! (`#n`), sub-program expansion (`/`), and base-identifier recovery.

/// The characters reserved for trace identity; program step identifiers
/// must not contain them (Part II §3.4).
pub const RESERVED_CHARACTERS: [char; 2] = ['#', '/'];

/// Whether `id` may be a program step identifier: non-empty and free of
/// `#` and `/` (Part II §3.4).
pub fn is_valid_step_id(id: &str) -> bool {
    !id.is_empty() && !id.contains(RESERVED_CHARACTERS)
}

/// The trace id of a step inside loops: `base` followed by `#n` for each
/// enclosing loop from outermost to innermost, `n` 1-based
/// (Part II §5.8.2). `qualify("fetch", &[2, 4]) == "fetch#2#4"`.
pub fn qualify(base: &str, iterations: &[u32]) -> String {
    let mut id = String::with_capacity(base.len() + iterations.len() * 3);
    id.push_str(base);
    for n in iterations {
        id.push('#');
        id.push_str(&n.to_string());
    }
    id
}

/// The trace id of an entry inside an expanded sub-program: the calling
/// entry's complete id, `/`, the inner id (Part II §5.8.2).
pub fn expand(caller_trace_id: &str, inner_id: &str) -> String {
    format!("{caller_trace_id}/{inner_id}")
}

/// Whether the id belongs to an expanded sub-program (it contains `/`);
/// such entries take no part in plan–trace correspondence (§5.8.4).
pub fn is_prefixed(trace_id: &str) -> bool {
    trace_id.contains('/')
}

/// Recovers the base program step id: the segment after the last `/`, with
/// every `#` suffix removed (Part II §5.8.2).
pub fn base_id(trace_id: &str) -> &str {
    let last = trace_id.rsplit('/').next().unwrap_or(trace_id);
    last.split('#').next().unwrap_or(last)
}

/// The iteration numbers of the last segment (`step#2#4` → `[2, 4]`).
/// `None` when a suffix is not a positive integer.
pub fn iterations(trace_id: &str) -> Option<Vec<u32>> {
    let last = trace_id.rsplit('/').next().unwrap_or(trace_id);
    last.split('#').skip(1).map(|n| n.parse::<u32>().ok().filter(|n| *n >= 1)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualification_and_recovery_round_trip() {
        assert_eq!(qualify("fetch-user", &[1]), "fetch-user#1");
        assert_eq!(qualify("outer-step", &[2, 3]), "outer-step#2#3");
        assert_eq!(qualify("plain", &[]), "plain");
        assert_eq!(base_id("outer-step#2#3"), "outer-step");
        assert_eq!(iterations("outer-step#2#3"), Some(vec![2, 3]));
    }

    #[test]
    fn expansion_prefixes_with_the_full_caller_id() {
        let id = expand(&qualify("call1", &[2]), &qualify("body", &[3]));
        assert_eq!(id, "call1#2/body#3");
        assert!(is_prefixed(&id));
        assert_eq!(base_id(&id), "body");
        assert_eq!(iterations(&id), Some(vec![3]));
        assert_eq!(base_id("a/b#1/c#2#5"), "c");
    }

    #[test]
    fn reserved_characters_are_refused_in_step_ids() {
        assert!(is_valid_step_id("profile"));
        assert!(is_valid_step_id("stmt-2.ref-1"));
        assert!(!is_valid_step_id("a#1"));
        assert!(!is_valid_step_id("a/b"));
        assert!(!is_valid_step_id(""));
    }

    #[test]
    fn malformed_iteration_suffixes_are_detected() {
        assert_eq!(iterations("a#0"), None);
        assert_eq!(iterations("a#x"), None);
        assert_eq!(iterations("a"), Some(vec![]));
    }
}
