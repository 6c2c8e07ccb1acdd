//! The validate vectors (PIL-VALIDATE-*): findings, plans, context
//! binding, bounds and side-effect freedom of validation (Part II §6.4,
//! §10.1).

use serde_json::{Value, json};

use super::runner::{Check, Runner, RunnerError, skip};
use super::vector_file::{Vector, Verdict};

impl Runner<'_> {
    /// Runs `vector` when its id is one of PIL-VALIDATE-*: its verdict, or
    /// `None` for an id of another group.
    pub(super) async fn validate_vector(
        &self,
        vector: &Vector,
        mut check: Check,
    ) -> Result<Option<Verdict>, RunnerError> {
        let b = self.binding;
        let language = self.entry.name.clone();
        match vector.id.as_str() {
            "PIL-VALIDATE-GOOD-G" => {
                let response = self.validate_ok(&b.valid.program, None, &mut check).await?;
                check.that(response["valid"] == true, "valid is not true");
                check.that(!has_error(&response), "an error-severity diagnostic");
                check.that(
                    response.get("plan").is_some() == self.declared("plan"),
                    "plan presence does not follow the plan capability",
                );
                if let Some(plan) = response.get("plan") {
                    self.validates(&mut check, "Plan", plan);
                }
                check.that(
                    response.get("catalog_version").is_some() == self.declared("catalog"),
                    "catalog_version presence does not follow catalog",
                );
            }
            "PIL-VALIDATE-UNKNOWN-NAME-B" => {
                let response = self.validate_ok(&b.unknown_name.program, None, &mut check).await?;
                check.that(response["valid"] == false, "valid is not false");
                let body = self.closed_sets_body().await?;
                let codes: Vec<String> = response["diagnostics"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
                    .iter()
                    .filter_map(|d| d["code"].as_str().map(str::to_owned))
                    .collect();
                check.that(
                    codes.iter().any(|c| body.contains(c.as_str())),
                    "no diagnostic code is enumerated by the closed-sets guide",
                );
                let pointer_dialect = self.entry.locator == pilotage_protocol::manifest::LocatorDialect::JsonPointer;
                check.that(
                    response["diagnostics"]
                        .as_array()
                        .is_some_and(|d| d.iter().all(|d| d["path"].is_string() == pointer_dialect)),
                    "a path does not use the declared locator dialect",
                );
            }
            "PIL-VALIDATE-WARNINGS-ONLY-G" => {
                let response = self.validate_ok(&b.warnings_only.program, None, &mut check).await?;
                let diagnostics = response["diagnostics"].as_array().cloned().unwrap_or_default();
                check.that(response["valid"] == true, "valid is not true");
                check.that(
                    !diagnostics.is_empty() && diagnostics.iter().all(|d| d["severity"] == "warning"),
                    "not warnings only",
                );
                check.that(
                    response.get("plan").is_some() == self.declared("plan"),
                    "plan presence does not follow the plan capability",
                );
            }
            "PIL-VALIDATE-SIDE-EFFECT-FREE-G" => {
                for _ in 0..3 {
                    self.validate_ok(&b.valid.program, None, &mut check).await?;
                }
                if self.operator.is_none() {
                    return Ok(Some(skip(
                        "needs an operator to observe side effects (not available against an external endpoint)",
                    )));
                }
                self.side_effect_free(&mut check);
            }
            "PIL-VALIDATE-RESERVED-CHARS-B" => {
                let Some(sample) = &b.reserved_character else {
                    return Ok(Some(skip(format!("{language} has no author-chosen step identifiers"))));
                };
                let response = self.validate_ok(&sample.program, None, &mut check).await?;
                check.that(response["valid"] == false, "valid is not false");
                check.that(
                    response["diagnostics"].as_array().is_some_and(|d| {
                        d.iter().any(|d| d["message"].as_str().is_some_and(|m| m.contains('#') || m.contains('/')))
                    }),
                    "no diagnostic reports the reserved character",
                );
            }
            "PIL-VALIDATE-CONTEXT-UNDECLARED-B" => {
                if self.entry.context_schema.is_some() {
                    return Ok(Some(skip(format!("{language} declares a context_schema"))));
                }
                let response = self.validate_ok(&b.valid.program, Some(&json!({"any": "value"})), &mut check).await?;
                check.that(response["valid"] == false, "valid is not false");
                check.that(
                    response["diagnostics"]
                        .as_array()
                        .is_some_and(|d| d.iter().any(|d| d["code"] == "context_binding")),
                    "no context_binding diagnostic",
                );
            }
            "PIL-VALIDATE-CONTEXT-MISSING-B" => {
                if self.entry.context_schema.is_none() {
                    return Ok(Some(skip(format!(
                        "{language} declares no context_schema, so no context can be missing"
                    ))));
                }
                let response = self.validate_ok(&b.valid.program, None, &mut check).await?;
                check.that(response["valid"] == false, "valid is not false");
                check.that(
                    response["diagnostics"]
                        .as_array()
                        .is_some_and(|d| d.iter().any(|d| d["code"] == "context_binding")),
                    "no context_binding diagnostic",
                );
            }
            "PIL-VALIDATE-BOUNDS-B" => {
                let started = std::time::Instant::now();
                self.expect_error(
                    &mut check,
                    &self.entry.loop_tools.validate.clone(),
                    json!({self.argument()?: b.pathological.program}),
                    "bounds_exceeded",
                )
                .await?;
                check.that(
                    started.elapsed() < std::time::Duration::from_secs(30),
                    "the request did not terminate within its bound",
                );
            }
            "PIL-VALIDATE-CONSTRAINT-FALLBACK-B" => {
                let body = self.closed_sets_body().await?;
                check.that(body.contains("constraint"), "constraint is not enumerated in the closed-sets guide");
            }
            _ => return Ok(None),
        }
        Ok(Some(check.verdict()))
    }
}

/// Whether a response carries an error-severity diagnostic.
fn has_error(response: &Value) -> bool {
    response["diagnostics"].as_array().is_some_and(|d| d.iter().any(|d| d["severity"] == "error"))
}
