//! Static analysis of one statement against the caller's visible catalog:
//! the statement class, name resolution (relations, CTEs, aliases,
//! columns, with scopes for subqueries), the function allow-list,
//! placeholders, and the relations it references, in resolution order
//! (Part II §5.5; Part IV §7).
//!
//! The walker is closed: every construct it does not know is
//! `unsupported_syntax`, so nothing unexamined can reach the database.

use std::collections::BTreeSet;
use std::rc::Rc;

use pilotage_guest_sdk::diag::{error_in, with_hint};
use pilotage_guest_sdk::hints::hint;
use pilotage_guest_sdk::{CatalogEntry, Diagnostic, RiskHints, Severity, TextRange};
use sqlparser::ast::{
    AssignmentTarget, CastKind, ConflictTarget, Cte, DataType, Delete, Distinct, Expr, FromTable, Function,
    FunctionArg, FunctionArgExpr, FunctionArgumentClause, FunctionArguments, GroupByExpr, Ident, InTarget, Insert,
    Join, JoinConstraint, JoinOperator, LimitClause, ObjectName, OnConflictAction, OnInsert, OrderByExpr, OrderByKind,
    Query, Select, SelectItem, SelectItemQualifiedWildcardKind, SetExpr, Spanned, Statement, TableAlias, TableFactor,
    TableObject, TableWithJoins, Update, UpdateTableFromKind, Value, WindowType,
};
use sqlparser::tokenizer::Span;

use crate::program::span_range;
use crate::{codes, entry_id, types};

/// The caller's visible catalog as validation sees it (the host's
/// `catalog` import in the component; a map in tests).
pub trait Catalog {
    /// One visible entry.
    fn get(&self, id: &str) -> Option<CatalogEntry>;
    /// Every visible entry id of `kind`.
    fn ids(&self, kind: &str) -> Vec<String>;
}

/// What a statement does to a relation it references, labeled by what it
/// can destroy (Part II §5.3: destructive = may alter state
/// irreversibly).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Access {
    /// Only reads it.
    Read,
    /// Adds rows (INSERT without `ON CONFLICT … DO UPDATE`): nothing that
    /// was there is overwritten.
    Insert,
    /// Overwrites values in place (UPDATE, `INSERT … ON CONFLICT … DO
    /// UPDATE`): the old values are gone.
    Update,
    /// Deletes rows.
    Delete,
}

impl Access {
    /// The use-level risk hints of this access (Part II §5.3): a read is
    /// `safe`, an insert `write`, an update or a delete `destructive`.
    pub fn hints(self) -> RiskHints {
        match self {
            Access::Read => pilotage_guest_sdk::diag::SAFE,
            Access::Insert => pilotage_guest_sdk::diag::WRITE,
            Access::Update | Access::Delete => pilotage_guest_sdk::diag::DESTRUCTIVE,
        }
    }

    /// The word used in traces.
    pub fn word(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Insert => "insert",
            Access::Update => "update",
            Access::Delete => "delete",
        }
    }
}

/// The class of a statement the Language allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// A query (SELECT, VALUES, set operations, WITH).
    Query,
    /// An INSERT that only adds rows.
    Insert,
    /// UPDATE, or INSERT … ON CONFLICT … DO UPDATE: overwrites values.
    Update,
    /// DELETE.
    Delete,
    /// Anything else: refused.
    Refused,
}

impl Class {
    /// The statement step's risk hints: those of its strongest access.
    pub fn hints(self) -> RiskHints {
        match self {
            Class::Query => Access::Read.hints(),
            Class::Insert => Access::Insert.hints(),
            Class::Update => Access::Update.hints(),
            Class::Delete | Class::Refused => Access::Delete.hints(),
        }
    }
}

/// One placeholder occurrence.
#[derive(Clone, Debug)]
pub struct Placeholder {
    /// Its number for `$n`, `None` for another form (`?`, `:name`).
    pub number: Option<u32>,
    /// The text as written.
    pub text: String,
    /// Where it is.
    pub range: Option<TextRange>,
}

