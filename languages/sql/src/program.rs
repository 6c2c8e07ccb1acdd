//! Parsing a program: the whole text with the PostgreSQL dialect, so a
//! comment can never hide a second statement from the validator; and
//! rendering: the text that will run is a checked parse tree rendered back
//! (comments dropped, relations schema-qualified by [`crate::qualify`]),
//! never a slice of the author's text.

use pilotage_guest_sdk::TextRange;
use pilotage_guest_sdk::diag::{error_in, text_range};
use pilotage_guest_sdk::{Diagnostic, TextPosition};
use sqlparser::ast::Statement;
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::keywords::Keyword;
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::{Span, Token, Tokenizer};

use crate::codes;

/// One parsed statement.
#[derive(Clone, Debug)]
pub struct Parsed {
    /// The syntax tree.
    pub statement: Statement,
    /// Where it sits in the program (1-based, end exclusive).
    pub range: TextRange,
}

/// The whole program: its statements, or the syntax error that stopped
/// parsing.
#[derive(Clone, Debug)]
pub struct Program {
    /// The statements in order.
    pub statements: Vec<Parsed>,
    /// The range covering the whole text (whole-document findings).
    pub whole: TextRange,
}

/// Parses `text` as PostgreSQL.
///
/// # Errors
/// A `syntax_error` diagnostic at the position where parsing stopped (the
/// whole text when the parser gives none), or for a text with no
/// statement.
pub fn parse(text: &str) -> Result<Program, Diagnostic> {
    let whole = whole_range(text);
    // Operator chains (`a + b + c …`) parse into trees as deep as they are
    // long without tripping the parser's recursion limit; every later pass
    // recurses over them, so their length is bounded up front.
    if let Ok(tokens) = Tokenizer::new(&PostgreSqlDialect {}, text).tokenize() {
        let operators = tokens.iter().filter(|token| is_operator(token)).count();
        if operators > codes::MAX_OPERATORS {
            return Err(error_in(
                codes::UNSUPPORTED_SYNTAX,
                whole,
                format!("the program has {operators} operators; the bound is {}", codes::MAX_OPERATORS),
            ));
        }
    }
    let statements = parse_statements(text).map_err(|error| syntax_error(&error, &whole))?;
    if statements.is_empty() {
        return Err(error_in(codes::SYNTAX_ERROR, whole, "the program holds no SQL statement"));
    }
    let parsed = statements
        .into_iter()
        .map(|statement| {
            let range = span_range(sqlparser::ast::Spanned::span(&statement)).unwrap_or(whole);
            Parsed { statement, range }
        })
        .collect();
    Ok(Program { statements: parsed, whole })
}

/// The text that runs for `statement` (the tree that was checked, with its
/// relations qualified): the tree rendered back.
///
/// # Errors
/// A `constraint` diagnostic at `range` when the text does not parse back
/// to exactly `statement`: what runs could then differ from what was
/// checked.
pub fn render(statement: &Statement, range: TextRange) -> Result<String, Diagnostic> {
    let rendered = statement.to_string();
    match parse_statements(&rendered) {
        Ok(again) if again.len() == 1 && again[0] == *statement => Ok(rendered),
        _ => Err(error_in(
            pilotage_guest_sdk::diag::CONSTRAINT,
            range,
            "this statement cannot be rendered back to the same statement, so it cannot be run safely; simplify it",
        )),
    }
}

/// Whether a token joins two expressions (and so may deepen a tree).
fn is_operator(token: &Token) -> bool {
    match token {
        Token::Word(word) => matches!(word.keyword, Keyword::AND | Keyword::OR),
        Token::Whitespace(_)
        | Token::Number(..)
        | Token::SingleQuotedString(_)
        | Token::DollarQuotedString(_)
        | Token::Comma
        | Token::LParen
        | Token::RParen
        | Token::Period
        | Token::SemiColon
        | Token::Placeholder(_)
        | Token::EOF => false,
        Token::Char(_) | Token::LBracket | Token::RBracket | Token::LBrace | Token::RBrace | Token::Colon => false,
        _ => !matches!(token, Token::Word(_)),
    }
}

fn parse_statements(text: &str) -> Result<Vec<Statement>, ParserError> {
    Parser::new(&PostgreSqlDialect {}).with_recursion_limit(codes::MAX_NESTING).try_with_sql(text)?.parse_statements()
}

