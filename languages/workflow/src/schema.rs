//! The parts of a catalog entry's JSON Schemas that validation reads:
//! an object schema's property names, their declared `type`, `required`
//! and `additionalProperties: false`.
//!
//! Decoded straight from the schema text with serde, skipping every other
//! keyword without building a `serde_json::Value` tree: validation reads
//! each resolved entry's schemas once per call, and decoding whole trees
//! per path expression was most of a validation's cost.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::doc::KeySeed;

/// An object schema as validation sees it; names borrow from the schema
/// text (`'s`) unless they hold escapes. A schema that is not an object
/// schema (or not JSON) decodes to `None` at [`ObjectSchema::parse`] and
/// validation checks nothing against it.
#[derive(Debug, Default)]
pub struct ObjectSchema<'s> {
    /// Declared properties, in the schema's member order (close-match
    /// hints list them in that order). `None` when `properties` is absent
    /// or not an object.
    pub properties: Option<Vec<(Cow<'s, str>, Property)>>,
    /// Names in `required` (non-string items are ignored).
    pub required: Vec<Cow<'s, str>>,
    /// True only for `"additionalProperties": false`.
    pub closed: bool,
}

/// One declared property.
#[derive(Debug, Default)]
pub struct Property {
    /// Its `type` (a string or an array of strings); empty when the
    /// property declares no type or is not an object schema.
    pub types: Types,
}

/// The JSON types a `type` keyword can name, in the order messages list
/// them.
pub const JSON_TYPES: [&str; 7] = ["string", "number", "integer", "boolean", "object", "array", "null"];

/// Whether `value` is of the JSON type `name` (one of [`JSON_TYPES`]);
/// `None` for any other name.
pub fn is_of_type(name: &str, value: &serde_json::Value) -> Option<bool> {
    Some(match name {
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => value.as_i64().is_some() || value.as_u64().is_some(),
        "boolean" => value.is_boolean(),
        "object" => value.is_object(),
        "array" => value.is_array(),
        "null" => value.is_null(),
        _ => return None,
    })
}

/// A declared `type` as a set of [`JSON_TYPES`]. A name outside them makes
/// the set accept anything, as an unknown type cannot be checked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Types {
    /// Bit `i` set: `JSON_TYPES[i]` is named.
    named: u8,
    /// Some name is not a JSON type.
    other: bool,
}

impl Types {
    /// Adds one type name.
    pub fn insert(&mut self, name: &str) {
        match JSON_TYPES.iter().position(|known| *known == name) {
            Some(index) => self.named |= 1 << index,
            None => self.other = true,
        }
    }

    /// Whether no type is named.
    pub fn is_empty(&self) -> bool {
        self.named == 0 && !self.other
    }

    /// Whether `value` is of a named type (always, when the set is empty or
    /// names a type validation does not know).
    pub fn fits(&self, value: &serde_json::Value) -> bool {
        if self.is_empty() || self.other {
            return true;
        }
        self.names().any(|name| is_of_type(name, value) != Some(false))
    }

    /// The named JSON types, in [`JSON_TYPES`] order.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        JSON_TYPES.iter().enumerate().filter(|(index, _)| self.named & (1 << index) != 0).map(|(_, name)| *name)
    }
}

impl<'de> Deserialize<'de> for Property {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct PropertyVisitor;
        impl<'de> Visitor<'de> for PropertyVisitor {
            type Value = Property;
            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("a property schema")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Property, A::Error> {
                let mut property = Property::default();
                while let Some(key) = map.next_key_seed(KeySeed)? {
                    if key == "type" {
                        for name in map.next_value_seed(StringsSeed)? {
                            property.types.insert(&name);
                        }
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(property)
            }
            // A property schema that is not an object (e.g. `true`)
            // declares no type.
            other_shapes!(Property::default(), bool, str, seq);
        }
        deserializer.deserialize_any(PropertyVisitor)
    }
}

impl<'s> ObjectSchema<'s> {
    /// Decodes `text`; `None` when it is not JSON or not an object.
    pub fn parse(text: &'s str) -> Option<ObjectSchema<'s>> {
        serde_json::from_str(text).ok()
    }

    /// The declared property `name`.
    pub fn property(&self, name: &str) -> Option<&Property> {
        self.properties.as_ref()?.iter().find(|(key, _)| key == name).map(|(_, property)| property)
    }

    /// Every declared property name, in order.
    pub fn property_names(&self) -> impl Iterator<Item = &str> {
        self.properties.iter().flatten().map(|(name, _)| name.as_ref())
    }
}

impl<'de> Deserialize<'de> for ObjectSchema<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SchemaVisitor;
        impl<'de> Visitor<'de> for SchemaVisitor {
            type Value = ObjectSchema<'de>;
            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("an object schema")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut schema = ObjectSchema::default();
                // Every other keyword is skipped unread; a repeated keyword
                // counts as its last occurrence.
                while let Some(key) = map.next_key_seed(KeySeed)? {
                    match key.as_ref() {
                        "properties" => schema.properties = map.next_value_seed(PropertiesSeed)?,
                        "required" => schema.required = map.next_value_seed(StringsSeed)?,
                        "additionalProperties" => schema.closed = map.next_value_seed(IsFalse)?,
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(schema)
            }
        }
        deserializer.deserialize_map(SchemaVisitor)
    }
}

/// The visitor methods for the JSON shapes a schema member may have but
/// validation cannot use: each consumes the value and answers `$fallback`.
/// Numbers and null always; `bool`, `str`, `seq`, `map` when named.
macro_rules! other_shapes {
    ($fallback:expr $(, $shape:ident)*) => {
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok($fallback)
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok($fallback)
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok($fallback)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok($fallback)
        }
        $(other_shapes!(@ $shape, $fallback);)*
    };
    (@ bool, $fallback:expr) => {
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok($fallback)
        }
    };
    (@ str, $fallback:expr) => {
        fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Ok($fallback)
        }
    };
    (@ seq, $fallback:expr) => {
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok($fallback)
        }
    };
    (@ map, $fallback:expr) => {
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok($fallback)
        }
    };
}
use other_shapes;