/// What one relation name of a statement (a FROM or JOIN item, a
/// subquery's FROM item, an INSERT/UPDATE/DELETE target, a USING item)
/// resolved to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resolution {
    /// A visible catalog relation: its schema and relation names exactly as
    /// the database spells them (the two parts of the entry id).
    Relation {
        /// The schema.
        schema: String,
        /// The table or view.
        relation: String,
    },
    /// A CTE in scope, which is not a catalog relation.
    Cte,
}

/// One relation name as the analyzer resolved it, found again by its
/// position when the statement is qualified for execution
/// ([`crate::qualify`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RelationName {
    /// Where the whole name is written (the parser's span).
    pub span: Span,
    /// What it names.
    pub resolution: Resolution,
}

/// What analysis learned about one statement.
#[derive(Clone, Debug)]
pub struct Analysis {
    /// Its class.
    pub class: Class,
    /// Catalog entries referenced, in resolution order, once each, with the
    /// strongest access.
    pub references: Vec<(String, Access)>,
    /// Every placeholder, in order.
    pub placeholders: Vec<Placeholder>,
    /// Every relation name resolved, each occurrence once, in resolution
    /// order. Names that did not resolve are findings, not listed here.
    pub names: Vec<RelationName>,
    /// Column names that `*` and `t.*` expanded to, summed over every
    /// query level: the analyzer's work on stars, at most
    /// [`codes::MAX_COLUMNS`] per star written.
    pub star_columns: usize,
}

/// One visible relation: its entry id and the two names it stands for.
struct Visible {
    id: String,
    schema: String,
    relation: String,
}

/// The visible relation ids, loaded once per validation.
pub struct Relations<'c> {
    catalog: &'c dyn Catalog,
    visible: Vec<Visible>,
}

impl<'c> Relations<'c> {
    /// Every visible table and view of `catalog` whose id is a relation id
    /// ([`crate::entry_id`]); an entry with another id names no relation
    /// and cannot be reached.
    pub fn load(catalog: &'c dyn Catalog) -> Relations<'c> {
        let mut ids: Vec<String> = codes::ENTRY_KINDS.iter().flat_map(|(kind, _, _)| catalog.ids(kind)).collect();
        ids.sort();
        ids.dedup();
        let visible = ids
            .into_iter()
            .filter_map(|id| entry_id::split(&id).map(|(schema, relation)| Visible { id, schema, relation }))
            .collect();
        Relations { catalog, visible }
    }
}

/// The columns a FROM item offers.
#[derive(Clone, Debug)]
enum Columns {
    /// Exactly these (normalized) names, shared: a CTE referenced many
    /// times, and every scope that sees it, hold the one list its
    /// definition computed (a reference copies no names).
    Known(Rc<[String]>),
    /// Unknown (an unresolved relation or an unanalysable subquery): any
    /// name is accepted, so one mistake does not cascade.
    Open,
}

impl Columns {
    fn has(&self, name: &str) -> bool {
        match self {
            Columns::Known(names) => names.iter().any(|n| n == name),
            Columns::Open => true,
        }
    }
}

/// One FROM item in scope.
#[derive(Clone, Debug)]
struct Source {
    /// The name it is addressed by: its alias, or the relation's name.
    name: String,
    /// (schema, relation) for a catalog relation without alias.
    qualified: Option<(String, String)>,
    columns: Columns,
}

/// One query level: its FROM items, CTEs and output names.
#[derive(Default)]
struct Frame {
    sources: Vec<Source>,
    ctes: Vec<(String, Columns)>,
    /// Columns merged by USING/NATURAL (never ambiguous).
    merged: BTreeSet<String>,
    /// Output names usable in ORDER BY and GROUP BY.
    outputs: Vec<String>,
}

/// Where a name is being resolved.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    /// Ordinary expressions.
    Plain,
    /// ORDER BY and GROUP BY: output names count too.
    Ordering,
}

