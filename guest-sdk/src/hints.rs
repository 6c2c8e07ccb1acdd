//! Close-match hints over the names the caller can see (Part II §10.3:
//! hints name only visible entries), on the `strsim` library.

/// Minimum normalized similarity (0–1, Damerau–Levenshtein) for a name to
/// count as a close match. Names one edit apart, and names of at least
/// three characters that begin the other, count too.
pub const MIN_SIMILARITY: f64 = 0.7;

/// Up to `limit` candidates closest to `name`, best first. A candidate is
/// close when its similarity is at least [`MIN_SIMILARITY`], when it is
/// one edit away, or when one name (three characters or more) begins the
/// other. Ties keep the candidates' order.
pub fn close_matches<'a, I>(name: &str, candidates: I, limit: usize) -> Vec<&'a str>
where
    I: IntoIterator<Item = &'a str>,
{
    let mut scored: Vec<(f64, usize, &str)> = candidates
        .into_iter()
        .enumerate()
        .filter(|(_, candidate)| *candidate != name)
        .filter(|(_, candidate)| is_close(name, candidate))
        .map(|(order, candidate)| (similarity(name, candidate), order, candidate))
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.into_iter().take(limit).map(|(_, _, candidate)| candidate).collect()
}

fn is_close(a: &str, b: &str) -> bool {
    let (a_folded, b_folded) = (a.to_lowercase(), b.to_lowercase());
    let (shorter, longer) =
        if a_folded.len() <= b_folded.len() { (&a_folded, &b_folded) } else { (&b_folded, &a_folded) };
    similarity(a, b) >= MIN_SIMILARITY
        || strsim::damerau_levenshtein(&a_folded, &b_folded) <= 1
        || (shorter.chars().count() >= 3 && longer.starts_with(shorter.as_str()))
}

fn similarity(a: &str, b: &str) -> f64 {
    let plain = strsim::normalized_damerau_levenshtein(a, b);
    let folded = strsim::normalized_damerau_levenshtein(&a.to_lowercase(), &b.to_lowercase());
    plain.max(folded)
}

/// The hint text for an unknown name: `close match: X` (or `close matches:
/// X, Y`), or `None` when nothing visible is close.
///
/// ```
/// use pilotage_guest_sdk::hints::hint;
/// let visible = ["cap_read_user_profile", "cap_send_email"];
/// assert_eq!(hint("cap_read_user_profil", visible).as_deref(), Some("close match: cap_read_user_profile"));
/// assert_eq!(hint("zzz", visible), None);
/// ```
pub fn hint<'a, I>(name: &str, candidates: I) -> Option<String>
where
    I: IntoIterator<Item = &'a str>,
{
    match close_matches(name, candidates, 3).as_slice() {
        [] => None,
        [one] => Some(format!("close match: {one}")),
        many => Some(format!("close matches: {}", many.join(", "))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_match_first_and_far_names_ignored() {
        let visible = ["orders_list", "order_lines", "customers"];
        assert_eq!(close_matches("order_line", visible, 3), vec!["order_lines", "orders_list"]);
        assert!(close_matches("payments", visible, 3).is_empty());
        assert_eq!(close_matches("equ", ["eq", "ne", "exists"], 3), vec!["eq"]);
        assert_eq!(close_matches("str", ["string", "number"], 3), vec!["string"]);
        assert!(close_matches("ab", ["cd", "xyz"], 3).is_empty());
    }

    #[test]
    fn case_differences_still_match() {
        assert_eq!(hint("Customers", ["customers"]).as_deref(), Some("close match: customers"));
    }

    #[test]
    fn only_the_given_candidates_can_be_named() {
        // The caller passes only visible names; nothing else can leak.
        assert_eq!(hint("secret_table", ["public_table"]), None);
    }
}
