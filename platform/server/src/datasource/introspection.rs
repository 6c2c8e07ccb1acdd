//! The catalog of a PostgreSQL data source: the tables and views its role
//! can read in the configured schemas, as Pilotage catalog entries for
//! sql/postgres-15 (Part II §5.4).
//!
//! Each entry: id `schema.relation` with each part bare or `"quoted"`
//! ([`sql_entry_id`]); kind `table` (also partitioned and
//! foreign tables) or `view` (also materialized views); `output_schema`
//! describing one row as the Language's output renders it (column names,
//! JSON types, nullability, the SQL type as `description`); for a relation
//! the role may INSERT into or UPDATE, an `input_schema` (the row shape to
//! write); risk from what the role's privileges can destroy (Part II
//! §5.3): none to change it → `safe` (readOnly), INSERT only → `write`
//! (adds rows, overwrites nothing), UPDATE, DELETE or TRUNCATE →
//! `destructive` (overwrites or removes values irreversibly). Everything in an entry is derived from the schema and
//! the privileges, never from the data, so inserting rows never changes a
//! `catalog_version`.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};
use sqlx::Row;

use super::DataSourceError;
use super::postgres::PostgresDataSource;
use pilotage_protocol::catalog::CatalogEntry;
use pilotage_protocol::risk::RiskHints;
use sql_entry_id::relation_id;

/// The Language that may reference these entries.
pub(crate) const LANGUAGE: &str = "sql/postgres-15";

/// One visible relation as PostgreSQL describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Relation {
    /// Schema name.
    pub schema: String,
    /// Relation name.
    pub name: String,
    /// `pg_class.relkind`: `r`, `p`, `f` (tables), `v`, `m` (views).
    pub relkind: String,
    /// `COMMENT ON` text.
    pub comment: Option<String>,
    /// The role may INSERT.
    pub insert: bool,
    /// The role may UPDATE.
    pub update: bool,
    /// The role may DELETE.
    pub delete: bool,
    /// The role may TRUNCATE.
    pub truncate: bool,
    /// Columns in order.
    pub columns: Vec<RelationColumn>,
}

/// One column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RelationColumn {
    /// Column name.
    pub name: String,
    /// `format_type` text, e.g. `numeric(10,2)`.
    pub sql_type: String,
    /// `pg_type.typname`, e.g. `numeric`, `_int4` for arrays.
    pub type_name: String,
    /// NOT NULL.
    pub not_null: bool,
    /// Has a default, is an identity or is generated (may be omitted when
    /// inserting).
    pub defaulted: bool,
    /// GENERATED ALWAYS AS (…) STORED: never written.
    pub generated: bool,
}

const RELATIONS: &str = "\
SELECT n.nspname AS schema, c.relname AS name, c.relkind::text AS relkind,
       obj_description(c.oid, 'pg_class') AS comment,
       has_table_privilege(c.oid, 'INSERT') AS can_insert,
       has_table_privilege(c.oid, 'UPDATE') AS can_update,
       has_table_privilege(c.oid, 'DELETE') AS can_delete,
       has_table_privilege(c.oid, 'TRUNCATE') AS can_truncate
FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p', 'f', 'v', 'm')
  AND n.nspname = ANY($1)
  AND has_schema_privilege(n.oid, 'USAGE')
  AND has_table_privilege(c.oid, 'SELECT')
ORDER BY 1, 2";

const COLUMNS: &str = "\
SELECT n.nspname AS schema, c.relname AS name, a.attname AS column_name,
       format_type(a.atttypid, a.atttypmod) AS sql_type, t.typname::text AS type_name,
       a.attnotnull AS not_null,
       (a.atthasdef OR a.attidentity <> '' OR a.attgenerated <> '') AS defaulted,
       (a.attgenerated <> '') AS generated
FROM pg_catalog.pg_attribute a
JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
WHERE a.attnum > 0 AND NOT a.attisdropped
  AND c.relkind IN ('r', 'p', 'f', 'v', 'm')
  AND n.nspname = ANY($1)
  AND has_schema_privilege(n.oid, 'USAGE')
  AND has_table_privilege(c.oid, 'SELECT')
ORDER BY n.nspname, c.relname, a.attnum";

