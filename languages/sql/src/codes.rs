//! The closed sets of sql/postgres-15, declared once: the validator and
//! the executor emit these constants, and `describe` (and so the
//! closed-sets guide) lists these tables (Part II §1.5, §5.2).

/// The text does not parse as PostgreSQL, or holds no statement.
pub const SYNTAX_ERROR: &str = "syntax_error";
/// A FROM item, INSERT/UPDATE/DELETE target or column qualifier names no
/// visible table or view.
pub const UNKNOWN_TABLE: &str = "unknown_table";
/// An unqualified relation name matches visible relations in several
/// schemas.
pub const AMBIGUOUS_TABLE: &str = "ambiguous_table";
/// A column name matches no column of the relations in scope.
pub const UNKNOWN_COLUMN: &str = "unknown_column";
/// An unqualified column name matches columns of several relations in
/// scope.
pub const AMBIGUOUS_COLUMN: &str = "ambiguous_column";
/// The statement class is outside the Language (DDL, COPY, transaction
/// control, SET, locking reads, SELECT INTO, writable CTEs, …).
pub const STATEMENT_NOT_ALLOWED: &str = "statement_not_allowed";
/// A function call outside the allow-list.
pub const FUNCTION_NOT_ALLOWED: &str = "function_not_allowed";
/// A cast or typed literal names a type outside the built-in set
/// ([`crate::types`]), or a collation is schema-qualified, or a relation
/// has a column of a `reg*` type.
pub const TYPE_NOT_ALLOWED: &str = "type_not_allowed";
/// Several statements where one is expected (a data-changing statement
/// must be the program's only statement), or more statements than the
/// bound.
pub const MULTIPLE_STATEMENTS: &str = "multiple_statements";
/// Placeholders are not `$1…$n`, leave a gap, or a statement uses `$k`
/// without `$1…$k-1`.
pub const PARAMETER_MISMATCH: &str = "parameter_mismatch";
/// A construct PostgreSQL accepts but the Language's subset does not.
pub const UNSUPPORTED_SYNTAX: &str = "unsupported_syntax";
/// A data-changing statement targets a relation the data source's role may
/// not change that way.
pub const READ_ONLY_RELATION: &str = "read_only_relation";
/// Warning: `SELECT *` (or `t.*`) in a statement's result columns.
pub const SELECT_STAR: &str = "select_star";
/// Warning: a query returns table rows without LIMIT (and without
/// aggregating them).
pub const NO_LIMIT: &str = "no_limit";
/// Warning: UPDATE or DELETE without WHERE changes every row.
pub const MISSING_WHERE: &str = "missing_where";