fn syntax_error(error: &ParserError, whole: &TextRange) -> Diagnostic {
    let (message, at) = match error {
        ParserError::TokenizerError(message) | ParserError::ParserError(message) => {
            (message.clone(), position_in(message))
        }
        ParserError::RecursionLimitExceeded => {
            (format!("the statement nests deeper than {} levels; flatten it", codes::MAX_NESTING), None)
        }
    };
    let message = match message.find(" at Line: ") {
        Some(index) => message[..index].to_owned(),
        None => message,
    };
    let range = match at {
        Some((line, column)) => text_range((line, column), (line, column + 1)),
        None => *whole,
    };
    let hint = message
        .ends_with("found: ?")
        .then(|| "parameters are written $1, $2, …; their values come from input".to_owned());
    pilotage_guest_sdk::diag::with_hint(error_in(codes::SYNTAX_ERROR, range, format!("syntax error: {message}")), hint)
}

/// The `Line: X, Column: Y` position a parser message carries.
fn position_in(message: &str) -> Option<(u32, u32)> {
    let rest = &message[message.rfind("Line: ")? + "Line: ".len()..];
    let (line, rest) = rest.split_once(", Column: ")?;
    let column: String = rest.chars().take_while(char::is_ascii_digit).collect();
    Some((line.trim().parse().ok()?, column.parse().ok()?))
}

/// A text range from a parser span; `None` for an empty span.
pub fn span_range(span: Span) -> Option<TextRange> {
    if span.start.line == 0 || span.end.line == 0 {
        return None;
    }
    let clamp = |value: u64| u32::try_from(value).unwrap_or(u32::MAX);
    Some(TextRange {
        start: TextPosition { line: clamp(span.start.line), column: clamp(span.start.column) },
        end: TextPosition { line: clamp(span.end.line), column: clamp(span.end.column) },
    })
}

/// The range covering all of `text`: from 1:1 to just after its last
/// character.
pub fn whole_range(text: &str) -> TextRange {
    let lines: Vec<&str> = text.split('\n').collect();
    let last = lines.last().map_or(0, |line| line.chars().count());
    text_range((1, 1), (lines.len() as u32, last as u32 + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_do_not_hide_statements() {
        let program = parse("-- read the customers\nSELECT 1; /* and then */ DELETE FROM t").unwrap();
        assert_eq!(program.statements.len(), 2);
        let second = &program.statements[1];
        assert_eq!(render(&second.statement, second.range).unwrap(), "DELETE FROM t");
        assert_eq!(program.statements[0].range.start, TextPosition { line: 2, column: 1 });
    }

    #[test]
    fn syntax_errors_point_at_the_token() {
        let error = parse("SELECT name\nFROM customers WHERE id = = 1").unwrap_err();
        assert_eq!(error.code, codes::SYNTAX_ERROR);
        let pilotage_guest_sdk::Locator::Range(range) = error.path else { panic!("a range") };
        assert_eq!(range.start.line, 2);
        assert!(!error.message.contains("Line:"));
    }

    #[test]
    fn an_empty_program_is_a_syntax_error() {
        assert_eq!(parse("  -- nothing\n").unwrap_err().code, codes::SYNTAX_ERROR);
        assert_eq!(parse(";").unwrap_err().code, codes::SYNTAX_ERROR);
    }

    #[test]
    fn deep_nesting_is_bounded() {
        let deep = format!("SELECT {}1{}", "(".repeat(500), ")".repeat(500));
        assert_eq!(parse(&deep).unwrap_err().code, codes::SYNTAX_ERROR);
    }

    #[test]
    fn long_operator_chains_are_bounded() {
        let chain = |n: usize| format!("SELECT 1{}", " + 1".repeat(n));
        assert!(parse(&chain(codes::MAX_OPERATORS - 1)).is_ok());
        assert_eq!(parse(&chain(codes::MAX_OPERATORS + 1)).unwrap_err().code, codes::UNSUPPORTED_SYNTAX);
        let ands = format!("SELECT 1 WHERE true{}", " AND true".repeat(codes::MAX_OPERATORS + 1));
        assert_eq!(parse(&ands).unwrap_err().code, codes::UNSUPPORTED_SYNTAX);
    }

    #[test]
    fn whole_range_ends_after_the_last_character() {
        assert_eq!(whole_range("ab\ncd"), text_range((1, 1), (2, 3)));
    }
}