impl PostgresDataSource {
    /// The catalog entries of every relation the role can read in the
    /// configured schemas (restricted to `relations` when configured), in
    /// id order. Two catalog queries, whatever the number of relations.
    ///
    /// # Errors
    /// [`DataSourceError::Unreachable`] when the database cannot be
    /// reached; [`DataSourceError::Database`] when a query fails.
    pub async fn introspect(&self) -> Result<Vec<CatalogEntry>, DataSourceError> {
        self.confine().await?;
        let schemas = self.config().schemas.clone();
        let relation_rows =
            sqlx::query(RELATIONS).bind(&schemas).fetch_all(self.pool()).await.map_err(|e| self.error(e))?;
        let column_rows =
            sqlx::query(COLUMNS).bind(&schemas).fetch_all(self.pool()).await.map_err(|e| self.error(e))?;
        let mut relations: BTreeMap<(String, String), Relation> = BTreeMap::new();
        let text = |row: &sqlx::postgres::PgRow, name: &str| -> Result<String, DataSourceError> {
            row.try_get::<String, _>(name).map_err(|e| DataSourceError::Database(e.to_string()))
        };
        let flag = |row: &sqlx::postgres::PgRow, name: &str| -> Result<bool, DataSourceError> {
            row.try_get::<bool, _>(name).map_err(|e| DataSourceError::Database(e.to_string()))
        };
        for row in &relation_rows {
            let relation = Relation {
                schema: text(row, "schema")?,
                name: text(row, "name")?,
                relkind: text(row, "relkind")?,
                comment: row.try_get::<Option<String>, _>("comment").ok().flatten(),
                insert: flag(row, "can_insert")?,
                update: flag(row, "can_update")?,
                delete: flag(row, "can_delete")?,
                truncate: flag(row, "can_truncate")?,
                columns: Vec::new(),
            };
            relations.insert((relation.schema.clone(), relation.name.clone()), relation);
        }
        for row in &column_rows {
            let key = (text(row, "schema")?, text(row, "name")?);
            if let Some(relation) = relations.get_mut(&key) {
                relation.columns.push(RelationColumn {
                    name: text(row, "column_name")?,
                    sql_type: text(row, "sql_type")?,
                    type_name: text(row, "type_name")?,
                    not_null: flag(row, "not_null")?,
                    defaulted: flag(row, "defaulted")?,
                    generated: flag(row, "generated")?,
                });
            }
        }
        let allowed = self.config().relations.clone();
        Ok(relations
            .into_values()
            .filter(|r| allowed.as_ref().is_none_or(|ids| ids.contains(&relation_id(&r.schema, &r.name))))
            .map(|relation| entry(&relation))
            .collect())
    }
}

/// The JSON Schema of one column's values, as sql/postgres-15 renders them.
pub(crate) fn column_schema(column: &RelationColumn) -> Value {
    let mut schema = element_schema(&column.type_name);
    if let Value::Object(object) = &mut schema {
        if !column.not_null
            && let Some(Value::String(kind)) = object.get("type").cloned()
        {
            object.insert("type".into(), json!([kind, "null"]));
        }
        object.insert("description".into(), Value::String(column.sql_type.clone()));
    }
    schema
}

fn element_schema(type_name: &str) -> Value {
    if let Some(element) = type_name.strip_prefix('_') {
        return json!({"type": "array", "items": element_schema(element)});
    }
    match type_name {
        "int2" | "int4" | "int8" | "oid" => json!({"type": "integer"}),
        "float4" | "float8" => json!({"type": "number"}),
        "bool" => json!({"type": "boolean"}),
        "json" | "jsonb" => json!({}),
        "numeric" => json!({"type": "string", "format": "decimal"}),
        "uuid" => json!({"type": "string", "format": "uuid"}),
        "date" => json!({"type": "string", "format": "date"}),
        "timestamp" | "timestamptz" => json!({"type": "string", "format": "date-time"}),
        "time" => json!({"type": "string", "format": "time"}),
        _ => json!({"type": "string"}),
    }
}

