//! The lookup and catalog-version vectors (PIL-LOOKUP-*, PIL-CATALOG-*):
//! listing, pagination, get and changed_since, and when the catalog
//! version moves (Part II §5.4, §6.3).

use serde_json::{Value, json};

use super::runner::{Check, Runner, RunnerError, skip};
use super::vector_file::{Vector, Verdict};

impl Runner<'_> {
    /// Runs `vector` when its id is one of PIL-LOOKUP-* and PIL-CATALOG-*: its
    /// verdict, or `None` for an id of another group.
    pub(super) async fn lookup_vector(
        &self,
        vector: &Vector,
        mut check: Check,
    ) -> Result<Option<Verdict>, RunnerError> {
        let b = self.binding;
        let language = self.entry.name.clone();
        match vector.id.as_str() {
            "PIL-LOOKUP-LIST-G" => {
                let list = self.catalog(json!({"verb": "list"})).await?;
                self.validates(&mut check, "CatalogListResult", &list);
                check.that(list["catalog_version"].is_string(), "no catalog_version");
                check.that(
                    list["items"].as_array().is_some_and(|items| {
                        items.iter().all(|i| i.get("risk").is_some() && i.get("risk_hints").is_some())
                    }),
                    "an entry lacks risk or risk_hints",
                );
            }
            "PIL-LOOKUP-PAGINATION-G" => {
                let all = self.catalog(json!({"verb": "list", "limit": 200})).await?;
                let mut expected: Vec<String> = all["items"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
                    .iter()
                    .filter_map(|i| i["id"].as_str().map(str::to_owned))
                    .collect();
                let mut seen = Vec::new();
                let mut cursor: Option<String> = None;
                for _ in 0..10_000 {
                    let mut args = json!({"verb": "list", "limit": 1});
                    if let Some(c) = &cursor {
                        args["cursor"] = json!(c);
                    }
                    let page = self.catalog(args).await?;
                    seen.extend(
                        page["items"]
                            .as_array()
                            .cloned()
                            .unwrap_or_default()
                            .iter()
                            .filter_map(|i| i["id"].as_str().map(str::to_owned)),
                    );
                    match page.get("next_cursor").and_then(Value::as_str) {
                        Some(next) => cursor = Some(next.to_owned()),
                        None => break,
                    }
                }
                let mut sorted = seen.clone();
                sorted.sort();
                sorted.dedup();
                expected.sort();
                check.that(sorted.len() == seen.len(), "a page repeated an entry");
                check.that(sorted == expected, "the pages do not cover the visible entries exactly once");
                check.that(expected.len() <= 1 || seen.len() > 1, "more than one entry but no next_cursor");
            }
            "PIL-LOOKUP-GET-UNKNOWN-B" => {
                let error =
                    self.catalog_error(json!({"verb": "get", "id": "no-such-entry"}), "not_found", &mut check).await?;
                check.that(
                    error.get("catalog_version").is_some_and(Value::is_string),
                    "no catalog_version beside the error",
                );
            }
            "PIL-LOOKUP-CHANGED-UNDECLARED-B" => {
                if self.declared("catalog.changed_since") {
                    return Ok(Some(skip(format!("{language} declares catalog.changed_since"))));
                }
                let version = self.catalog(json!({"verb": "list"})).await?["catalog_version"].clone();
                self.catalog_error(
                    json!({"verb": "changed_since", "catalog_version": version}),
                    "invalid_request",
                    &mut check,
                )
                .await?;
            }
            "PIL-LOOKUP-UNKNOWN-BASELINE-B" => {
                self.catalog_error(
                    json!({"verb": "changed_since", "catalog_version": "cv_unknown_baseline"}),
                    "unknown_baseline",
                    &mut check,
                )
                .await?;
            }
            "PIL-CATALOG-VERSION-STABLE-G" => {
                let first = self.catalog(json!({"verb": "list"})).await?["catalog_version"].clone();
                let second = self.catalog(json!({"verb": "list"})).await?["catalog_version"].clone();
                check.that(first == second && first.is_string(), "the token changed without a catalog change");
            }
            "PIL-CATALOG-VERSION-BUMPS-G" => {
                let (Some(operator), Some(entry)) = (self.operator, &b.changeable_entry) else {
                    return Ok(Some(skip(
                        "needs an operator to change a catalog entry (not available against an external endpoint)",
                    )));
                };
                let first = self.catalog(json!({"verb": "list"})).await?["catalog_version"].clone();
                operator.change_description(&language, entry).await?;
                let second = self.catalog(json!({"verb": "list"})).await?["catalog_version"].clone();
                check.that(first != second, "a description change did not move the token");
            }
            _ => return Ok(None),
        }
        Ok(Some(check.verdict()))
    }
}
