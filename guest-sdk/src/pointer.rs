//! JSON Pointer building (RFC 6901) for `json-pointer` locators, on the
//! `jsonptr` library.

use jsonptr::PointerBuf;

/// The pointer to the member reached by `tokens`, escaped per RFC 6901
/// (`~` → `~0`, `/` → `~1`). No tokens give `""`, the whole document.
///
/// ```
/// use pilotage_guest_sdk::pointer::pointer;
/// assert_eq!(pointer(["steps", "0", "capability"]), "/steps/0/capability");
/// assert_eq!(pointer(["with", "a/b"]), "/with/a~1b");
/// assert_eq!(pointer::<[&str; 0], &str>([]), "");
/// ```
pub fn pointer<I, T>(tokens: I) -> String
where
    I: IntoIterator<Item = T>,
    T: AsRef<str>,
{
    PointerBuf::from_tokens(tokens.into_iter().map(|token| token.as_ref().to_owned())).to_string()
}

/// Appends one token to RFC 6901 pointer text: `/` and the token escaped
/// (`~` → `~0`, `/` → `~1`; no copy when nothing needs escaping).
///
/// ```
/// use pilotage_guest_sdk::pointer::push_token;
/// let mut pointer = String::from("/steps/0");
/// push_token(&mut pointer, "a/b");
/// assert_eq!(pointer, "/steps/0/a~1b");
/// ```
pub fn push_token(pointer: &mut String, token: &str) {
    pointer.push('/');
    pointer.push_str(jsonptr::Token::new(token).encoded());
}

/// A pointer under construction, for walking nested programs. Held as the
/// escaped pointer text, so extending it is one string copy (a parser makes
/// one per step and member it visits).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Path {
    pointer: PointerBuf,
}

impl Path {
    /// The whole document.
    pub fn root() -> Path {
        Path::default()
    }

    /// This path extended by one member name or index.
    pub fn at(&self, token: impl ToString) -> Path {
        let mut pointer = self.pointer.clone();
        pointer.push_back(token.to_string());
        Path { pointer }
    }

    /// The RFC 6901 text.
    pub fn pointer(&self) -> String {
        self.pointer.as_str().to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_reserved_characters() {
        assert_eq!(pointer(["a~b", "c/d"]), "/a~0b/c~1d");
    }

    #[test]
    fn paths_extend_without_changing_the_parent() {
        assert_eq!(Path::root().at("a~b").at("c/d").pointer(), "/a~0b/c~1d");
        let steps = Path::root().at("steps");
        assert_eq!(steps.at(2).at("with").pointer(), "/steps/2/with");
        assert_eq!(steps.pointer(), "/steps");
        assert_eq!(Path::root().pointer(), "");
    }
}
