//! Relations in FROM: catalog name resolution (one visible entry, or an
//! unknown or ambiguous name), CTE references, aliases and joins, and the
//! references a statement makes, with their strongest access.

use pilotage_guest_sdk::CatalogEntry;
use pilotage_guest_sdk::hints::hint;
use sqlparser::ast::{
    Join, JoinConstraint, JoinOperator, ObjectName, Spanned, TableAlias, TableFactor, TableWithJoins,
};

use super::{
    Access, Analyzer, Columns, Place, RelationName, Resolution, Source, Visible, entry_columns, normalize, object_parts,
};
use crate::{codes, entry_id, types};

impl<'r, 'c> Analyzer<'r, 'c> {
    fn reference(&mut self, id: &str, access: Access) {
        match self.references.iter_mut().find(|(known, _)| known == id) {
            Some((_, known)) => *known = (*known).max(access),
            None => self.references.push((id.to_owned(), access)),
        }
    }

    /// Resolves a relation name to a visible catalog entry, with the schema
    /// and relation names it stands for.
    fn catalog_relation(&mut self, name: &ObjectName) -> Option<(CatalogEntry, Resolution)> {
        let range = self.range_of(name);
        let Some(parts) = object_parts(name) else {
            self.unsupported(name, "a computed relation name");
            return None;
        };
        let wanted: Vec<String> = parts.iter().map(|part| normalize(part)).collect();
        let matches: Vec<&Visible> = match wanted.as_slice() {
            [relation] => self.relations.visible.iter().filter(|known| known.relation == *relation).collect(),
            [schema, relation] => self
                .relations
                .visible
                .iter()
                .filter(|known| known.schema == *schema && known.relation == *relation)
                .collect(),
            _ => Vec::new(),
        };
        match matches.as_slice() {
            [one] => {
                // The names are the id's own parts, so what runs is exactly
                // the relation the id names ([`crate::entry_id`]).
                let resolution = Resolution::Relation { schema: one.schema.clone(), relation: one.relation.clone() };
                match self.relations.catalog.get(&one.id) {
                    Some(entry) => Some((entry, resolution)),
                    None => {
                        let id = one.id.clone();
                        self.error(codes::UNKNOWN_TABLE, range, format!("relation '{id}' does not exist"), None);
                        None
                    }
                }
            }
            [] => {
                let shown = wanted.join(".");
                let (lookup, candidates): (String, Vec<&str>) = match wanted.as_slice() {
                    [relation] => {
                        (relation.clone(), self.relations.visible.iter().map(|known| known.relation.as_str()).collect())
                    }
                    [schema, relation] => (
                        entry_id::relation_id(schema, relation),
                        self.relations.visible.iter().map(|known| known.id.as_str()).collect(),
                    ),
                    _ => (shown.clone(), Vec::new()),
                };
                let hint = hint(&lookup, candidates);
                self.error(
                    codes::UNKNOWN_TABLE,
                    range,
                    format!("relation '{shown}' does not exist (no visible table or view has this name)"),
                    hint,
                );
                None
            }
            many => {
                let listed: Vec<&str> = many.iter().map(|known| known.id.as_str()).collect();
                self.error(
                    codes::AMBIGUOUS_TABLE,
                    range,
                    format!("relation '{}' is visible in several schemas", wanted.join(".")),
                    Some(format!("qualify it: {}", listed.join(", "))),
                );
                None
            }
        }
    }

    pub(super) fn cte(&self, name: &str) -> Option<Columns> {
        self.frames
            .iter()
            .rev()
            .find_map(|frame| frame.ctes.iter().rev().find(|(cte, _)| cte == name).map(|(_, columns)| columns.clone()))
    }

    fn add_source(&mut self, source: Source) {
        if let Some(frame) = self.frames.last_mut() {
            frame.sources.push(source);
        }
    }