/// Makes a visitor also a seed that reads any JSON value with itself.
macro_rules! seed_of_visitor {
    ($visitor:ident) => {
        impl<'de> DeserializeSeed<'de> for $visitor {
            type Value = <$visitor as Visitor<'de>>::Value;
            fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
                deserializer.deserialize_any(self)
            }
        }
    };
}

/// `properties`: an object of property schemas, in order; any other JSON
/// value gives `None`.
struct PropertiesSeed;

seed_of_visitor!(PropertiesSeed);

impl<'de> Visitor<'de> for PropertiesSeed {
    type Value = Option<Vec<(Cow<'de, str>, Property)>>;
    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("an object of property schemas")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::with_capacity(map.size_hint().unwrap_or(8));
        while let Some(name) = map.next_key_seed(KeySeed)? {
            out.push((name, map.next_value::<Property>()?));
        }
        Ok(Some(out))
    }
    other_shapes!(None, bool, str, seq);
}

/// A string, or an array whose string items are kept; anything else gives
/// no names.
struct StringsSeed;

seed_of_visitor!(StringsSeed);

impl<'de> Visitor<'de> for StringsSeed {
    type Value = Vec<Cow<'de, str>>;
    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a string or an array of strings")
    }
    fn visit_borrowed_str<E: de::Error>(self, text: &'de str) -> Result<Self::Value, E> {
        StringItem.visit_borrowed_str(text).map(Vec::from_iter)
    }
    fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
        StringItem.visit_str(text).map(Vec::from_iter)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some(item) = seq.next_element_seed(StringItem)? {
            out.extend(item);
        }
        Ok(out)
    }
    other_shapes!(Vec::new(), bool, map);
}

/// One item of a `StringsSeed` array: the string, or `None` for any other
/// value (consumed, so one odd item does not void the list).
struct StringItem;

seed_of_visitor!(StringItem);

impl<'de> Visitor<'de> for StringItem {
    type Value = Option<Cow<'de, str>>;
    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a string")
    }
    fn visit_borrowed_str<E: de::Error>(self, text: &'de str) -> Result<Self::Value, E> {
        Ok(Some(Cow::Borrowed(text)))
    }
    fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
        Ok(Some(Cow::Owned(text.to_owned())))
    }
    other_shapes!(None, bool, seq, map);
}

/// `additionalProperties`: true only for the literal `false`.
struct IsFalse;

seed_of_visitor!(IsFalse);

impl<'de> Visitor<'de> for IsFalse {
    type Value = bool;
    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("false")
    }
    fn visit_bool<E: de::Error>(self, value: bool) -> Result<bool, E> {
        Ok(!value)
    }
    other_shapes!(false, str, seq, map);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_properties_in_order_with_their_types() {
        let schema = ObjectSchema::parse(
            r#"{"type":"object","properties":{"b":{"type":"string","minLength":1},"a":{"type":["integer","null"]},"c":{}},
                "required":["b",3],"additionalProperties":false,"$comment":{"x":[1,2]}}"#,
        )
        .unwrap();
        assert_eq!(schema.property_names().collect::<Vec<_>>(), ["b", "a", "c"]);
        let a = schema.property("a").unwrap().types;
        assert_eq!(a.names().collect::<Vec<_>>(), ["integer", "null"]);
        assert!(a.fits(&serde_json::json!(3)) && a.fits(&serde_json::Value::Null) && !a.fits(&serde_json::json!("3")));
        assert_eq!(schema.property("b").unwrap().types.names().collect::<Vec<_>>(), ["string"]);
        assert!(schema.property("c").unwrap().types.is_empty());
        assert_eq!(schema.required, ["b"]);
        assert!(schema.closed);
    }

    #[test]
    fn an_unknown_type_name_accepts_anything() {
        let schema =
            ObjectSchema::parse(r#"{"properties":{"p":{"type":["string","decimal"]},"q":{"type":"bool"}}}"#).unwrap();
        for name in ["p", "q"] {
            let types = schema.property(name).unwrap().types;
            assert!(!types.is_empty() && types.fits(&serde_json::json!(1)) && types.fits(&serde_json::json!({})));
        }
    }

    #[test]
    fn odd_shapes_check_nothing_instead_of_failing() {
        let schema = ObjectSchema::parse(r#"{"properties":[1],"required":"x","additionalProperties":{}}"#).unwrap();
        assert!(schema.properties.is_none());
        assert_eq!(schema.required, ["x"]);
        assert!(!schema.closed);
        let schema = ObjectSchema::parse(r#"{"properties":{"p":true,"q":{"type":7}}}"#).unwrap();
        assert!(schema.property("p").unwrap().types.is_empty());
        assert!(schema.property("q").unwrap().types.is_empty());
        assert!(ObjectSchema::parse("true").is_none());
        assert!(ObjectSchema::parse("not json").is_none());
    }
}