/// Every sql/postgres-15 diagnostic code besides the reserved three, with
/// its meaning, in the order the closed-sets guide lists them.
pub const OWN_CODES: [(&str, &str); 15] = [
    (
        SYNTAX_ERROR,
        "Error. The text does not parse as PostgreSQL, or holds no statement; the range points at the token where parsing stopped.",
    ),
    (
        UNKNOWN_TABLE,
        "Error. A FROM item, an INSERT/UPDATE/DELETE target, or a column qualifier (`o.total`) names no visible table, view, CTE or alias; the hint names visible relations or aliases with close names.",
    ),
    (
        AMBIGUOUS_TABLE,
        "Error. An unqualified relation name matches visible relations in several schemas; qualify it (`schema.table`).",
    ),
    (
        UNKNOWN_COLUMN,
        "Error. A column matches no column of the relations in scope; the hint names close column names of those relations.",
    ),
    (
        AMBIGUOUS_COLUMN,
        "Error. An unqualified column matches columns of several relations in the same FROM clause; qualify it with a table name or alias (the hint lists the candidates).",
    ),
    (
        STATEMENT_NOT_ALLOWED,
        "Error. The statement class is outside the Language: DDL (CREATE, ALTER, DROP, TRUNCATE, …), COPY, transaction control (BEGIN, COMMIT, ROLLBACK, SAVEPOINT, SET TRANSACTION), any SET/RESET/SHOW (roles, session authorization, settings), GRANT, CALL, DO, PREPARE/EXECUTE, LOCK, LISTEN/NOTIFY, VACUUM, EXPLAIN, MERGE; and inside a query: SELECT … INTO, FOR UPDATE/SHARE locking clauses, and data-changing statements inside WITH (writable CTEs).",
    ),
    (
        FUNCTION_NOT_ALLOWED,
        "Error. A function call outside the allow-list (see the core guide), or a schema-qualified function name. Functions that sleep, write, reach other servers or read files (`pg_sleep`, `set_config`, `nextval`, `dblink`, `lo_*`, `pg_read_file`, …) are never allowed, nor any that takes a relation or object name as text (`to_regclass`, `pg_relation_size`, `has_table_privilege`, `currval`, `pg_get_viewdef`, …): the allow-list holds only functions that compute a value from their arguments.",
    ),
    (
        TYPE_NOT_ALLOWED,
        "Error. A cast (`::`, `CAST(… AS …)`) or typed literal (`DATE '…'`) names a type outside the built-in types the core guide lists: a relation's row type (`NULL::s.t`, `'(,)'::t`), a type of a tenant schema (`'x'::app.mood`), any schema-qualified type, or a `reg*` object-identifier type or array of one (`regclass`, `regtype`, `regproc`, `regprocedure`, `regoper`, `regoperator`, `regnamespace`, `regrole`, `regconfig`, `regdictionary`, `regcollation`: `'{…}'::regclass[]`, `regclass 'x'`); or a collation is schema-qualified; or a relation has a column of a `reg*` type. Rationale: these names resolve in the database's catalogs, not in your visible catalog. The finding depends only on the text, so a hidden relation and a nonexistent one get the same answer.",
    ),
    (
        MULTIPLE_STATEMENTS,
        "Error. The program holds several statements and one of them changes data (a data-changing statement must be the program's only statement), or it holds more statements than the bound of 16.",
    ),
    (
        PARAMETER_MISMATCH,
        "Error. A placeholder is not of the form `$1…$n` (`?`, `:name`, `$name`), the program's placeholders leave a gap, or one statement uses `$k` without every `$1…$k-1`.",
    ),
    (
        UNSUPPORTED_SYNTAX,
        "Error. PostgreSQL accepts the construct but the sql/postgres-15 subset does not (see the core guide's subset), or the program holds more than 1000 operators, or a `*` would give one query more than 1664 result columns; rewrite it with supported constructs.",
    ),
    (
        READ_ONLY_RELATION,
        "Error. An INSERT targets a relation whose catalog entry is `safe` (the data source's role may not change it), or an UPDATE, an `INSERT … ON CONFLICT … DO UPDATE` or a DELETE targets one whose entry is not `destructive` (the role may not overwrite or delete its rows).",
    ),
    (
        SELECT_STAR,
        "Warning. `*` or `t.*` in the result columns: the columns returned change when the table does. The program stays valid.",
    ),
    (
        NO_LIMIT,
        "Warning. A query returns table rows without LIMIT or FETCH and without aggregating them; the data source caps the rows returned (`truncated` in the trace). The program stays valid.",
    ),
    (MISSING_WHERE, "Warning. UPDATE or DELETE without WHERE changes every row of the table. The program stays valid."),
];

/// Engine-defined run status: a statement, or the COMMIT, failed and the
/// Run's one transaction was rolled back. The platform reports it too for
/// a COMMIT the database refused (the host commits, after the component
/// has returned).
pub const ROLLED_BACK: &str = "rolled_back";

