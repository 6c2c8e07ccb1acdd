//! Schema-qualification of a checked statement for execution: every
//! relation name the analyzer resolved to a catalog relation is rewritten
//! to the quoted `"schema"."relation"` it resolved to; CTE names stay as
//! written.
//!
//! Rationale: validation resolves a name against the caller's visible
//! catalog, the database against its `search_path`. Sent as written, an
//! unqualified `payroll` checked as the visible `a.payroll` could run as a
//! hidden `b.payroll` that comes first in the path, and the trace would
//! name the table the caller may see. Only what was validated may run
//! (Part II §6.5.4), so the statement that runs names exactly the
//! relations that were checked, whatever the database's `search_path`
//! (the data source also sets it to `pg_catalog, pg_temp`, so no
//! unqualified name reaches a tenant schema).
//!
//! No alias is added: PostgreSQL names an unaliased `"a"."payroll"` in
//! scope as `payroll`, so `payroll.salary` still binds, and so does the
//! qualified `a.payroll.salary` the analyzer also accepts (an alias would
//! hide that form).
//!
//! The walk is closed like the analyzer: a relation name in the tree that
//! the analyzer did not resolve, or a resolved name the walk does not
//! meet, fails the qualification (the statement is then not run).

use std::ops::ControlFlow;

use sqlparser::ast::{Ident, ObjectName, Spanned, Statement, visit_relations_mut};
use sqlparser::tokenizer::Span;

use crate::analyze::{RelationName, Resolution};

/// `statement` with each name of `names` rewritten as it resolved: a
/// catalog relation as `"schema"."relation"`, a CTE unchanged.
///
/// # Errors
/// A message when the relation names in the tree and `names` do not
/// correspond one to one (by position).
pub fn qualify(statement: &Statement, names: &[RelationName]) -> Result<Statement, String> {
    let mut runnable = statement.clone();
    let mut met = vec![false; names.len()];
    let mut problem = None;
    let _ = visit_relations_mut(&mut runnable, |name: &mut ObjectName| {
        let span = name.span();
        let found =
            names.iter().enumerate().find(|(index, known)| !met[*index] && known.span == span && span != Span::empty());
        match found {
            Some((index, known)) => {
                met[index] = true;
                if let Resolution::Relation { schema, relation } = &known.resolution {
                    *name = ObjectName::from(vec![
                        Ident::with_quote_and_span('"', span, schema),
                        Ident::with_quote_and_span('"', span, relation),
                    ]);
                }
                ControlFlow::Continue(())
            }
            None => {
                problem = Some(format!("the relation name '{name}' was not resolved by the validator"));
                ControlFlow::Break(())
            }
        }
    });
    if let Some(problem) = problem {
        return Err(problem);
    }
    if met.iter().any(|met| !met) {
        return Err("a relation name the validator resolved is not where it was found".into());
    }
    Ok(runnable)
}

#[cfg(test)]
mod tests {
    use sqlparser::dialect::PostgreSqlDialect;
    use sqlparser::parser::Parser;

    use super::*;

    fn parse(text: &str) -> Statement {
        Parser::parse_sql(&PostgreSqlDialect {}, text).unwrap().remove(0)
    }

    fn relation_at(statement: &Statement, schema: &str, relation: &str) -> RelationName {
        let mut spans = Vec::new();
        let _ = sqlparser::ast::visit_relations(statement, |name| {
            spans.push(name.span());
            ControlFlow::<()>::Continue(())
        });
        RelationName {
            span: spans[0],
            resolution: Resolution::Relation { schema: schema.into(), relation: relation.into() },
        }
    }

    #[test]
    fn a_resolved_name_is_quoted_and_qualified() {
        let statement = parse("SELECT payroll.salary FROM payroll");
        let names = [relation_at(&statement, "A", "pay\"roll")];
        let qualified = qualify(&statement, &names).unwrap();
        assert_eq!(qualified.to_string(), "SELECT payroll.salary FROM \"A\".\"pay\"\"roll\"");
    }

    #[test]
    fn a_name_the_validator_did_not_resolve_fails_closed() {
        let statement = parse("SELECT 1 FROM a JOIN b ON true");
        let names = [relation_at(&statement, "s", "a")];
        assert!(qualify(&statement, &names).unwrap_err().contains("'b'"));
        let elsewhere = RelationName { span: Span::empty(), resolution: Resolution::Cte };
        assert!(qualify(&parse("SELECT 1"), &[elsewhere]).is_err());
    }
}
