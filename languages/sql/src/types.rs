//! The closed set of types a cast (`::`, `CAST(… AS …)`) or a typed
//! literal (`DATE '…'`) may name: PostgreSQL's built-in scalar types and
//! one-dimensional or nested arrays of them (Part II §10.3).
//!
//! Rationale: a type name is a name PostgreSQL resolves in its catalog,
//! like a relation name. A relation's row type (`NULL::s.payroll`,
//! `'(,)'::payroll`) answers differently for a hidden relation than for a
//! nonexistent one and reveals its columns; a `reg*` type
//! (`'s.payroll'::regclass`, `regclass 's.payroll'`, `'{…}'::regclass[]`)
//! looks the string up in the system catalogs; a type of a tenant schema
//! (`'x'::app.mood`) says whether that schema exists. The catalog this
//! Language validates against holds relations, not types, so it cannot
//! prove any of these harmless: every type outside the built-in list is
//! refused (`type_not_allowed`), with a finding that depends only on the
//! text written. An unqualified built-in name resolves in `pg_catalog`,
//! the first schema of a Run's `search_path`.

use sqlparser::ast::{ArrayElemTypeDef, DataType, ObjectName};

/// The built-in types a statement may name, as written (the core guide
/// lists these; each also as an array, `integer[]`).
pub const BUILT_IN_TYPES: [&str; 37] = [
    "smallint",
    "integer",
    "int",
    "bigint",
    "int2",
    "int4",
    "int8",
    "numeric",
    "decimal",
    "real",
    "double precision",
    "float",
    "float4",
    "float8",
    "boolean",
    "bool",
    "text",
    "varchar",
    "character varying",
    "char",
    "character",
    "uuid",
    "bytea",
    "date",
    "time",
    "timetz",
    "timestamp",
    "timestamptz",
    "interval",
    "json",
    "jsonb",
    "bit",
    "varbit",
    "inet",
    "cidr",
    "macaddr",
    "money",
];

/// Built-in types sqlparser reads as a plain name rather than a type of
/// its own (lower-case, unqualified).
const PLAIN_NAMED: [&str; 4] = ["inet", "cidr", "macaddr", "money"];

/// The object-identifier types whose input looks a name up in the system
/// catalogs (PostgreSQL 15 §8.19).
pub const CATALOG_LOOKUP_TYPES: [&str; 11] = [
    "regclass",
    "regtype",
    "regproc",
    "regprocedure",
    "regoper",
    "regoperator",
    "regnamespace",
    "regrole",
    "regconfig",
    "regdictionary",
    "regcollation",
];

/// What the Language makes of a type a statement names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// A built-in type, or an array of one.
    Allowed,
    /// A `reg*` type, or an array of one: it looks names up.
    CatalogLookup,
    /// Anything else: a relation's row type, a tenant type, a type of
    /// another dialect.
    Unknown,
}

fn last_name(name: &ObjectName) -> Option<String> {
    let ident = name.0.last()?.as_ident()?;
    Some(if ident.quote_style.is_some() { ident.value.clone() } else { ident.value.to_lowercase() })
}