    pub(super) fn aliased(columns: Columns, alias: Option<&TableAlias>) -> Columns {
        match (columns, alias) {
            (Columns::Known(names), Some(alias)) if !alias.columns.is_empty() => {
                let mut names = names.to_vec();
                for (index, column) in alias.columns.iter().enumerate() {
                    let name = normalize(&column.name);
                    if index < names.len() {
                        names[index] = name;
                    } else {
                        names.push(name);
                    }
                }
                Columns::Known(names.into())
            }
            (columns, _) => columns,
        }
    }

    pub(super) fn table_with_joins(&mut self, table: &TableWithJoins) {
        self.table_factor(&table.relation);
        for join in &table.joins {
            self.join(join);
        }
    }

    fn join(&mut self, join: &Join) {
        let before: Vec<Source> = self.frames.last().map(|frame| frame.sources.clone()).unwrap_or_default();
        self.table_factor(&join.relation);
        let constraint = match &join.join_operator {
            JoinOperator::Join(c)
            | JoinOperator::Inner(c)
            | JoinOperator::Left(c)
            | JoinOperator::LeftOuter(c)
            | JoinOperator::Right(c)
            | JoinOperator::RightOuter(c)
            | JoinOperator::FullOuter(c)
            | JoinOperator::CrossJoin(c) => c,
            _ => {
                self.unsupported(&join.relation, "this kind of join");
                return;
            }
        };
        match constraint {
            JoinConstraint::On(expr) => self.expr(expr, Place::Plain),
            JoinConstraint::Using(names) => {
                let right = self.frames.last().and_then(|frame| frame.sources.last().cloned());
                for name in names {
                    let column = match object_parts(name).as_deref() {
                        Some([one]) => normalize(one),
                        _ => {
                            self.unsupported(name, "a qualified USING column");
                            continue;
                        }
                    };
                    let on_left = before.iter().any(|source| source.columns.has(&column));
                    let on_right = right.as_ref().is_some_and(|source| source.columns.has(&column));
                    if !on_left || !on_right {
                        let range = self.range_of(name);
                        self.error(
                            codes::UNKNOWN_COLUMN,
                            range,
                            format!("USING column '{}' is not a column of both sides of the join", name),
                            None,
                        );
                    } else if let Some(frame) = self.frames.last_mut() {
                        frame.merged.insert(column);
                    }
                }
            }
            JoinConstraint::Natural => {
                if let (Some(Source { columns: Columns::Known(right), .. }), Some(frame)) =
                    (self.frames.last().and_then(|f| f.sources.last().cloned()), self.frames.last_mut())
                {
                    for column in right.iter() {
                        if before.iter().any(|source| source.columns.has(column)) {
                            frame.merged.insert(column.clone());
                        }
                    }
                }
            }
            JoinConstraint::None => {}
            JoinConstraint::UsingAlias(..) => self.unsupported(&join.relation, "USING … AS"),
        }
    }

    fn table_factor(&mut self, factor: &TableFactor) {
        match factor {
            TableFactor::Table {
                name,
                alias,
                args,
                with_hints,
                version,
                with_ordinality,
                partitions,
                json_path,
                sample,
                index_directives,
                inheritance: _,
            } => {
                if args.is_some() {
                    let range = self.range_of(name);
                    self.error(
                        codes::FUNCTION_NOT_ALLOWED,
                        range,
                        format!("set-returning function '{name}' in FROM is not allowed"),
                        Some("FROM takes tables, views, CTEs and subqueries".into()),
                    );
                    self.add_source(Source {
                        name: alias.as_ref().map(|a| normalize(&a.name)).unwrap_or_default(),
                        qualified: None,
                        columns: Columns::Open,
                    });
                    return;
                }
                if !with_hints.is_empty()
                    || version.is_some()
                    || *with_ordinality
                    || !partitions.is_empty()
                    || json_path.is_some()
                    || sample.is_some()
                    || !index_directives.is_empty()
                {
                    self.unsupported(name, "a table modifier (hints, sampling, versions)");
                }
                self.named_source(name, alias.as_ref(), Access::Read);
            }
            TableFactor::Derived { lateral: _, subquery, alias, sample } => {
                if sample.is_some() {
                    self.unsupported(factor, "TABLESAMPLE");
                }
                let columns = self.query(subquery);
                self.add_source(Source {
                    name: alias.as_ref().map(|a| normalize(&a.name)).unwrap_or_default(),
                    qualified: None,
                    columns: Self::aliased(columns, alias.as_ref()),
                });
            }
            TableFactor::NestedJoin { table_with_joins, alias } => {
                if alias.is_some() {
                    self.unsupported(factor, "an alias on a parenthesized join");
                }
                self.table_with_joins(table_with_joins);
            }
            other => {
                self.unsupported(other, "this FROM item");
                self.add_source(Source { name: String::new(), qualified: None, columns: Columns::Open });
            }
        }
    }

