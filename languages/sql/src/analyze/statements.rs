//! Data-changing statements: INSERT (with `ON CONFLICT`), UPDATE and
//! DELETE, their target relation checked against the entry's risk, the
//! columns they assign, and RETURNING.

use pilotage_guest_sdk::hints::hint;
use sqlparser::ast::{
    AssignmentTarget, ConflictTarget, Delete, FromTable, Insert, ObjectName, OnConflictAction, OnInsert, SelectItem,
    TableAlias, TableFactor, TableObject, TableWithJoins, Update, UpdateTableFromKind,
};

use super::{Access, Analyzer, Class, Columns, Frame, Place, Source, normalize, object_parts};
use crate::codes;

impl<'r, 'c> Analyzer<'r, 'c> {
    fn target(&mut self, name: &ObjectName, alias: Option<&TableAlias>, access: Access) {
        self.frames.push(Frame::default());
        if let Some(entry) = self.named_source(name, alias, access) {
            // The entry's risk says what the role's privileges can do:
            // `write` may only insert, `destructive` may also overwrite and
            // delete.
            let allowed = match access {
                Access::Read => true,
                Access::Insert => !entry.risk_hints.read_only,
                Access::Update | Access::Delete => entry.risk_hints.destructive,
            };
            if !allowed {
                let range = self.range_of(name);
                let what = match access {
                    Access::Delete => "delete from",
                    Access::Update => "overwrite values of",
                    _ => "change",
                };
                self.error(
                    codes::READ_ONLY_RELATION,
                    range,
                    format!(
                        "the data source's role may not {what} '{}' (its catalog risk is '{}')",
                        entry.id, entry.risk
                    ),
                    None,
                );
            }
        } else if let [single] = object_parts(name).unwrap_or_default().as_slice()
            && self.cte(&normalize(single)).is_some()
        {
            self.unsupported(name, "changing a CTE");
        }
    }

    fn target_columns(&self) -> Columns {
        self.frames.last().and_then(|frame| frame.sources.first()).map_or(Columns::Open, |s| s.columns.clone())
    }

    fn assignment_targets(&mut self, targets: &[&ObjectName]) {
        let columns = self.target_columns();
        let table = self.frames.last().and_then(|f| f.sources.first()).map(|s| s.name.clone()).unwrap_or_default();
        for name in targets {
            let column = object_parts(name).and_then(|parts| parts.last().map(|p| normalize(p)));
            let Some(column) = column else { continue };
            if !columns.has(&column) {
                let range = self.range_of(*name);
                let hint = match &columns {
                    Columns::Known(names) => hint(&column, names.iter().map(String::as_str)),
                    Columns::Open => None,
                };
                self.error(
                    codes::UNKNOWN_COLUMN,
                    range,
                    format!("column '{column}' does not exist in '{table}'"),
                    hint,
                );
            }
        }
    }

    fn returning(&mut self, returning: Option<&Vec<SelectItem>>) {
        for item in returning.into_iter().flatten() {
            match item {
                SelectItem::UnnamedExpr(expr) | SelectItem::ExprWithAlias { expr, .. } => self.expr(expr, Place::Plain),
                SelectItem::Wildcard(_) => {}
                other => self.unsupported(other, "this RETURNING item"),
            }
        }
    }