/// The verdict on `data_type`.
pub fn check(data_type: &DataType) -> Verdict {
    match data_type {
        DataType::Character(_)
        | DataType::Char(_)
        | DataType::CharacterVarying(_)
        | DataType::CharVarying(_)
        | DataType::Varchar(_)
        | DataType::Text
        | DataType::Uuid
        | DataType::Bytea
        | DataType::Numeric(_)
        | DataType::Decimal(_)
        | DataType::Dec(_)
        | DataType::Float(_)
        | DataType::Real
        | DataType::Float4
        | DataType::Float8
        | DataType::DoublePrecision
        | DataType::SmallInt(None)
        | DataType::Int2(None)
        | DataType::Int(None)
        | DataType::Int4(None)
        | DataType::Integer(None)
        | DataType::BigInt(None)
        | DataType::Int8(None)
        | DataType::Bool
        | DataType::Boolean
        | DataType::Date
        | DataType::Time(..)
        | DataType::Timestamp(..)
        | DataType::Interval { .. }
        | DataType::JSON
        | DataType::JSONB
        | DataType::Bit(_)
        | DataType::BitVarying(_)
        | DataType::VarBit(_) => Verdict::Allowed,
        DataType::Regclass => Verdict::CatalogLookup,
        DataType::Array(ArrayElemTypeDef::SquareBracket(element, _)) => check(element),
        DataType::Custom(name, modifiers) => {
            let last = last_name(name).unwrap_or_default();
            if CATALOG_LOOKUP_TYPES.contains(&last.as_str()) {
                Verdict::CatalogLookup
            } else if name.0.len() == 1 && modifiers.is_empty() && PLAIN_NAMED.contains(&last.as_str()) {
                Verdict::Allowed
            } else {
                Verdict::Unknown
            }
        }
        // A `reg*` element inside another array form is still a lookup.
        DataType::Array(
            ArrayElemTypeDef::AngleBracket(element)
            | ArrayElemTypeDef::Parenthesis(element)
            | ArrayElemTypeDef::ParenthesisNotNull(element)
            | ArrayElemTypeDef::Qualified(element, _),
        ) if check(element) == Verdict::CatalogLookup => Verdict::CatalogLookup,
        _ => Verdict::Unknown,
    }
}

/// Whether a column of `sql_type` (PostgreSQL's `format_type` text, as
/// catalog entries describe columns) holds values that name catalog
/// objects: a `reg*` type or an array of one.
pub fn names_catalog_objects(sql_type: &str) -> bool {
    let mut base = sql_type.trim();
    while let Some(element) = base.strip_suffix("[]") {
        base = element;
    }
    CATALOG_LOOKUP_TYPES.contains(&base)
}

#[cfg(test)]
mod tests {
    use sqlparser::ast::{Expr, SelectItem, SetExpr, Statement};
    use sqlparser::dialect::PostgreSqlDialect;
    use sqlparser::parser::Parser;

    use super::*;

    fn cast_type(text: &str) -> DataType {
        let statement = Parser::parse_sql(&PostgreSqlDialect {}, &format!("SELECT NULL::{text}")).unwrap().remove(0);
        let Statement::Query(query) = statement else { panic!("a query") };
        let SetExpr::Select(select) = *query.body else { panic!("a select") };
        let SelectItem::UnnamedExpr(Expr::Cast { data_type, .. }) = &select.projection[0] else { panic!("a cast") };
        data_type.clone()
    }

    #[test]
    fn every_listed_built_in_type_and_its_array_is_allowed() {
        for name in BUILT_IN_TYPES {
            assert_eq!(check(&cast_type(name)), Verdict::Allowed, "{name}");
            assert_eq!(check(&cast_type(&format!("{name}[]"))), Verdict::Allowed, "{name}[]");
        }
        assert_eq!(check(&cast_type("numeric(10, 2)")), Verdict::Allowed);
        assert_eq!(check(&cast_type("varchar(20)[][]")), Verdict::Allowed);
    }

    #[test]
    fn every_reg_type_and_its_arrays_look_names_up() {
        for name in CATALOG_LOOKUP_TYPES {
            for written in [name.to_owned(), format!("{name}[]"), format!("pg_catalog.{name}"), format!("{name}[][]")] {
                assert_eq!(check(&cast_type(&written)), Verdict::CatalogLookup, "{written}");
            }
            assert!(names_catalog_objects(name) && names_catalog_objects(&format!("{name}[]")));
        }
        assert!(!names_catalog_objects("integer") && !names_catalog_objects("oid"));
    }

    #[test]
    fn row_types_tenant_types_and_qualified_names_are_unknown() {
        for written in [
            "payroll",
            "s.payroll",
            "\"S\".\"pay.roll\"",
            "app.mood",
            "pg_catalog.int4",
            "pg_catalog.text",
            "oid",
            "tsvector",
            "xml",
            "s.payroll[]",
            "inet(4)",
            "int(11)",
        ] {
            assert_eq!(check(&cast_type(written)), Verdict::Unknown, "{written}");
        }
    }
}
