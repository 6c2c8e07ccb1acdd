//! Expressions: the closed walk over the expression forms of the subset,
//! placeholders, the closed set of types in casts and typed literals, and
//! the function allow-list.

use pilotage_guest_sdk::hints::hint;
use sqlparser::ast::{
    CastKind, DataType, Expr, Function, FunctionArg, FunctionArgExpr, FunctionArgumentClause, FunctionArguments, Ident,
    InTarget, OrderByExpr, Value, ValueWithSpan, WindowType,
};

use super::{Analyzer, Place, Placeholder, normalize, object_parts};
use crate::program::span_range;
use crate::{codes, types};

impl<'r, 'c> Analyzer<'r, 'c> {
    fn exprs<'e>(&mut self, exprs: impl IntoIterator<Item = &'e Expr>, place: Place) {
        for expr in exprs {
            self.expr(expr, place);
        }
    }

    pub(super) fn expr(&mut self, expr: &Expr, place: Place) {
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
            Expr::Value(value) => self.placeholder(value),
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
            other => {
                if !self.keyword_form(other, place) {
                    self.unsupported(other, "this expression");
                }
            }
        }
    }

    /// Walks the expression forms PostgreSQL writes with keywords rather
    /// than as a call (CAST, AT TIME ZONE, COLLATE, EXTRACT, CEIL, FLOOR,
    /// POSITION, SUBSTRING, TRIM, OVERLAY, typed literals), checking the
    /// types and collations they name. Returns whether `expr` was one of
    /// them; [`Self::expr`] refuses the rest as unsupported.
    fn keyword_form(&mut self, expr: &Expr, place: Place) -> bool {
        match expr {
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
            Expr::TypedString(typed) => {
                if typed.uses_odbc_syntax {
                    self.unsupported(expr, "an ODBC literal");
                }
                self.data_type(expr, &typed.data_type, "a typed literal of");
            }
            _ => return false,
        }
        true
    }

    /// Records a placeholder (`$n`, `?`, `:name`) in the order written;
    /// any other literal needs no check.
    fn placeholder(&mut self, value: &ValueWithSpan) {
        if let Value::Placeholder(text) = &value.value {
            let number = text
                .strip_prefix('$')
                .filter(|digits| !digits.starts_with('0'))
                .and_then(|digits| digits.parse::<u32>().ok());
            let range = span_range(value.span);
            self.placeholders.push(Placeholder { number, text: text.clone(), range });
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
}