/// The analyzer of one statement.
pub struct Analyzer<'r, 'c> {
    relations: &'r Relations<'c>,
    fallback: TextRange,
    diagnostics: Vec<Diagnostic>,
    frames: Vec<Frame>,
    references: Vec<(String, Access)>,
    placeholders: Vec<Placeholder>,
    names: Vec<RelationName>,
    /// Query nesting depth (1 = the statement's own query).
    depth: usize,
    /// Whether the statement itself is a query (not INSERT … SELECT).
    top_level: bool,
    /// See [`Analysis::star_columns`].
    star_columns: usize,
}

/// Normalizes an identifier as PostgreSQL does: unquoted names fold to
/// lower case, quoted names are exact.
pub fn normalize(ident: &Ident) -> String {
    if ident.quote_style.is_some() { ident.value.clone() } else { ident.value.to_lowercase() }
}

fn object_parts(name: &ObjectName) -> Option<Vec<&Ident>> {
    name.0.iter().map(|part| part.as_ident()).collect()
}

/// The columns an entry's `output_schema` lists, in order.
pub fn entry_columns(entry: &CatalogEntry) -> Option<Vec<String>> {
    let schema: serde_json::Value = serde_json::from_str(entry.output_schema.as_deref()?).ok()?;
    Some(schema.get("properties")?.as_object()?.keys().cloned().collect())
}

impl<'r, 'c> Analyzer<'r, 'c> {
    /// An analyzer over `relations`; findings without a position of their
    /// own use `fallback` (the statement's range).
    pub fn new(relations: &'r Relations<'c>, fallback: TextRange) -> Self {
        Analyzer {
            relations,
            fallback,
            diagnostics: Vec::new(),
            frames: Vec::new(),
            references: Vec::new(),
            placeholders: Vec::new(),
            names: Vec::new(),
            depth: 0,
            top_level: false,
            star_columns: 0,
        }
    }

    /// Analyzes `statement`; returns what it learned and its findings.
    pub fn statement(mut self, statement: &Statement) -> (Analysis, Vec<Diagnostic>) {
        let class = match statement {
            Statement::Query(query) => {
                self.top_query(query);
                Class::Query
            }
            Statement::Insert(insert) => self.insert(insert),
            Statement::Update(update) => {
                self.update(update);
                Class::Update
            }
            Statement::Delete(delete) => {
                self.delete(delete);
                Class::Delete
            }
            other => {
                self.refuse_statement(other);
                Class::Refused
            }
        };
        let analysis = Analysis {
            class,
            references: self.references,
            placeholders: self.placeholders,
            names: self.names,
            star_columns: self.star_columns,
        };
        (analysis, self.diagnostics)
    }

    fn range_of(&self, node: &impl Spanned) -> TextRange {
        span_range(node.span()).unwrap_or(self.fallback)
    }

    fn error(&mut self, code: &str, range: TextRange, message: String, hint: Option<String>) {
        self.diagnostics.push(with_hint(error_in(code, range, message), hint));
    }

    fn warning(&mut self, code: &str, range: TextRange, message: String) {
        let mut diagnostic = error_in(code, range, message);
        diagnostic.severity = Severity::Warning;
        self.diagnostics.push(diagnostic);
    }

    fn unsupported(&mut self, node: &impl Spanned, what: &str) {
        let range = self.range_of(node);
        self.error(
            codes::UNSUPPORTED_SYNTAX,
            range,
            format!("{what} is outside the sql/postgres-15 subset"),
            Some("see the core guide's subset and rewrite it with supported constructs".into()),
        );
    }

