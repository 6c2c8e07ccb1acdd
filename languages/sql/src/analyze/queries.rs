//! Query levels: WITH, set operations, VALUES, SELECT lists with star
//! expansion (bounded), ORDER BY, GROUP BY, LIMIT, and the warnings about
//! `SELECT *` and unlimited table reads.

use sqlparser::ast::{
    Cte, Distinct, Expr, GroupByExpr, LimitClause, OrderByExpr, OrderByKind, Query, Select, SelectItem,
    SelectItemQualifiedWildcardKind, SetExpr,
};

use super::{Analyzer, Columns, Frame, Place, Source, normalize};
use crate::codes;

impl<'r, 'c> Analyzer<'r, 'c> {
    pub(super) fn top_query(&mut self, query: &Query) {
        self.top_level = true;
        self.query(query);
    }

    /// Analyzes a query in a new scope level; returns its output columns.
    pub(super) fn query(&mut self, query: &Query) -> Columns {
        self.frames.push(Frame::default());
        self.depth += 1;
        if let Some(with) = &query.with {
            for cte in &with.cte_tables {
                self.cte_definition(cte, with.recursive);
            }
        }
        if !query.locks.is_empty() {
            let range = self.range_of(query);
            self.error(
                codes::STATEMENT_NOT_ALLOWED,
                range,
                "locking clauses (FOR UPDATE, FOR SHARE, …) are not allowed: they take row locks, and a read-only plan must not"
                    .into(),
                Some("remove the FOR … clause".into()),
            );
        }
        if query.for_clause.is_some()
            || query.settings.is_some()
            || query.format_clause.is_some()
            || !query.pipe_operators.is_empty()
        {
            self.unsupported(query, "this query clause");
        }
        let order_by: &[OrderByExpr] = match &query.order_by {
            Some(order_by) => match &order_by.kind {
                OrderByKind::Expressions(exprs) => exprs,
                OrderByKind::All(_) => {
                    self.unsupported(query, "ORDER BY ALL");
                    &[]
                }
            },
            None => &[],
        };
        let columns = match query.body.as_ref() {
            SetExpr::Select(select) => self.select(select, order_by, query),
            body => {
                let columns = self.set_expr(body);
                if let (Columns::Known(names), Some(frame)) = (&columns, self.frames.last_mut()) {
                    frame.outputs = names.to_vec();
                }
                for item in order_by {
                    self.expr(&item.expr, Place::Ordering);
                }
                columns
            }
        };
        match &query.limit_clause {
            Some(LimitClause::LimitOffset { limit, offset, limit_by }) => {
                if let Some(limit) = limit {
                    self.expr(limit, Place::Plain);
                }
                if let Some(offset) = offset {
                    self.expr(&offset.value, Place::Plain);
                }
                if !limit_by.is_empty() {
                    self.unsupported(query, "LIMIT BY");
                }
            }
            Some(LimitClause::OffsetCommaLimit { .. }) => self.unsupported(query, "LIMIT offset, count"),
            None => {}
        }
        if let Some(fetch) = &query.fetch
            && let Some(quantity) = &fetch.quantity
        {
            self.expr(quantity, Place::Plain);
        }
        self.depth -= 1;
        self.frames.pop();
        columns
    }

    fn cte_definition(&mut self, cte: &Cte, recursive: bool) {
        let name = normalize(&cte.alias.name);
        if recursive {
            // The CTE may read itself: its columns are those it declares.
            let declared = if cte.alias.columns.is_empty() {
                Columns::Open
            } else {
                Columns::Known(cte.alias.columns.iter().map(|c| normalize(&c.name)).collect())
            };
            if let Some(frame) = self.frames.last_mut() {
                frame.ctes.push((name.clone(), declared));
            }
        }
        if let SetExpr::Insert(_) | SetExpr::Update(_) | SetExpr::Delete(_) | SetExpr::Merge(_) =
            cte.query.body.as_ref()
        {
            let range = self.range_of(cte.query.as_ref());
            self.error(
                codes::STATEMENT_NOT_ALLOWED,
                range,
                format!("WITH '{name}' holds a data-changing statement (a writable CTE), which is not allowed"),
                Some("a query only reads; write in a statement of its own".into()),
            );
            return;
        }
        let columns = self.query(&cte.query);
        let columns = Self::aliased(columns, Some(&cte.alias));
        if let Some(frame) = self.frames.last_mut() {
            frame.ctes.retain(|(known, _)| *known != name);
            frame.ctes.push((name, columns));
        }
    }