/// Engine-defined run statuses beyond the reserved and platform ones:
/// (status, ok, side effects possible, meaning).
pub const OWN_RUN_STATUSES: [(&str, bool, bool, &str); 1] = [(
    ROLLED_BACK,
    false,
    false,
    "A statement failed in the database (a constraint or permission error, a type error in a parameter, the data source's statement timeout, …), or every statement succeeded and the database refused the COMMIT (a deferred constraint, a serialization failure). The Run's one transaction was rolled back, so nothing the program did persists. The trace shows the statements that ran and, for a failed statement, that one too, whose `outcome.error` carries the database's message; for a refused COMMIT the Run's `outcome.error` does. When the Run's wall-time bound stops a statement (its statement timeout is never more than the time the Run has left), the Run ends `timeout` instead, rolled back too. `error` is reported only when the platform refuses a statement (no data source is attached) or cannot know whether COMMIT took effect (the connection failed during it).",
)];

/// Step-level statuses: (status, ok, side effects possible, meaning).
pub const STEP_STATUSES: [(&str, bool, bool, &str); 2] = [
    (
        "success",
        true,
        true,
        "The statement ran (for a reference sub-step: its statement ran). Changes are committed only when the whole Run succeeds.",
    ),
    (
        "error",
        false,
        false,
        "The statement failed or was refused; the Run stops here and its transaction is rolled back (for a reference sub-step: its statement failed).",
    ),
];

/// The catalog entry kinds sql/postgres-15 understands: (kind, callable,
/// meaning).
pub const ENTRY_KINDS: [(&str, bool, &str); 2] = [
    (
        "table",
        false,
        "A table the data source's role can see, id `schema.table`: each part is written bare when it matches `[a-z_][a-z0-9_]*` and double-quoted otherwise, with `\"` doubled inside, as PostgreSQL quotes identifiers (`sales.orders`, `sales.\"Orders\"`, `a.\"b.c\"` for table `b.c` in schema `a`, `\"a.b\".c` for table `c` in schema `a.b`, `s.\"café\"`), so every table has exactly one id and no two tables share one. Statements read or change it; it is not called. Its `output_schema` describes one row (columns, JSON types, nullability); a writable table also has an `input_schema` (the row shape for INSERT/UPDATE).",
    ),
    (
        "view",
        false,
        "A view (or materialized view) the role can see, id `schema.view` written by the same rule as a table's; read like a table. `output_schema` describes one row.",
    ),
];

/// Risk levels: (risk, readOnly, destructive, openWorld, meaning).
pub const RISK_LEVELS: [(&str, bool, bool, bool, &str); 3] = [
    ("safe", true, false, false, "Reads only. A statement: a query. An entry: the role may only read the relation."),
    (
        "write",
        false,
        false,
        false,
        "Adds rows and overwrites nothing. A statement: INSERT (without `ON CONFLICT … DO UPDATE`), and its target relation. An entry: the role may INSERT into it and not UPDATE, DELETE or TRUNCATE it.",
    ),
    (
        "destructive",
        false,
        true,
        false,
        "May alter state irreversibly (Part II §5.3): overwrite values or delete rows. A statement: UPDATE, `INSERT … ON CONFLICT … DO UPDATE` and DELETE, and their target relation. An entry: the role may UPDATE, DELETE from or TRUNCATE it. A Host asks for approval before running it.",
    ),
];

/// The risk label for hints: the highest level they reach.
pub fn risk_label(read_only: bool, destructive: bool) -> &'static str {
    match (read_only, destructive) {
        (_, true) => "destructive",
        (false, false) => "write",
        (true, false) => "safe",
    }
}

/// The most statements one program may hold.
pub const MAX_STATEMENTS: usize = 16;

/// The most operators (`+`, `=`, `AND`, …) one program may hold: an
/// operator chain parses into a tree as deep as it is long, and the
/// validator must stay within the component's stack.
pub const MAX_OPERATORS: usize = 1000;

/// The most result columns one query level may carry, as PostgreSQL bounds
/// a target list (its `MaxTupleAttributeNumber`). A `*` that would pass it
/// is an `unsupported_syntax` error and the query's columns are no longer
/// followed: this keeps validation linear where `SELECT *` over self-joined
/// CTEs would double the columns per level (Part II §10.1).
pub const MAX_COLUMNS: usize = 1664;

