//! The execute and authorization vectors (PIL-EXECUTE-*, PIL-AUTHZ-*):
//! outcomes, drift, runnables, idempotency, storage, and what a caller
//! may not see (Part II §6.5, §6.6, §10.3).

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::runner::{Check, Runner, RunnerError, skip};
use super::vector_file::{Vector, Verdict};
use crate::connection::Reply;

impl Runner<'_> {
    /// Runs `vector` when its id is one of PIL-EXECUTE-* and PIL-AUTHZ-*: its
    /// verdict, or `None` for an id of another group.
    pub(super) async fn execute_vector(
        &self,
        vector: &Vector,
        mut check: Check,
    ) -> Result<Option<Verdict>, RunnerError> {
        let b = self.binding;
        let language = self.entry.name.clone();
        match vector.id.as_str() {
            "PIL-EXECUTE-SUCCESS-G" => return self.execute_success(check).await.map(Some),
            "PIL-EXECUTE-GUARD-B" => {
                let response = self.execute_ok(self.sample_args(&b.invalid)?, &mut check).await?;
                check.that(response["outcome"]["status"] == "validation_error", "status is not validation_error");
                check.that(response["diagnostics"].as_array().is_some_and(|d| !d.is_empty()), "no diagnostics");
                check.that(response["run_id"].is_string(), "no run_id");
                self.side_effect_free(&mut check);
            }
            "PIL-EXECUTE-DRIFT-B" => {
                let mut args = self.sample_args(&b.valid)?;
                args["expected_catalog_version"] = json!("cv_stale_token");
                let response = self.execute_ok(args, &mut check).await?;
                check.that(response["outcome"]["status"] == "catalog_drift", "status is not catalog_drift");
                self.side_effect_free(&mut check);
            }
            "PIL-EXECUTE-DRIFT-BEFORE-VALIDATION-B" => {
                let mut args = self.sample_args(&b.invalid)?;
                args["expected_catalog_version"] = json!("cv_stale_token");
                let response = self.execute_ok(args, &mut check).await?;
                check.that(
                    response["outcome"]["status"] == "catalog_drift",
                    "drift was not checked before revalidation",
                );
            }
            "PIL-EXECUTE-PROMOTION-DRIFT-B" => return self.execute_promotion_drift(check).await.map(Some),
            "PIL-EXECUTE-BOTH-RUNNABLES-B" => {
                let mut args = self.sample_args(&b.valid)?;
                args["program_ref"] = json!("prog_any");
                self.expect_error(&mut check, &self.execute_tool()?, args, "invalid_request").await?;
            }
            "PIL-EXECUTE-NO-RUNNABLE-B" => {
                let args = self.with_execute_arguments(json!({"input": {"x": 1}}));
                self.expect_error(&mut check, &self.execute_tool()?, args, "invalid_request").await?;
            }
            "PIL-EXECUTE-INPUT-BINDING-B" => return self.execute_input_binding(check).await.map(Some),
            "PIL-EXECUTE-UNKNOWN-TRACE-LEVEL-B" => {
                let mut args = self.sample_args(&b.valid)?;
                args["trace_level"] = json!("verbose");
                self.expect_error(&mut check, &self.execute_tool()?, args, "invalid_request").await?;
            }
            "PIL-EXECUTE-TEST-RUN-UNDECLARED-B" => {
                if self.declared("execute.test_run") {
                    return Ok(Some(skip(format!("{language} declares execute.test_run"))));
                }
                let mut args = self.sample_args(&b.valid)?;
                args["test_run"] = json!(true);
                self.expect_error(&mut check, &self.execute_tool()?, args, "invalid_request").await?;
            }
            "PIL-EXECUTE-MODE-MISSING-B" => {
                if self.entry.execution != Some(pilotage_protocol::manifest::ExecutionMode::Both) {
                    return Ok(Some(skip(format!("{language} does not execute both ways, so mode is never required"))));
                }
                let mut args = self.sample_args(&b.valid)?;
                if let Some(members) = args.as_object_mut() {
                    members.remove("mode");
                }
                self.expect_error(&mut check, &self.execute_tool()?, args, "invalid_request").await?;
            }
            "PIL-EXECUTE-IDEMPOTENT-REPLAY-G" => {
                let mut args = self.sample_args(&b.valid)?;
                args["idempotency_key"] = json!(format!("conformance-{}", rand::random::<u64>()));
                let first = self.execute_ok(args.clone(), &mut check).await?;
                let middle = self.operator.map(|o| o.effects());
                let second = self.execute_ok(args, &mut check).await?;
                check.that(first == second, "the replay differs from the first response");
                if let (Some(operator), Some(middle)) = (self.operator, middle) {
                    check.that(operator.effects() == middle, "the replay executed again");
                }
            }
            "PIL-EXECUTE-IDEMPOTENT-CONFLICT-B" => {
                let key = format!("conformance-{}", rand::random::<u64>());
                let mut args = self.sample_args(&b.valid)?;
                args["idempotency_key"] = json!(key);
                self.execute_ok(args.clone(), &mut check).await?;
                args["input"] = json!({"different": rand::random::<u32>()});
                self.expect_error(&mut check, &self.execute_tool()?, args, "idempotency_conflict").await?;
            }
            "PIL-EXECUTE-TRACE-NONE-G" => {
                let mut args = self.sample_args(&b.valid)?;
                args["trace_level"] = json!("none");
                let response = self.execute_ok(args, &mut check).await?;
                check.that(
                    response["run_id"].is_string() && response["outcome"].is_object(),
                    "run_id or outcome missing",
                );
                check.that(response.get("trace").is_none(), "a trace at level none");
            }
            "PIL-EXECUTE-STORE-FALSE-G" => {
                let mut args = self.sample_args(&b.valid)?;
                args["store"] = json!(false);
                let response = self.execute_ok(args, &mut check).await?;
                let trace = self.entry.loop_tools.trace.clone().unwrap_or_default();
                self.expect_error(&mut check, &trace, json!({"run_id": response["run_id"]}), "not_found").await?;
            }
            "PIL-EXECUTE-STORE-RETAIN-G" => return self.execute_store_retain(check).await.map(Some),
            "PIL-EXECUTE-STORE-UNSUPPORTED-B" => {
                if self.entry.retention != Some(pilotage_protocol::retention::Retention::None) {
                    return Ok(Some(skip(format!(
                        "{language} declares retention {}, not none",
                        self.entry.retention.as_ref().map_or("?".into(), |r| r.to_string())
                    ))));
                }
                let mut args = self.sample_args(&b.valid)?;
                args["store"] = json!(true);
                self.expect_error(&mut check, &self.execute_tool()?, args, "unsupported").await?;
                self.side_effect_free(&mut check);
            }
            "PIL-AUTHZ-INVISIBLE-ENTRY-B" => return self.authz_invisible_entry(check).await.map(Some),
            "PIL-EXECUTE-ENGINE-ERROR-B" => return self.execute_engine_error(check).await.map(Some),
            "PIL-EXECUTE-INTERNAL-B" => {
                let Some(fault) = &b.internal_fault else {
                    return Ok(Some(skip(
                        "no validator crash can be injected into this Language through its endpoint",
                    )));
                };
                self.expect_error(&mut check, &self.execute_tool()?, self.sample_args(fault)?, "internal").await?;
                self.side_effect_free(&mut check);
            }
            _ => return Ok(None),
        }
        Ok(Some(check.verdict()))
    }

    /// PIL-EXECUTE-SUCCESS-G: a valid program runs to `success`, with the
    /// trace at the effective level and each step once.
    async fn execute_success(&self, mut check: Check) -> Result<Verdict, RunnerError> {
        let b = self.binding;
        let version = self.current_version().await?;
        let mut args = self.sample_args(&b.valid)?;
        args["trace_level"] = json!("full");
        if let Some(version) = version {
            args["expected_catalog_version"] = json!(version);
        }
        let response = self.execute_ok(args, &mut check).await?;
        check.that(
            response["outcome"] == json!({"ok": true, "status": "success", "error": null}),
            format!("outcome {}", response["outcome"]),
        );
        let ceiling = self
            .entry
            .trace
            .map(|t| if t == pilotage_protocol::manifest::TraceCeiling::Full { "full" } else { "summary" });
        check.that(response["trace"]["level"].as_str() == ceiling, "trace.level is not the effective level");
        let steps = response["trace"]["steps"].as_array().cloned().unwrap_or_default();
        let ids: Vec<&str> = steps.iter().filter_map(|s| s["id"].as_str()).collect();
        let unique: BTreeSet<&str> = ids.iter().copied().collect();
        check.that(unique.len() == ids.len(), "a trace step appears twice");
        Ok(check.verdict())
    }

    /// PIL-EXECUTE-PROMOTION-DRIFT-B: a promoted program whose referenced
    /// entry changed answers `promotion_drift`, with no side effect.
    async fn execute_promotion_drift(&self, mut check: Check) -> Result<Verdict, RunnerError> {
        let b = self.binding;
        let language = self.entry.name.clone();
        let (Some(operator), Some(promotion)) = (self.operator, &b.promotion) else {
            return Ok(skip("needs promotion and an operator to change a referenced entry"));
        };
        let reference = self.promote().await?;
        operator.change_load_bearing(&language, &promotion.referenced_entry).await?;
        let before = operator.effects();
        let response = self
            .execute_ok(
                self.with_execute_arguments(json!({"program_ref": reference, "input": promotion.input})),
                &mut check,
            )
            .await?;
        check.that(
            response["outcome"]["status"] == "promotion_drift",
            format!("status {}", response["outcome"]["status"]),
        );
        check.that(operator.effects() == before, "side effects occurred");
        Ok(check.verdict())
    }

    /// PIL-EXECUTE-INPUT-BINDING-B: a promoted program given input that does
    /// not fit answers `validation_error` with an `input_binding`
    /// diagnostic pointing into the input.
    async fn execute_input_binding(&self, mut check: Check) -> Result<Verdict, RunnerError> {
        let b = self.binding;
        let Some(promotion) = &b.promotion else { return Ok(skip("the binding gives no promotion")) };
        let reference = self.promote().await?;
        let response = self
            .execute_ok(
                self.with_execute_arguments(json!({"program_ref": reference, "input": promotion.bad_input})),
                &mut check,
            )
            .await?;
        check.that(response["outcome"]["status"] == "validation_error", "status is not validation_error");
        check.that(
            response["diagnostics"]
                .as_array()
                .is_some_and(|d| d.iter().any(|d| d["code"] == "input_binding" && d["path"].is_string())),
            "no input_binding diagnostic pointing into input",
        );
        Ok(check.verdict())
    }

    /// PIL-EXECUTE-STORE-RETAIN-G: a stored Run at trace level none has no
    /// inline trace, and its trace can be fetched.
    async fn execute_store_retain(&self, mut check: Check) -> Result<Verdict, RunnerError> {
        let b = self.binding;
        let mut args = self.sample_args(&b.valid)?;
        args["store"] = json!(true);
        args["trace_level"] = json!("none");
        let response = self.execute_ok(args, &mut check).await?;
        check.that(response.get("trace").is_none(), "an inline trace at level none");
        let trace = self.entry.loop_tools.trace.clone().unwrap_or_default();
        match self.call(&trace, json!({"run_id": response["run_id"]})).await? {
            Reply::Result(fetched) => self.validates(&mut check, "TraceFetchResponse", &fetched),
            Reply::RequestError(e) => check.that(false, format!("the stored run was not fetched: {}", e.error.message)),
        }
        Ok(check.verdict())
    }

    /// PIL-AUTHZ-INVISIBLE-ENTRY-B: an entry the caller cannot see is
    /// answered as a missing one, is not listed, and no diagnostic of a
    /// near-miss program names it (Part II §10.3).
    async fn authz_invisible_entry(&self, mut check: Check) -> Result<Verdict, RunnerError> {
        let b = self.binding;
        let Some(invisible) = &b.invisible_entry else {
            return Ok(skip("the binding names no invisible entry"));
        };
        let hidden = self.catalog_error(json!({"verb": "get", "id": invisible}), "not_found", &mut check).await?;
        let missing =
            self.catalog_error(json!({"verb": "get", "id": "no-such-entry"}), "not_found", &mut check).await?;
        check.that(hidden == missing, "the invisible entry's result differs from a missing entry's");
        let list = self.catalog(json!({"verb": "list", "limit": 200})).await?;
        check.that(!list.to_string().contains(invisible.as_str()), "the listing names the invisible entry");
        // A program naming a near miss of the entry: the binding's
        // probe, else one derived from the unknown-name sample
        // (structured programs only).
        let probe = match &b.invisible_probe {
            Some(sample) => Some(sample.program.clone()),
            None => {
                let near: String = invisible.chars().take(invisible.len().saturating_sub(1)).collect();
                let derived = b
                    .unknown_name
                    .program
                    .to_string()
                    .replace(&first_quoted_name(&b.unknown_name.program).unwrap_or_default(), &near);
                serde_json::from_str::<Value>(&derived).ok()
            }
        };
        let Some(probe) = probe else {
            check.that(false, "no near-miss probe of the invisible entry could be built");
            return Ok(check.verdict());
        };
        let response = self.validate_ok(&probe, None, &mut check).await?;
        check.that(response["valid"] == false, "the near-miss probe is valid, so no hint was exercised");
        let text = response.to_string();
        check.that(!text.contains(invisible.as_str()), "a diagnostic names the invisible entry");
        // Text Languages name relations unqualified in hints
        // (`schema.relation` → `relation`).
        if let Some((_, bare)) = invisible.rsplit_once('.')
            && !probe.to_string().contains(bare)
        {
            check.that(!text.contains(bare), format!("a diagnostic names the invisible relation '{bare}'"));
        }
        Ok(check.verdict())
    }

    /// PIL-EXECUTE-ENGINE-ERROR-B: a program that fails cleanly answers the
    /// reserved `error` status with a string `error`.
    async fn execute_engine_error(&self, mut check: Check) -> Result<Verdict, RunnerError> {
        let b = self.binding;
        let Some(clean_failure) = &b.clean_failure else {
            return Ok(skip("the binding gives no program that fails with the reserved error status"));
        };
        let mut args = self.sample_args(clean_failure)?;
        args["trace_level"] = json!("full");
        let response = self.execute_ok(args, &mut check).await?;
        check.that(
            response["outcome"]["ok"] == false && response["outcome"]["status"] == "error",
            format!("outcome {}", response["outcome"]),
        );
        check.that(response["outcome"]["error"].is_string(), "outcome.error is not a string");
        Ok(check.verdict())
    }
}

/// The first string in a program that looks like an entry id (for probing
/// hints with a near-miss of an invisible name).
fn first_quoted_name(program: &Value) -> Option<String> {
    match program {
        Value::String(text) if text.contains('_') && !text.starts_with("$.") => Some(text.clone()),
        Value::Object(map) => map.values().find_map(first_quoted_name),
        Value::Array(items) => items.iter().find_map(first_quoted_name),
        _ => None,
    }
}
