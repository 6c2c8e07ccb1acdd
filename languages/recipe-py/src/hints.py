"""Close-match hints over the names the caller can see (Part II §10.3).

The guest SDK's `hints` module (guest-sdk/src/hints.rs) in Python: the
same rule on the same distance, the unrestricted Damerau–Levenshtein
distance of the `strsim` crate over Unicode scalar values (a Python `str`
indexes those), so a hint names the same candidates in the same order.
"""

MIN_SIMILARITY = 0.7
"""Minimum normalized similarity (0–1) for a name to count as a close match."""


def damerau_levenshtein(a, b):
    """Edits (insertions, deletions, substitutions, adjacent transpositions) from `a` to `b`."""
    columns = len(b) + 2
    infinity = len(a) + len(b)
    table = [0] * ((len(a) + 2) * columns)
    table[0] = infinity
    for i in range(len(a) + 1):
        table[(i + 1) * columns] = infinity
        table[(i + 1) * columns + 1] = i
    for j in range(len(b) + 1):
        table[j + 1] = infinity
        table[columns + j + 1] = j
    last_row = {}
    for i in range(1, len(a) + 1):
        last_match_column = 0
        for j in range(1, len(b) + 1):
            k = last_row.get(b[j - 1], 0)
            l = last_match_column
            cost = 1
            if a[i - 1] == b[j - 1]:
                cost = 0
                last_match_column = j
            table[(i + 1) * columns + j + 1] = min(
                table[i * columns + j] + cost,
                table[(i + 1) * columns + j] + 1,
                table[i * columns + j + 1] + 1,
                table[k * columns + l] + (i - k - 1) + 1 + (j - l - 1),
            )
        last_row[a[i - 1]] = i
    return table[(len(a) + 1) * columns + len(b) + 1]


def _normalized(a, b):
    if not a and not b:
        return 1.0
    return 1.0 - damerau_levenshtein(a, b) / max(len(a), len(b))


def _similarity(a, b):
    return max(_normalized(a, b), _normalized(a.lower(), b.lower()))


def _is_close(a, b):
    a_folded, b_folded = a.lower(), b.lower()
    # Which is shorter is decided on UTF-8 length, as Rust's `str::len`.
    if len(a_folded.encode()) <= len(b_folded.encode()):
        shorter, longer = a_folded, b_folded
    else:
        shorter, longer = b_folded, a_folded
    return (
        _similarity(a, b) >= MIN_SIMILARITY
        or damerau_levenshtein(a_folded, b_folded) <= 1
        or (len(shorter) >= 3 and longer.startswith(shorter))
    )


def close_matches(name, candidates, limit):
    """Up to `limit` candidates close to `name`, best first; ties keep the candidates' order.

    A candidate is close when its similarity is at least MIN_SIMILARITY,
    when it is one edit away, or when one name (three characters or more)
    begins the other. `name` itself is never proposed.
    """
    scored = [
        (-_similarity(name, candidate), order, candidate)
        for order, candidate in enumerate(candidates)
        if candidate != name and _is_close(name, candidate)
    ]
    scored.sort(key=lambda found: (found[0], found[1]))
    return [candidate for _, _, candidate in scored[:limit]]


def hint(name, candidates):
    """`close match: X` (or `close matches: X, Y`), or None when nothing visible is close."""
    close = close_matches(name, candidates, 3)
    if not close:
        return None
    if len(close) == 1:
        return f"close match: {close[0]}"
    return "close matches: " + ", ".join(close)
