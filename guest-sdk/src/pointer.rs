//! JSON Pointer building (RFC 6901) for `json-pointer` locators, on the
//! `jsonptr` library: [`pointer()`] and [`push_token`] for one pointer,
//! [`At`] for walking a program, [`Path`] for an owned pointer.

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

/// Where a walk over a JSON program stands: a JSON Pointer (RFC 6901) kept
/// as a chain of unescaped tokens borrowed from the program, so walking
/// allocates nothing and the escaped text is built only for a finding
/// (Part II §5.5, `json-pointer` locators). A validator passes `&At` down
/// as it recurses and hands it to [`Findings`](crate::findings::Findings) when
/// something is wrong there. A child borrows its parent, so bind each level
/// that outlives a statement (`let steps = root.at("steps");`), or pass
/// `&at.at("id")` straight to a call.
///
/// ```
/// use pilotage_guest_sdk::pointer::At;
/// let root = At::root();
/// let steps = root.at("steps"); // each level borrows the one above: bind it
/// let step = steps.index(0);
/// assert_eq!(step.at("with").at("a/b").pointer(), "/steps/0/with/a~1b");
/// assert_eq!(root.pointer(), "");
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct At<'a> {
    /// The value holding this one, and this one's member name or index;
    /// `None` for the whole document.
    link: Option<(&'a At<'a>, Token<'a>)>,
}

/// One step of an [`At`]: a member name (escaped when written) or an
/// array index.
#[derive(Clone, Copy, Debug)]
enum Token<'a> {
    Member(&'a str),
    Index(usize),
    /// Pointer text, already escaped ([`At::under`]).
    Escaped(&'a str),
}

impl<'a> At<'a> {
    /// The whole document (pointer `""`).
    pub fn root() -> At<'static> {
        At { link: None }
    }

    /// The value at `pointer`, RFC 6901 text already escaped (`""` is the
    /// root), for a Language that keeps its locators as text.
    pub fn under(pointer: &'a str) -> At<'a> {
        const ROOT: At<'static> = At { link: None };
        At { link: Some((&ROOT, Token::Escaped(pointer))) }
    }

    /// The member `name` of the object here. Borrows `self` and `name`, so
    /// the child lives within the parent's walk.
    pub fn at<'b>(&'b self, name: &'b str) -> At<'b> {
        At { link: Some((self, Token::Member(name))) }
    }

    /// The item `index` of the array here.
    pub fn index(&self, index: usize) -> At<'_> {
        At { link: Some((self, Token::Index(index))) }
    }

    /// The RFC 6901 pointer text: each member name escaped (`~` → `~0`,
    /// `/` → `~1`), indexes in decimal, `""` for the root.
    pub fn pointer(&self) -> String {
        let mut text = String::with_capacity(32);
        self.write(&mut text);
        text
    }

    fn write(&self, text: &mut String) {
        if let Some((parent, token)) = self.link {
            parent.write(text);
            match token {
                Token::Member(name) => push_token(text, name),
                Token::Index(index) => {
                    text.push('/');
                    text.push_str(&index.to_string());
                }
                Token::Escaped(pointer) => text.push_str(pointer),
            }
        }
    }
}

impl From<&At<'_>> for String {
    fn from(at: &At<'_>) -> String {
        at.pointer()
    }
}

impl std::fmt::Display for At<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.pointer())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_escapes_member_names_and_writes_indexes() {
        let root = At::root();
        let name = String::from("x~y");
        let steps = root.at("steps");
        let twelfth = steps.index(12);
        let with = twelfth.at("with");
        assert_eq!(with.at("a/b").pointer(), "/steps/12/with/a~1b");
        assert_eq!(with.at(&name).to_string(), "/steps/12/with/x~0y");
        assert_eq!(String::from(&root.at("")), "/", "an empty member name is a token too");
    }

    #[test]
    fn at_under_pointer_text_keeps_it_as_written() {
        let with = String::from("/actions/0/with");
        assert_eq!(At::under(&with).at("a/b").pointer(), "/actions/0/with/a~1b");
        assert_eq!(At::under("").pointer(), "", "the empty pointer is the root");
        assert_eq!(At::under("/x~1y").pointer(), "/x~1y", "no second escaping");
    }

    #[test]
    fn at_the_root_is_the_whole_document() {
        // Part II §5.5: a whole-document finding has the empty pointer.
        assert_eq!(At::root().pointer(), "");
        assert_ne!(At::root().at("steps").pointer(), "");
    }

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
