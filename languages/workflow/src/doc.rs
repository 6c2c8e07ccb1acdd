//! The program document as the parser reads it: a JSON tree that borrows
//! its strings from the program text and keeps object members in document
//! order in a plain vector.
//!
//! Validation decodes every program once per call, inside a fresh
//! component instance; a `serde_json::Value` tree (an ordered hash map per
//! object, an owned string per key and value) made that decoding most of a
//! validation's cost. The parsed program borrows its names and literals from
//! this tree; a literal becomes a `serde_json::Value` only when a run
//! evaluates it ([`Doc::to_value`]).

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Number, Value};

/// One JSON value of the program document.
#[derive(Clone, Debug, PartialEq)]
pub enum Doc<'a> {
    /// `null`
    Null,
    /// `true` / `false`
    Bool(bool),
    /// A number, as serde_json reads it.
    Number(Number),
    /// A string, borrowed from the text when it has no escapes.
    String(Cow<'a, str>),
    /// An array.
    Array(Vec<Doc<'a>>),
    /// An object's members in document order. A repeated name keeps every
    /// occurrence; [`Doc::get`] answers the last, as JSON parsers commonly do.
    Object(Vec<(Cow<'a, str>, Doc<'a>)>),
}

impl<'a> Doc<'a> {
    /// Decodes `text`: the value, or serde_json's error (with line and
    /// column). serde_json's nesting limit applies.
    pub fn parse(text: &'a str) -> Result<Doc<'a>, serde_json::Error> {
        let mut deserializer = serde_json::Deserializer::from_str(text);
        let doc = Doc::deserialize(&mut deserializer)?;
        deserializer.end()?;
        Ok(doc)
    }

    /// The members of an object.
    pub fn as_object(&self) -> Option<&[(Cow<'a, str>, Doc<'a>)]> {
        match self {
            Doc::Object(members) => Some(members),
            _ => None,
        }
    }

    /// The items of an array.
    pub fn as_array(&self) -> Option<&[Doc<'a>]> {
        match self {
            Doc::Array(items) => Some(items),
            _ => None,
        }
    }

    /// The text of a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Doc::String(text) => Some(text),
            _ => None,
        }
    }

    /// Whether this is a string.
    pub fn is_string(&self) -> bool {
        matches!(self, Doc::String(_))
    }

    /// The member `name` of an object (the last, when repeated).
    pub fn get(&self, name: &str) -> Option<&Doc<'a>> {
        get(self.as_object()?, name)
    }

    /// The same value as a `serde_json::Value`.
    pub fn to_value(&self) -> Value {
        match self {
            Doc::Null => Value::Null,
            Doc::Bool(b) => Value::Bool(*b),
            Doc::Number(n) => Value::Number(n.clone()),
            Doc::String(text) => Value::String(text.as_ref().to_owned()),
            Doc::Array(items) => Value::Array(items.iter().map(Doc::to_value).collect()),
            Doc::Object(members) => Value::Object(
                members.iter().map(|(name, member)| (name.as_ref().to_owned(), member.to_value())).collect(),
            ),
        }
    }
}

/// A document holding `value` (owned strings), for callers that start from
/// a `serde_json::Value`.
pub fn from_value(value: &Value) -> Doc<'static> {
    match value {
        Value::Null => Doc::Null,
        Value::Bool(b) => Doc::Bool(*b),
        Value::Number(n) => Doc::Number(n.clone()),
        Value::String(text) => Doc::String(Cow::Owned(text.clone())),
        Value::Array(items) => Doc::Array(items.iter().map(from_value).collect()),
        Value::Object(members) => {
            Doc::Object(members.iter().map(|(name, member)| (Cow::Owned(name.clone()), from_value(member))).collect())
        }
    }
}

/// The member `name` of an object's members (the last, when repeated).
pub fn get<'d, 'a>(members: &'d [(Cow<'a, str>, Doc<'a>)], name: &str) -> Option<&'d Doc<'a>> {
    members.iter().rev().find(|(key, _)| key == name).map(|(_, value)| value)
}