    /// Analyzes an INSERT; its class is [`Class::Update`] when `ON CONFLICT
    /// … DO UPDATE` may overwrite rows, else [`Class::Insert`].
    pub(super) fn insert(&mut self, insert: &Insert) -> Class {
        let overwrites = matches!(
            &insert.on,
            Some(OnInsert::OnConflict(conflict)) if matches!(conflict.action, OnConflictAction::DoUpdate(_))
        );
        let (class, access) =
            if overwrites { (Class::Update, Access::Update) } else { (Class::Insert, Access::Insert) };
        let TableObject::TableName(name) = &insert.table else {
            let range = self.fallback;
            self.error(
                codes::UNSUPPORTED_SYNTAX,
                range,
                "INSERT into a function or query is outside the sql/postgres-15 subset".into(),
                None,
            );
            return class;
        };
        if insert.or.is_some()
            || insert.ignore
            || insert.overwrite
            || insert.partitioned.is_some()
            || !insert.after_columns.is_empty()
            || insert.replace_into
            || insert.priority.is_some()
            || insert.insert_alias.is_some()
            || insert.settings.is_some()
            || insert.format_clause.is_some()
            || insert.output.is_some()
            || !insert.assignments.is_empty()
        {
            self.unsupported(name, "this INSERT form");
        }
        // The source query cannot see the target: analyze it first, alone.
        let saved = std::mem::take(&mut self.frames);
        if let Some(source) = &insert.source {
            self.query(source);
        }
        self.frames = saved;
        let alias = insert.table_alias.as_ref().map(|a| TableAlias {
            explicit: true,
            name: a.alias.clone(),
            columns: Vec::new(),
            at: None,
        });
        self.target(name, alias.as_ref(), access);
        let columns: Vec<&ObjectName> = insert.columns.iter().collect();
        self.assignment_targets(&columns);
        if let Some(on) = &insert.on {
            match on {
                OnInsert::OnConflict(conflict) => {
                    if let Some(ConflictTarget::Columns { columns, predicate }) = &conflict.conflict_target {
                        let names: Vec<ObjectName> =
                            columns.iter().map(|c| ObjectName::from(vec![c.clone()])).collect();
                        let refs: Vec<&ObjectName> = names.iter().collect();
                        self.assignment_targets(&refs);
                        if let Some(predicate) = predicate {
                            self.expr(predicate, Place::Plain);
                        }
                    }
                    if let OnConflictAction::DoUpdate(update) = &conflict.action {
                        let excluded =
                            Source { name: "excluded".into(), qualified: None, columns: self.target_columns() };
                        // `excluded` answers only qualified names: an outer level.
                        self.frames.insert(0, Frame { sources: vec![excluded], ..Frame::default() });
                        for assignment in &update.assignments {
                            match &assignment.target {
                                AssignmentTarget::ColumnName(column) => self.assignment_targets(&[column]),
                                AssignmentTarget::Tuple(columns) => {
                                    self.assignment_targets(&columns.iter().collect::<Vec<_>>())
                                }
                            }
                            self.expr(&assignment.value, Place::Plain);
                        }
                        if let Some(selection) = &update.selection {
                            self.expr(selection, Place::Plain);
                        }
                        self.frames.remove(0);
                    }
                }
                _ => self.unsupported(name, "this ON clause"),
            }
        }
        self.returning(insert.returning.as_ref());
        self.frames.clear();
        class
    }

    pub(super) fn update(&mut self, update: &Update) {
        let TableFactor::Table { name, alias, .. } = &update.table.relation else {
            self.unsupported(&update.table.relation, "UPDATE of this target");
            return;
        };
        if !update.table.joins.is_empty()
            || update.on_cluster.is_some()
            || update.output.is_some()
            || update.or.is_some()
            || !update.order_by.is_empty()
            || update.limit.is_some()
            || update.settings.is_some()
            || !update.optimizer_hints.is_empty()
        {
            self.unsupported(name, "this UPDATE form");
        }
        self.target(name, alias.as_ref(), Access::Update);
        if let Some(UpdateTableFromKind::AfterSet(tables) | UpdateTableFromKind::BeforeSet(tables)) = &update.from {
            for table in tables {
                self.table_with_joins(table);
            }
        }
        for assignment in &update.assignments {
            match &assignment.target {
                AssignmentTarget::ColumnName(column) => self.assignment_targets(&[column]),
                AssignmentTarget::Tuple(columns) => self.assignment_targets(&columns.iter().collect::<Vec<_>>()),
            }
            self.expr(&assignment.value, Place::Plain);
        }
        match &update.selection {
            Some(selection) => self.expr(selection, Place::Plain),
            None => {
                let range = self.range_of(name);
                self.warning(codes::MISSING_WHERE, range, "UPDATE without WHERE changes every row".into());
            }
        }
        self.returning(update.returning.as_ref());
        self.frames.clear();
    }

    pub(super) fn delete(&mut self, delete: &Delete) {
        let tables = match &delete.from {
            FromTable::WithFromKeyword(tables) | FromTable::WithoutKeyword(tables) => tables,
        };
        let Some(TableWithJoins { relation: TableFactor::Table { name, alias, .. }, joins }) = tables.first() else {
            let range = self.fallback;
            self.error(
                codes::UNSUPPORTED_SYNTAX,
                range,
                "DELETE of this target is outside the sql/postgres-15 subset".into(),
                None,
            );
            return;
        };
        if tables.len() > 1
            || !joins.is_empty()
            || !delete.tables.is_empty()
            || delete.on_cluster.is_some()
            || delete.output.is_some()
            || !delete.order_by.is_empty()
            || delete.limit.is_some()
            || delete.settings.is_some()
            || !delete.optimizer_hints.is_empty()
        {
            self.unsupported(name, "this DELETE form");
        }
        self.target(name, alias.as_ref(), Access::Delete);
        for table in delete.using.iter().flatten() {
            self.table_with_joins(table);
        }
        match &delete.selection {
            Some(selection) => self.expr(selection, Place::Plain),
            None => {
                let range = self.range_of(name);
                self.warning(codes::MISSING_WHERE, range, "DELETE without WHERE deletes every row".into());
            }
        }
        self.returning(delete.returning.as_ref());
        self.frames.clear();
    }
}
