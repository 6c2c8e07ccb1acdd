//! Static analysis of one statement against the caller's visible catalog:
//! the statement class, name resolution (relations, CTEs, aliases,
//! columns, with scopes for subqueries), the function allow-list,
//! placeholders, and the relations it references, in resolution order
//! (Part II §5.5; Part IV §7).
//!
//! The walker is closed: every construct it does not know is
//! `unsupported_syntax`, so nothing unexamined can reach the database.
//!
//! This module holds the analysis's types and the [`Analyzer`]'s entry
//! point; the walk is split by construct: `relations` (FROM items and the
//! catalog), `queries` (query levels and SELECT lists), `names` (column
//! resolution), `expressions` (expressions, types and functions) and
//! `statements` (INSERT, UPDATE, DELETE). The parts call one another
//! through the analyzer's methods, as the grammar nests.

use std::collections::BTreeSet;
use std::rc::Rc;

use pilotage_guest_sdk::diag::{error_in, with_hint};
use pilotage_guest_sdk::{CatalogEntry, Diagnostic, RiskHints, Severity, TextRange};
use sqlparser::ast::{Ident, ObjectName, Spanned, Statement};
use sqlparser::tokenizer::Span;

use crate::program::span_range;
use crate::{codes, entry_id};

mod expressions;
mod names;
mod queries;
mod relations;
mod statements;

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
}