/// Shown as compact JSON, for diagnostic messages.
impl fmt::Display for Doc<'_> {
    fn fmt(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        write!(formatter, "{}", self.to_value())
    }
}

impl<'de> Deserialize<'de> for Doc<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(DocVisitor)
    }
}

struct DocVisitor;

impl<'de> Visitor<'de> for DocVisitor {
    type Value = Doc<'de>;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a JSON value")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Doc<'de>, E> {
        Ok(Doc::Null)
    }
    fn visit_bool<E: de::Error>(self, value: bool) -> Result<Doc<'de>, E> {
        Ok(Doc::Bool(value))
    }
    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Doc<'de>, E> {
        Ok(Doc::Number(value.into()))
    }
    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Doc<'de>, E> {
        Ok(Doc::Number(value.into()))
    }
    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Doc<'de>, E> {
        Number::from_f64(value).map(Doc::Number).ok_or_else(|| E::custom("a number JSON cannot hold"))
    }
    fn visit_borrowed_str<E: de::Error>(self, value: &'de str) -> Result<Doc<'de>, E> {
        Ok(Doc::String(Cow::Borrowed(value)))
    }
    fn visit_str<E: de::Error>(self, value: &str) -> Result<Doc<'de>, E> {
        Ok(Doc::String(Cow::Owned(value.to_owned())))
    }
    fn visit_string<E: de::Error>(self, value: String) -> Result<Doc<'de>, E> {
        Ok(Doc::String(Cow::Owned(value)))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Doc<'de>, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Doc::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Doc<'de>, A::Error> {
        let mut members = Vec::with_capacity(map.size_hint().unwrap_or(0));
        while let Some(name) = map.next_key_seed(KeySeed)? {
            members.push((name, map.next_value()?));
        }
        Ok(Doc::Object(members))
    }
}

/// A member name, borrowed when the text allows (serde's own `Cow<str>`
/// always copies).
pub(crate) struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Cow<'de, str>, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Cow<'de, str>;
            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("a member name")
            }
            fn visit_borrowed_str<E: de::Error>(self, value: &'de str) -> Result<Cow<'de, str>, E> {
                Ok(Cow::Borrowed(value))
            }
            fn visit_str<E: de::Error>(self, value: &str) -> Result<Cow<'de, str>, E> {
                Ok(Cow::Owned(value.to_owned()))
            }
            fn visit_string<E: de::Error>(self, value: String) -> Result<Cow<'de, str>, E> {
                Ok(Cow::Owned(value))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decodes_every_shape_and_keeps_member_order() {
        let text = r#"{"b": [1, -2, 2.5, true, null], "a": {"x\ny": "esc\"aped", "plain": "text"}, "b": "last"}"#;
        let doc = Doc::parse(text).unwrap();
        let names: Vec<&str> = doc.as_object().unwrap().iter().map(|(name, _)| name.as_ref()).collect();
        assert_eq!(names, ["b", "a", "b"]);
        assert_eq!(doc.get("b").and_then(Doc::as_str), Some("last"));
        let a = doc.get("a").unwrap();
        assert!(matches!(a.get("plain"), Some(Doc::String(Cow::Borrowed("text")))));
        assert_eq!(a.get("x\ny").and_then(Doc::as_str), Some("esc\"aped"));
        assert_eq!(doc.as_object().unwrap()[0].1.to_value(), json!([1, -2, 2.5, true, null]));
        assert_eq!(a.to_value().to_string(), r#"{"x\ny":"esc\"aped","plain":"text"}"#);
        assert_eq!(from_value(&doc.to_value()).to_value(), doc.to_value());
    }

    #[test]
    fn rejects_what_is_not_one_json_value() {
        assert!(Doc::parse("{").is_err());
        assert!(Doc::parse("[1] 2").is_err());
        assert!(Doc::parse("not json").is_err());
        let deep = "[".repeat(200) + &"]".repeat(200);
        assert!(Doc::parse(&deep).is_err(), "serde_json's nesting limit holds");
    }
}