    fn refuse_statement(&mut self, statement: &Statement) {
        let rendered = statement.to_string();
        let words: Vec<&str> = rendered.split_whitespace().take(2).collect();
        let first = words.first().map(|w| w.to_uppercase()).unwrap_or_default();
        let shown = match first.as_str() {
            "CREATE" | "ALTER" | "DROP" | "SET" | "RESET" | "START" | "COPY" | "GRANT" | "REVOKE" => {
                words.join(" ").to_uppercase()
            }
            _ => first.clone(),
        };
        let hint = match first.as_str() {
            "BEGIN" | "START" | "COMMIT" | "END" | "ROLLBACK" | "SAVEPOINT" | "RELEASE" | "ABORT" => {
                "each Run is one transaction that the platform opens and ends (read-only when the plan only reads); remove the transaction control"
            }
            "SET" | "RESET" | "SHOW" => {
                "session settings, roles and authorization are the platform's; remove the statement"
            }
            _ => "sql/postgres-15 runs queries (SELECT, VALUES, WITH) and INSERT, UPDATE, DELETE only",
        };
        let range = self.range_of(statement);
        self.error(
            codes::STATEMENT_NOT_ALLOWED,
            range,
            format!("{shown} statements are not allowed and never reach the database"),
            Some(hint.into()),
        );
    }

    // ----- relations -----------------------------------------------------

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

