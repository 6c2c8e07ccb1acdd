//! Column name resolution through the scope levels of a statement:
//! qualified names, correlated references to outer levels, output names in
//! ORDER BY and GROUP BY, ambiguity and "did you mean" hints.

use pilotage_guest_sdk::TextRange;
use pilotage_guest_sdk::hints::hint;
use sqlparser::ast::{Ident, ObjectName};

use super::{Analyzer, Columns, Place, Source, normalize, object_parts};
use crate::codes;

impl<'r, 'c> Analyzer<'r, 'c> {
    pub(super) fn source_named(&self, name: &ObjectName) -> Option<Source> {
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

    pub(super) fn source_hint(&self, name: &str) -> Option<String> {
        let names: Vec<String> = self.frames.iter().flat_map(|f| f.sources.iter().map(|s| s.name.clone())).collect();
        hint(name, names.iter().map(String::as_str).filter(|n| !n.is_empty()))
    }

    /// Resolves a column reference.
    pub(super) fn column(&mut self, qualifier: &[&Ident], column: &Ident, range: TextRange, place: Place) {
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
}