    /// Adds a CTE or catalog relation as a FROM item; returns its entry when
    /// it is a catalog relation.
    pub(super) fn named_source(
        &mut self,
        name: &ObjectName,
        alias: Option<&TableAlias>,
        access: Access,
    ) -> Option<CatalogEntry> {
        let parts = object_parts(name).unwrap_or_default();
        if let [single] = parts.as_slice()
            && let Some(columns) = self.cte(&normalize(single))
        {
            self.names.push(RelationName { span: name.span(), resolution: Resolution::Cte });
            let source_name = alias.map(|a| normalize(&a.name)).unwrap_or_else(|| normalize(single));
            self.add_source(Source { name: source_name, qualified: None, columns: Self::aliased(columns, alias) });
            return None;
        }
        let resolved = self.catalog_relation(name).map(|(entry, resolution)| {
            self.names.push(RelationName { span: name.span(), resolution: resolution.clone() });
            (entry, resolution)
        });
        let source = match &resolved {
            Some((entry, Resolution::Relation { schema, relation })) => {
                self.reference(&entry.id, access);
                self.catalog_typed_columns(name, entry);
                let columns = entry_columns(entry).map_or(Columns::Open, |names| Columns::Known(names.into()));
                Source {
                    name: alias.map(|a| normalize(&a.name)).unwrap_or_else(|| relation.clone()),
                    qualified: alias.is_none().then(|| (schema.clone(), relation.clone())),
                    columns: Self::aliased(columns, alias),
                }
            }
            _ => Source {
                name: alias
                    .map(|a| normalize(&a.name))
                    .or_else(|| parts.last().map(|p| normalize(p)))
                    .unwrap_or_default(),
                qualified: None,
                columns: Columns::Open,
            },
        };
        self.add_source(source);
        resolved.map(|(entry, _)| entry)
    }

    /// Refuses a relation with a column of a `reg*` type: a literal or
    /// parameter compared with or written to such a column is looked up
    /// as a name in the system catalogs, and reading it turns object ids
    /// into names, hidden ones too (Part II §10.3). The message names
    /// only the visible entry.
    fn catalog_typed_columns(&mut self, name: &ObjectName, entry: &CatalogEntry) {
        let Some(schema) =
            entry.output_schema.as_deref().and_then(|s| serde_json::from_str::<serde_json::Value>(s).ok())
        else {
            return;
        };
        let typed = schema.get("properties").and_then(|p| p.as_object()).and_then(|properties| {
            properties.iter().find_map(|(column, property)| {
                let sql_type = property.get("description")?.as_str()?;
                types::names_catalog_objects(sql_type).then(|| (column.clone(), sql_type.to_owned()))
            })
        });
        if let Some((column, sql_type)) = typed {
            let range = self.range_of(name);
            self.error(
                codes::TYPE_NOT_ALLOWED,
                range,
                format!(
                    "'{}' has the column '{column}' of type {sql_type}, whose values name catalog objects; it cannot be used here",
                    entry.id
                ),
                Some("read it through a view that casts the column to oid or text".into()),
            );
        }
    }
}