/// The catalog entry of a relation.
pub(crate) fn entry(relation: &Relation) -> CatalogEntry {
    let id = relation_id(&relation.schema, &relation.name);
    let is_view = matches!(relation.relkind.as_str(), "v" | "m");
    // UPDATE overwrites values as irreversibly as DELETE removes them.
    let (risk, risk_hints) = if relation.update || relation.delete || relation.truncate {
        ("destructive", RiskHints::DESTRUCTIVE)
    } else if relation.insert {
        ("write", RiskHints::WRITE)
    } else {
        ("safe", RiskHints::SAFE)
    };
    let properties: Map<String, Value> = relation.columns.iter().map(|c| (c.name.clone(), column_schema(c))).collect();
    let required: Vec<&str> = relation.columns.iter().map(|c| c.name.as_str()).collect();
    let output_schema = json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    });
    let input_schema = (relation.insert || relation.update).then(|| {
        let writable: Vec<&RelationColumn> = relation.columns.iter().filter(|c| !c.generated).collect();
        let properties: Map<String, Value> = writable.iter().map(|c| (c.name.clone(), column_schema(c))).collect();
        let required: Vec<&str> =
            writable.iter().filter(|c| c.not_null && !c.defaulted).map(|c| c.name.as_str()).collect();
        json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
    });
    let kind = if is_view { "view" } else { "table" };
    let description = relation.comment.clone().unwrap_or_else(|| {
        let granted = [("insert", relation.insert), ("update", relation.update), ("delete", relation.delete)];
        let mut access = vec!["read"];
        access.extend(granted.iter().filter(|(_, held)| *held).map(|(verb, _)| *verb));
        if relation.truncate {
            access.push("truncate");
        }
        format!("{kind} {id} ({} columns; this role may {})", relation.columns.len(), access.join(", "))
    });
    CatalogEntry {
        id,
        kind: kind.to_owned(),
        name: relation.name.clone(),
        description: Some(description),
        input_schema,
        output_schema: Some(output_schema),
        risk: risk.to_owned(),
        risk_hints,
        tags: vec![relation.schema.clone()],
        languages: Some(vec![LANGUAGE.to_owned()]),
        revision: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn column(name: &str, type_name: &str, not_null: bool, defaulted: bool) -> RelationColumn {
        RelationColumn {
            name: name.into(),
            sql_type: type_name.into(),
            type_name: type_name.into(),
            not_null,
            defaulted,
            generated: false,
        }
    }

    fn relation(insert: bool, delete: bool) -> Relation {
        Relation {
            schema: "s".into(),
            name: "t".into(),
            relkind: "r".into(),
            comment: None,
            insert,
            update: false,
            delete,
            truncate: false,
            columns: vec![
                column("id", "int4", true, true),
                column("note", "text", false, false),
                column("total", "numeric", true, false),
            ],
        }
    }

    #[test]
    fn risk_follows_privileges() {
        let read = entry(&relation(false, false));
        assert_eq!((read.risk.as_str(), read.risk_hints), ("safe", RiskHints::SAFE));
        assert!(read.input_schema.is_none());
        let write = entry(&relation(true, false));
        assert_eq!((write.risk.as_str(), write.risk_hints), ("write", RiskHints::WRITE));
        assert_eq!(write.input_schema.as_ref().unwrap()["required"], json!(["total"]));
        let mut update = relation(false, false);
        update.update = true;
        let update = entry(&update);
        assert_eq!((update.risk.as_str(), update.risk_hints), ("destructive", RiskHints::DESTRUCTIVE));
        assert!(update.input_schema.is_some());
        let delete = entry(&relation(false, true));
        assert_eq!(delete.risk, "destructive");
        assert!(delete.risk_hints.destructive && !delete.risk_hints.read_only);
        assert_eq!(read.id, "s.t");
        let mut dotted = relation(false, false);
        (dotted.schema, dotted.name) = ("My.Schema".into(), "t.\"x\"".into());
        assert_eq!(entry(&dotted).id, "\"My.Schema\".\"t.\"\"x\"\"\"");
        assert_eq!(read.languages.as_deref(), Some(&[LANGUAGE.to_owned()][..]));
    }

    #[test]
    fn output_schema_describes_a_row() {
        let schema = entry(&relation(false, false)).output_schema.unwrap();
        assert_eq!(schema["properties"]["id"]["type"], "integer");
        assert_eq!(schema["properties"]["note"]["type"], json!(["string", "null"]));
        assert_eq!(schema["properties"]["total"]["format"], "decimal");
        let keys: Vec<&String> = schema["properties"].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["id", "note", "total"]);
        assert_eq!(element_schema("_int4"), json!({"type": "array", "items": {"type": "integer"}}));
    }
}