    fn set_expr(&mut self, body: &SetExpr) -> Columns {
        match body {
            SetExpr::Select(select) => {
                // A SELECT inside a set operation or parentheses: its own level.
                self.frames.push(Frame::default());
                let columns = self.select_body(select);
                self.frames.pop();
                columns
            }
            SetExpr::Query(query) => self.query(query),
            SetExpr::SetOperation { left, right, .. } => {
                let columns = self.set_expr(left);
                self.set_expr(right);
                columns
            }
            SetExpr::Values(values) => {
                let mut width = 0;
                for row in &values.rows {
                    width = width.max(row.len());
                    for expr in row.iter() {
                        self.expr(expr, Place::Plain);
                    }
                }
                Columns::Known((1..=width).map(|n| format!("column{n}")).collect())
            }
            SetExpr::Insert(statement) | SetExpr::Update(statement) | SetExpr::Delete(statement) => {
                let range = self.range_of(statement);
                self.error(
                    codes::STATEMENT_NOT_ALLOWED,
                    range,
                    "a data-changing statement inside a query is not allowed".into(),
                    Some("write in a statement of its own".into()),
                );
                Columns::Open
            }
            other => {
                self.unsupported(other, "this query form");
                Columns::Open
            }
        }
    }

    fn select(&mut self, select: &Select, order_by: &[OrderByExpr], query: &Query) -> Columns {
        let columns = self.select_body(select);
        for item in order_by {
            self.expr(&item.expr, Place::Ordering);
        }
        if self.top_level && self.depth == 1 && self.frames.len() == 1 {
            self.no_limit(select, query);
        }
        columns
    }

    /// Warns about a statement-level query that returns table rows
    /// without LIMIT and without aggregating.
    fn no_limit(&mut self, select: &Select, query: &Query) {
        let reads_table = self.frames.last().is_some_and(|f| f.sources.iter().any(|s| s.qualified.is_some()))
            || !self.references.is_empty();
        let grouped = !matches!(&select.group_by, GroupByExpr::Expressions(exprs, _) if exprs.is_empty());
        let aggregates = select.projection.iter().any(|item| match item {
            SelectItem::UnnamedExpr(expr) | SelectItem::ExprWithAlias { expr, .. } => is_aggregate(expr),
            _ => false,
        });
        let limited = query.limit_clause.is_some() || query.fetch.is_some();
        if reads_table && !grouped && !aggregates && !limited {
            let range = self.range_of(query);
            self.warning(
                codes::NO_LIMIT,
                range,
                "this query returns table rows without LIMIT; the data source caps the rows returned".into(),
            );
        }
    }