/// How deep the parser may nest expressions and subqueries before it
/// reports a `syntax_error` (bounds validation, Part II §10.1).
pub const MAX_NESTING: usize = 64;

/// The aggregate functions a statement may call (lower-case, unqualified).
/// A query whose result columns aggregate does not earn `no_limit`.
pub const AGGREGATE_FUNCTIONS: [&str; 26] = [
    "count",
    "sum",
    "avg",
    "min",
    "max",
    "string_agg",
    "array_agg",
    "bool_and",
    "bool_or",
    "every",
    "json_agg",
    "jsonb_agg",
    "json_object_agg",
    "jsonb_object_agg",
    "stddev",
    "stddev_pop",
    "stddev_samp",
    "variance",
    "var_pop",
    "var_samp",
    "percentile_cont",
    "percentile_disc",
    "mode",
    "corr",
    "covar_pop",
    "covar_samp",
];

/// The window and scalar functions a statement may call (lower-case,
/// unqualified): each only computes a value from its arguments, or reads
/// the clock. Together with [`AGGREGATE_FUNCTIONS`] this is the whole
/// allow-list; everything else is [`FUNCTION_NOT_ALLOWED`]. Rationale: an
/// allow-list is closed and reviewable; a deny-list of dangerous functions
/// is neither.
pub const SCALAR_FUNCTIONS: [&str; 79] = [
    // window functions
    "row_number",
    "rank",
    "dense_rank",
    "percent_rank",
    "cume_dist",
    "ntile",
    "lag",
    "lead",
    "first_value",
    "last_value",
    "nth_value",
    // conditional and comparison
    "coalesce",
    "nullif",
    "greatest",
    "least",
    // numbers
    "abs",
    "ceil",
    "ceiling",
    "floor",
    "round",
    "trunc",
    "mod",
    "power",
    "sqrt",
    "sign",
    "div",
    "exp",
    "ln",
    "log",
    "width_bucket",
    // text
    "lower",
    "upper",
    "initcap",
    "length",
    "char_length",
    "character_length",
    "octet_length",
    "concat",
    "concat_ws",
    "replace",
    "left",
    "right",
    "lpad",
    "rpad",
    "ltrim",
    "rtrim",
    "btrim",
    "split_part",
    "strpos",
    "starts_with",
    "reverse",
    "repeat",
    "format",
    "md5",
    "regexp_replace",
    "regexp_match",
    // dates and times
    "now",
    "current_date",
    "current_time",
    "current_timestamp",
    "localtime",
    "localtimestamp",
    "date_trunc",
    "date_part",
    "age",
    "make_date",
    "make_timestamp",
    "to_char",
    "to_date",
    "to_timestamp",
    "to_number",
    // json and arrays
    "to_json",
    "to_jsonb",
    "json_build_object",
    "jsonb_build_object",
    "json_build_array",
    "jsonb_build_array",
    "array_length",
    "cardinality",
];

/// Whether `name` (already normalized) is on the allow-list.
pub fn function_allowed(name: &str) -> bool {
    AGGREGATE_FUNCTIONS.contains(&name) || SCALAR_FUNCTIONS.contains(&name)
}

/// The whole allow-list, aggregates first.
pub fn allowed_functions() -> impl Iterator<Item = &'static str> {
    AGGREGATE_FUNCTIONS.iter().chain(SCALAR_FUNCTIONS.iter()).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_allow_list_has_no_duplicates_and_no_dangerous_names() {
        let mut sorted: Vec<&str> = allowed_functions().collect();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), AGGREGATE_FUNCTIONS.len() + SCALAR_FUNCTIONS.len());
        for dangerous in ["pg_sleep", "set_config", "nextval", "setval", "dblink", "lo_import", "pg_read_file"] {
            assert!(!function_allowed(dangerous), "{dangerous}");
        }
    }

    #[test]
    fn risk_labels_follow_hints() {
        assert_eq!(risk_label(true, false), "safe");
        assert_eq!(risk_label(false, false), "write");
        assert_eq!(risk_label(false, true), "destructive");
    }
}