    fn cte(&self, name: &str) -> Option<Columns> {
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

    fn aliased(columns: Columns, alias: Option<&TableAlias>) -> Columns {
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

    fn table_with_joins(&mut self, table: &TableWithJoins) {
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
    fn named_source(&mut self, name: &ObjectName, alias: Option<&TableAlias>, access: Access) -> Option<CatalogEntry> {
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

    // ----- queries -------------------------------------------------------

    fn top_query(&mut self, query: &Query) {
        self.top_level = true;
        self.query(query);
    }

    /// Analyzes a query in a new scope level; returns its output columns.
    fn query(&mut self, query: &Query) -> Columns {
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

    // ----- names ---------------------------------------------------------

    fn source_named(&self, name: &ObjectName) -> Option<Source> {
        let parts: Vec<String> = object_parts(name)?.into_iter().map(normalize).collect();
        self.frames.iter().rev().find_map(|frame| {
            frame
                .sources
                .iter()
                .find(|source| match (parts.as_slice(), &source.qualified) {
                    ([single], _) => source.name == *single,
                    ([schema, relation], Some((known_schema, known_relation))) => {
                        schema == known_schema && relation == known_relation
                    }
                    _ => false,
                })
                .cloned()
        })
    }

    fn source_hint(&self, name: &str) -> Option<String> {
        let names: Vec<String> = self.frames.iter().flat_map(|f| f.sources.iter().map(|s| s.name.clone())).collect();
        hint(name, names.iter().map(String::as_str).filter(|n| !n.is_empty()))
    }

    /// Resolves a column reference.
    fn column(&mut self, qualifier: &[&Ident], column: &Ident, range: TextRange, place: Place) {
        let name = normalize(column);
        if !qualifier.is_empty() {
            let object = ObjectName::from(qualifier.iter().map(|i| (*i).clone()).collect::<Vec<_>>());
            match self.source_named(&object) {
                Some(source) => {
                    if !source.columns.has(&name) {
                        let hint = match &source.columns {
                            Columns::Known(names) => hint(&name, names.iter().map(String::as_str)),
                            Columns::Open => None,
                        };
                        self.error(
                            codes::UNKNOWN_COLUMN,
                            range,
                            format!("column '{name}' does not exist in '{}'", source.name),
                            hint,
                        );
                    }
                }
                None => {
                    let hint = self.source_hint(&object.to_string());
                    self.error(
                        codes::UNKNOWN_TABLE,
                        range,
                        format!("'{object}' names no FROM item, alias or CTE in scope"),
                        hint,
                    );
                }
            }
            return;
        }
        // Innermost level first; correlated references reach outer levels.
        for level in (0..self.frames.len()).rev() {
            let frame = &self.frames[level];
            let holders: Vec<&Source> = frame.sources.iter().filter(|source| source.columns.has(&name)).collect();
            let known_holders: Vec<&Source> =
                holders.iter().copied().filter(|s| matches!(s.columns, Columns::Known(_))).collect();
            if known_holders.len() > 1 && !frame.merged.contains(&name) {
                let names: Vec<String> = known_holders.iter().map(|s| format!("{}.{name}", s.name)).collect();
                self.error(
                    codes::AMBIGUOUS_COLUMN,
                    range,
                    format!("column '{name}' is ambiguous: several FROM items have it"),
                    Some(format!("qualify it: {}", names.join(", "))),
                );
                return;
            }
            if !holders.is_empty() {
                return;
            }
            let is_output = place == Place::Ordering && level + 1 == self.frames.len() && frame.outputs.contains(&name);
            // A bare FROM-item name is a whole-row reference.
            let is_row = frame.sources.iter().any(|source| source.name == name);
            if is_output || is_row {
                return;
            }
        }
        let mut candidates: Vec<String> = Vec::new();
        for frame in self.frames.iter().rev() {
            for source in &frame.sources {
                if let Columns::Known(names) = &source.columns {
                    candidates.extend(names.iter().cloned());
                }
            }
            if place == Place::Ordering {
                candidates.extend(frame.outputs.iter().cloned());
            }
        }
        candidates.dedup();
        let hint = hint(&name, candidates.iter().map(String::as_str));
        self.error(
            codes::UNKNOWN_COLUMN,
            range,
            format!("column '{name}' does not exist in the tables of this query"),
            hint,
        );
    }

    // ----- expressions ---------------------------------------------------

    fn exprs<'e>(&mut self, exprs: impl IntoIterator<Item = &'e Expr>, place: Place) {
        for expr in exprs {
            self.expr(expr, place);
        }
    }

    fn expr(&mut self, expr: &Expr, place: Place) {
        match expr {
            Expr::Identifier(ident) => {
                let range = span_range(ident.span).unwrap_or(self.fallback);
                self.column(&[], ident, range, place);
            }
            Expr::CompoundIdentifier(idents) => {
                let range = self.range_of(expr);
                match idents.as_slice() {
                    [qualifier @ .., column] if (1..=2).contains(&qualifier.len()) => {
                        let qualifier: Vec<&Ident> = qualifier.iter().collect();
                        self.column(&qualifier, column, range, place);
                    }
                    _ => self.unsupported(expr, "a name with more than three parts"),
                }
            }
            Expr::IsFalse(e)
            | Expr::IsNotFalse(e)
            | Expr::IsTrue(e)
            | Expr::IsNotTrue(e)
            | Expr::IsNull(e)
            | Expr::IsNotNull(e)
            | Expr::IsUnknown(e)
            | Expr::IsNotUnknown(e)
            | Expr::Nested(e) => self.expr(e, place),
            Expr::IsDistinctFrom(a, b) | Expr::IsNotDistinctFrom(a, b) => {
                self.expr(a, place);
                self.expr(b, place);
            }
            Expr::In { expr: inner, target, .. } => {
                self.expr(inner, place);
                match target {
                    InTarget::List(list) => self.exprs(list, place),
                    InTarget::Subquery(query) => {
                        self.query(query);
                    }
                    _ => self.unsupported(expr, "this IN form"),
                }
            }
            Expr::Between { expr: inner, low, high, .. } => self.exprs([inner.as_ref(), low, high], place),
            Expr::BinaryOp { left, op, right } => {
                if matches!(op, sqlparser::ast::BinaryOperator::PGCustomBinaryOperator(_)) {
                    self.unsupported(expr, "OPERATOR(…)");
                }
                self.expr(left, place);
                self.expr(right, place);
            }
            Expr::Like { expr: inner, pattern, escape_char, .. }
            | Expr::ILike { expr: inner, pattern, escape_char, .. }
            | Expr::SimilarTo { expr: inner, pattern, escape_char, .. } => {
                self.expr(inner, place);
                self.expr(pattern, place);
                if let Some(escape) = escape_char {
                    self.expr(escape, place);
                }
            }
            Expr::AnyOp { left, right, .. } | Expr::AllOp { left, right, .. } => {
                self.expr(left, place);
                self.expr(right, place);
            }
            Expr::UnaryOp { expr: inner, .. } => self.expr(inner, place),
            Expr::Cast { expr: inner, data_type, format, kind, .. } => {
                if format.is_some() {
                    self.unsupported(expr, "CAST … FORMAT");
                }
                if matches!(kind, CastKind::TryCast | CastKind::SafeCast) {
                    self.unsupported(expr, "TRY_CAST and SAFE_CAST");
                }
                self.data_type(expr, data_type, "a cast to");
                self.expr(inner, place);
            }
            Expr::AtTimeZone { timestamp, time_zone } => {
                self.expr(timestamp, place);
                self.expr(time_zone, place);
            }
            Expr::Collate { expr: inner, collation } => {
                // An unqualified collation resolves in `pg_catalog` (a
                // Run's `search_path`); a qualified one would look in a
                // schema the caller may not see.
                if object_parts(collation).is_none_or(|parts| parts.len() != 1) {
                    self.error(
                        codes::TYPE_NOT_ALLOWED,
                        self.range_of(expr),
                        format!("the schema-qualified collation {collation} is not allowed"),
                        Some("name a built-in collation unqualified (COLLATE \"C\")".into()),
                    );
                }
                self.expr(inner, place);
            }
            Expr::Extract { expr: inner, .. } | Expr::Ceil { expr: inner, .. } | Expr::Floor { expr: inner, .. } => {
                self.expr(inner, place)
            }
            Expr::Position { expr: inner, r#in } => {
                self.expr(inner, place);
                self.expr(r#in, place);
            }
            Expr::Substring { expr: inner, substring_from, substring_for, .. } => {
                self.expr(inner, place);
                for part in [substring_from, substring_for].into_iter().flatten() {
                    self.expr(part, place);
                }
            }
            Expr::Trim { expr: inner, trim_what, trim_characters, .. } => {
                self.expr(inner, place);
                if let Some(what) = trim_what {
                    self.expr(what, place);
                }
                if let Some(characters) = trim_characters {
                    self.exprs(characters, place);
                }
            }
            Expr::Overlay { expr: inner, overlay_what, overlay_from, overlay_for } => {
                self.exprs([inner.as_ref(), overlay_what, overlay_from], place);
                if let Some(overlay_for) = overlay_for {
                    self.expr(overlay_for, place);
                }
            }
            Expr::Value(value) => {
                if let Value::Placeholder(text) = &value.value {
                    let number = text
                        .strip_prefix('$')
                        .filter(|digits| !digits.starts_with('0'))
                        .and_then(|digits| digits.parse::<u32>().ok());
                    let range = span_range(value.span);
                    self.placeholders.push(Placeholder { number, text: text.clone(), range });
                }
            }
            Expr::TypedString(typed) => {
                if typed.uses_odbc_syntax {
                    self.unsupported(expr, "an ODBC literal");
                }
                self.data_type(expr, &typed.data_type, "a typed literal of");
            }
            Expr::Function(function) => self.function(function, place),
            Expr::Case { operand, conditions, else_result, .. } => {
                if let Some(operand) = operand {
                    self.expr(operand, place);
                }
                for when in conditions {
                    self.expr(&when.condition, place);
                    self.expr(&when.result, place);
                }
                if let Some(else_result) = else_result {
                    self.expr(else_result, place);
                }
            }
            Expr::Exists { subquery, .. } | Expr::Subquery(subquery) => {
                self.query(subquery);
            }
            Expr::GroupingSets(sets) | Expr::Cube(sets) | Expr::Rollup(sets) => {
                for set in sets {
                    self.exprs(set, place);
                }
            }
            Expr::Tuple(items) => self.exprs(items, place),
            Expr::Array(array) => self.exprs(&array.elem, place),
            Expr::Interval(interval) => self.expr(&interval.value, place),
            Expr::Wildcard(_) | Expr::QualifiedWildcard(..) => {}
            other => self.unsupported(other, "this expression"),
        }
    }

    /// Checks a type named by a cast or a typed literal against the closed
    /// set of built-in types ([`crate::types`]). The findings depend only
    /// on the text written, never on the catalog, so a hidden relation's
    /// row type and a nonexistent one get the same answer (Part II §10.3).
    fn data_type(&mut self, expr: &Expr, data_type: &DataType, what: &str) {
        let range = self.range_of(expr);
        match types::check(data_type) {
            types::Verdict::Allowed => {}
            types::Verdict::CatalogLookup => self.error(
                codes::TYPE_NOT_ALLOWED,
                range,
                format!("{what} {data_type} looks names up in the system catalogs and is not allowed"),
                Some("compare names as text, or use the relations of the catalog".into()),
            ),
            types::Verdict::Unknown => self.error(
                codes::TYPE_NOT_ALLOWED,
                range,
                format!("{what} {data_type} names a type outside the built-in types this Language accepts"),
                Some(
                    "use a built-in type (the core guide lists them); a relation's row type or a type of a tenant schema is not accepted"
                        .into(),
                ),
            ),
        }
    }

    fn order_by_exprs(&mut self, items: &[OrderByExpr], place: Place) {
        for item in items {
            if item.with_fill.is_some() {
                self.unsupported(&item.expr, "WITH FILL");
            }
            self.expr(&item.expr, place);
        }
    }

    fn function(&mut self, function: &Function, place: Place) {
        let range = self.range_of(&function.name);
        match object_parts(&function.name).as_deref() {
            Some([name]) => {
                let name = normalize(name);
                if !codes::function_allowed(&name) {
                    let hint = hint(&name, codes::allowed_functions());
                    self.error(
                        codes::FUNCTION_NOT_ALLOWED,
                        range,
                        format!("function '{name}' is not on the allow-list"),
                        hint.map(|h| format!("{h} (allowed functions are listed in the core guide)")),
                    );
                }
            }
            _ => self.error(
                codes::FUNCTION_NOT_ALLOWED,
                range,
                format!("schema-qualified function '{}' is not allowed", function.name),
                Some("call allow-listed functions by their plain name".into()),
            ),
        }
        if function.uses_odbc_syntax || !matches!(function.parameters, FunctionArguments::None) {
            self.unsupported(function, "this function-call form");
        }
        match &function.args {
            FunctionArguments::None => {}
            FunctionArguments::Subquery(query) => {
                self.query(query);
            }
            FunctionArguments::List(list) => {
                for arg in &list.args {
                    let arg = match arg {
                        FunctionArg::Unnamed(arg) | FunctionArg::Named { arg, .. } => arg,
                        FunctionArg::ExprNamed { arg, .. } => arg,
                    };
                    match arg {
                        FunctionArgExpr::Expr(expr) => self.expr(expr, place),
                        FunctionArgExpr::Wildcard | FunctionArgExpr::QualifiedWildcard(_) => {}
                        FunctionArgExpr::WildcardWithOptions(_) => self.unsupported(function, "* with options"),
                    }
                }
                for clause in &list.clauses {
                    match clause {
                        FunctionArgumentClause::OrderBy(items) => self.order_by_exprs(items, place),
                        FunctionArgumentClause::IgnoreOrRespectNulls(_) => {}
                        _ => self.unsupported(function, "this function-argument clause"),
                    }
                }
            }
        }
        self.order_by_exprs(&function.within_group, place);
        if let Some(filter) = &function.filter {
            self.expr(filter, place);
        }
        match &function.over {
            Some(WindowType::WindowSpec(spec)) => {
                self.exprs(&spec.partition_by, place);
                self.order_by_exprs(&spec.order_by, place);
            }
            Some(WindowType::NamedWindow(_)) => self.unsupported(function, "a named window"),
            None => {}
        }
    }

    // ----- data-changing statements ----------------------------------------

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
    fn insert(&mut self, insert: &Insert) -> Class {
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

    fn update(&mut self, update: &Update) {
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

    fn delete(&mut self, delete: &Delete) {
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