    fn select_body(&mut self, select: &Select) -> Columns {
        if select.into.is_some() {
            let range = self.range_of(select);
            self.error(
                codes::STATEMENT_NOT_ALLOWED,
                range,
                "SELECT … INTO creates a table and is not allowed".into(),
                Some("remove INTO".into()),
            );
        }
        if select.top.is_some()
            || !select.lateral_views.is_empty()
            || select.prewhere.is_some()
            || !select.connect_by.is_empty()
            || !select.cluster_by.is_empty()
            || !select.distribute_by.is_empty()
            || !select.sort_by.is_empty()
            || select.qualify.is_some()
            || !select.named_window.is_empty()
            || select.value_table_mode.is_some()
            || select.exclude.is_some()
            || !select.optimizer_hints.is_empty()
        {
            self.unsupported(select, "this SELECT clause");
        }
        for table in &select.from {
            self.table_with_joins(table);
        }
        if let Some(selection) = &select.selection {
            self.expr(selection, Place::Plain);
        }
        let mut outputs = Vec::new();
        let mut open = false;
        let mut too_wide = false;
        for item in &select.projection {
            match item {
                SelectItem::UnnamedExpr(expr) => {
                    self.expr(expr, Place::Plain);
                    outputs.push(output_name(expr));
                }
                SelectItem::ExprWithAlias { expr, alias } => {
                    self.expr(expr, Place::Plain);
                    outputs.push(normalize(alias));
                }
                SelectItem::Wildcard(_) => {
                    if self.depth == 1 {
                        let range = self.range_of(item);
                        self.warning(
                            codes::SELECT_STAR,
                            range,
                            "SELECT * returns whatever columns the tables have now; name the columns you need".into(),
                        );
                    }
                    for source in self.frames.last().map(|f| f.sources.clone()).unwrap_or_default() {
                        match source.columns {
                            Columns::Known(names) => self.expand_star(item, &names, &mut outputs, &mut too_wide),
                            Columns::Open => open = true,
                        }
                    }
                }
                SelectItem::QualifiedWildcard(kind, _) => {
                    if self.depth == 1 {
                        let range = self.range_of(item);
                        self.warning(
                            codes::SELECT_STAR,
                            range,
                            "t.* returns whatever columns the table has now; name the columns you need".into(),
                        );
                    }
                    match kind {
                        SelectItemQualifiedWildcardKind::ObjectName(name) => match self.source_named(name) {
                            Some(Source { columns: Columns::Known(names), .. }) => {
                                self.expand_star(item, &names, &mut outputs, &mut too_wide);
                            }
                            Some(_) => open = true,
                            None => {
                                open = true;
                                let range = self.range_of(name);
                                let hint = self.source_hint(&name.to_string());
                                self.error(
                                    codes::UNKNOWN_TABLE,
                                    range,
                                    format!("'{name}' names no FROM item here"),
                                    hint,
                                );
                            }
                        },
                        SelectItemQualifiedWildcardKind::Expr(expr) => {
                            self.unsupported(expr, "(expression).*");
                            open = true;
                        }
                    }
                }
                SelectItem::ExprWithAliases { expr, .. } => {
                    self.unsupported(expr, "several aliases for one expression");
                    open = true;
                }
            }
        }
        if let Some(frame) = self.frames.last_mut() {
            frame.outputs = outputs.clone();
        }
        match &select.distinct {
            Some(Distinct::On(exprs)) => {
                for expr in exprs {
                    self.expr(expr, Place::Ordering);
                }
            }
            Some(Distinct::Distinct) | Some(Distinct::All) | None => {}
        }
        match &select.group_by {
            GroupByExpr::Expressions(exprs, modifiers) => {
                if !modifiers.is_empty() {
                    self.unsupported(select, "GROUP BY modifiers");
                }
                for expr in exprs {
                    self.expr(expr, Place::Ordering);
                }
            }
            GroupByExpr::All(_) => self.unsupported(select, "GROUP BY ALL"),
        }
        if let Some(having) = &select.having {
            self.expr(having, Place::Plain);
        }
        if open || too_wide { Columns::Open } else { Columns::Known(outputs.into()) }
    }

    /// Appends the columns a star stands for to a query's `outputs`, unless
    /// that would carry more than [`codes::MAX_COLUMNS`]: then reports it
    /// once per query level (`too_wide` remembers it), and the query's
    /// columns become [`Columns::Open`], so nothing built on it cascades or
    /// grows.
    /// Without the bound, a chain of CTEs each joining the previous one
    /// with itself doubles its columns per level (Part II §10.1: validation
    /// is bounded).
    fn expand_star(&mut self, item: &SelectItem, names: &[String], outputs: &mut Vec<String>, too_wide: &mut bool) {
        if *too_wide {
            return;
        }
        if outputs.len() + names.len() > codes::MAX_COLUMNS {
            *too_wide = true;
            let range = self.range_of(item);
            self.error(
                codes::UNSUPPORTED_SYNTAX,
                range,
                format!(
                    "this query would carry {} columns; the bound is {} (PostgreSQL's own limit on a target list)",
                    outputs.len() + names.len(),
                    codes::MAX_COLUMNS
                ),
                Some("name the columns you need instead of *".into()),
            );
            return;
        }
        self.star_columns += names.len();
        outputs.extend(names.iter().cloned());
    }
}

/// The output column name PostgreSQL gives an unaliased expression.
fn output_name(expr: &Expr) -> String {
    match expr {
        Expr::Identifier(ident) => normalize(ident),
        Expr::CompoundIdentifier(idents) => idents.last().map(normalize).unwrap_or_default(),
        Expr::Function(function) => {
            function.name.0.last().and_then(|p| p.as_ident()).map(normalize).unwrap_or_default()
        }
        Expr::Cast { expr, .. } | Expr::Nested(expr) => output_name(expr),
        Expr::Case { .. } => "case".into(),
        _ => "?column?".into(),
    }
}

/// Whether `expr` is (or wraps) an aggregate call at this level.
fn is_aggregate(expr: &Expr) -> bool {
    match expr {
        Expr::Function(function) => {
            let name = function.name.0.last().and_then(|p| p.as_ident()).map(normalize).unwrap_or_default();
            function.over.is_none() && codes::AGGREGATE_FUNCTIONS.contains(&name.as_str())
        }
        Expr::Cast { expr, .. } | Expr::Nested(expr) | Expr::UnaryOp { expr, .. } => is_aggregate(expr),
        Expr::BinaryOp { left, right, .. } => is_aggregate(left) || is_aggregate(right),
        _ => false,
    }
}
