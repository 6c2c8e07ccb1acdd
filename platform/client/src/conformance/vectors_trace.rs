//! The trace and carrier vectors (PIL-TRACE-*, PIL-CARRIER-*): branch
//! and loop decisions, partial traces, the fetch door, and JSON-RPC errors
//! (Part II §5.8, §6.6; Part III §7).

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::runner::{Check, Runner, RunnerError, skip};
use super::vector_file::{Vector, Verdict};
use crate::connection::{ClientError, Reply};

impl Runner<'_> {
    /// Runs `vector` when its id is one of PIL-TRACE-* and PIL-CARRIER-*: its
    /// verdict, or `None` for an id of another group.
    pub(super) async fn trace_vector(&self, vector: &Vector, mut check: Check) -> Result<Option<Verdict>, RunnerError> {
        let b = self.binding;
        let language = self.entry.name.clone();
        match vector.id.as_str() {
            "PIL-TRACE-BRANCH-DECISION-G" => return self.trace_branch_decision(check).await.map(Some),
            "PIL-TRACE-ZERO-ITERATION-LOOP-G" => {
                let (Some(zero_iteration_loop), Some(loop_step)) = (&b.zero_iteration_loop, &b.loop_step) else {
                    return Ok(Some(skip("the binding gives no loop program")));
                };
                let mut args = self.sample_args(zero_iteration_loop)?;
                args["trace_level"] = json!("full");
                let response = self.execute_ok(args, &mut check).await?;
                let steps = response["trace"]["steps"].as_array().cloned().unwrap_or_default();
                let entries: Vec<&Value> = steps.iter().filter(|s| s["id"] == loop_step.as_str()).collect();
                check.that(
                    entries.len() == 1
                        && entries[0]["decisions"].as_array().is_some_and(|d| d.len() == 1 && d[0]["took"] == "exit"),
                    "the loop is not one entry with a single exit decision",
                );
                check.that(response["outcome"]["status"] == "success", "outcome is not success");
            }
            "PIL-TRACE-PARTIAL-B" => return self.trace_partial(check).await.map(Some),
            "PIL-TRACE-FETCH-RETAINED-G" | "PIL-TRACE-FETCH-LEVEL-G" | "PIL-TRACE-FETCH-LEVEL-B" => {
                return self.trace_fetch(vector, check).await.map(Some);
            }
            "PIL-TRACE-FETCH-INDISTINGUISHABLE-B" => {
                let trace = self.entry.loop_tools.trace.clone().unwrap_or_default();
                let mut unstored = self.sample_args(&b.valid)?;
                unstored["store"] = json!(false);
                let unstored = self.execute_ok(unstored, &mut check).await?["run_id"].clone();
                let mut ids = vec![json!("run_nonexistent_0000"), unstored];
                // Another caller's Run needs an operator; without one, the
                // two other cases are still compared.
                if let Some(operator) = self.operator {
                    ids.push(json!(operator.foreign_run(&language).await?));
                }
                let mut results = Vec::new();
                for id in &ids {
                    let result = self.connection.call(&trace, json!({"run_id": id})).await?;
                    match result {
                        Reply::RequestError(error) => {
                            check.that(error.error.kind.as_str() == "not_found", "not not_found");
                            results.push(serde_json::to_value(&error).unwrap_or_default());
                        }
                        Reply::Result(_) => check.that(false, format!("run {id} was fetched")),
                    }
                }
                check.that(results.windows(2).all(|w| w[0] == w[1]), "the not_found results differ");
            }
            "PIL-CARRIER-UNKNOWN-TOOL-B" => match self.connection.call("no_such_tool", json!({})).await {
                Err(ClientError::Carrier { code, .. }) => check.that(code == -32602, format!("code {code}")),
                other => check.that(false, format!("not a JSON-RPC error: {other:?}")),
            },
            "PIL-CARRIER-MALFORMED-B" => {
                crate::install_crypto_provider();
                let response = reqwest::Client::new()
                    .post(&self.endpoint)
                    .header("content-type", "application/json")
                    .header("accept", "application/json, text/event-stream")
                    .body("{ not json")
                    .send()
                    .await?;
                let body: Value = response.json().await.unwrap_or(Value::Null);
                check.that(body["error"]["code"] == -32700, format!("answer {body}"));
            }
            _ => return Ok(None),
        }
        Ok(Some(check.verdict()))
    }

    /// PIL-TRACE-BRANCH-DECISION-G: the branch entry carries the decision
    /// taken, and no step of the untaken arm is in the trace.
    async fn trace_branch_decision(&self, mut check: Check) -> Result<Verdict, RunnerError> {
        let b = self.binding;
        let (Some(branching), Some(decision)) = (&b.branching, &b.branch) else {
            return Ok(skip("the binding gives no branching program"));
        };
        let mut args = self.sample_args(branching)?;
        args["trace_level"] = json!("full");
        let response = self.execute_ok(args, &mut check).await?;
        let steps = response["trace"]["steps"].as_array().cloned().unwrap_or_default();
        let branch = steps.iter().find(|s| s["id"] == decision.at.as_str());
        check.that(
            branch.is_some_and(|s| {
                s["decisions"].as_array().is_some_and(|d| d.iter().any(|d| d["took"] == decision.took.as_str()))
            }),
            "the branch entry does not carry the expected decision",
        );
        let validation = match self.validate(&branching.program, None).await? {
            Reply::Result(validation) => validation,
            Reply::RequestError(request_error) => return Err(RunnerError::BranchPlanRefused { request_error }),
        };
        let untaken: Vec<String> = validation["plan"]["steps"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .filter(|s| s["arm"]["branch"] == decision.at.as_str() && s["arm"]["label"] != decision.took.as_str())
            .filter_map(|s| s["id"].as_str().map(str::to_owned))
            .collect();
        check.that(
            steps.iter().all(|s| {
                !untaken
                    .iter()
                    .any(|u| s["id"].as_str().map(pilotage_protocol::trace_identity::base_id) == Some(u.as_str()))
            }),
            "a step of the untaken arm is in the trace",
        );
        Ok(check.verdict())
    }

    /// PIL-TRACE-PARTIAL-B: a Run that fails midway answers `ok: false`
    /// with the trace of what ran, each entry a planned step.
    async fn trace_partial(&self, mut check: Check) -> Result<Verdict, RunnerError> {
        let b = self.binding;
        let mut args = self.sample_args(&b.mid_run_failure)?;
        args["trace_level"] = json!("full");
        let response = self.execute_ok(args, &mut check).await?;
        check.that(response["outcome"]["ok"] == false, "ok is not false");
        let steps = response["trace"]["steps"].as_array().cloned().unwrap_or_default();
        check.that(!steps.is_empty(), "no trace prefix");
        // 'partial', or a documented status of a started Run: not
        // one of the refusals, which mean nothing ran (Part II §5.7).
        let status = response["outcome"]["status"].as_str().unwrap_or_default().to_owned();
        let body = self.closed_sets_body().await?;
        check.that(
            status == "partial"
                || (!["success", "validation_error", "catalog_drift", "promotion_drift"].contains(&status.as_str())
                    && body.contains(&format!("`{status}`"))),
            format!("status '{status}' is neither partial nor a documented status of a started Run"),
        );
        // Every entry maps to a planned step by base identifier
        // (Part II §5.8.2); entries under a sub-program prefix are
        // the callee's and are not in this plan.
        if self.declared("plan")
            && let Reply::Result(validation) = self.validate(&b.mid_run_failure.program, None).await?
        {
            let planned: BTreeSet<String> = validation["plan"]["steps"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .iter()
                .filter_map(|s| s["id"].as_str().map(str::to_owned))
                .collect();
            for id in steps.iter().filter_map(|s| s["id"].as_str()) {
                if !pilotage_protocol::trace_identity::is_prefixed(id) {
                    let base = pilotage_protocol::trace_identity::base_id(id);
                    check.that(planned.contains(base), format!("trace entry '{id}' is not a planned step"));
                }
            }
        }
        Ok(check.verdict())
    }

    /// PIL-TRACE-FETCH-RETAINED-G, PIL-TRACE-FETCH-LEVEL-G and -B: a stored
    /// Run's trace is fetched as it rode the response, at a lower level on
    /// request, and never at level none.
    async fn trace_fetch(&self, vector: &Vector, mut check: Check) -> Result<Verdict, RunnerError> {
        let b = self.binding;
        let mut args = self.sample_args(&b.valid)?;
        args["store"] = json!(true);
        args["trace_level"] = json!("full");
        let response = self.execute_ok(args, &mut check).await?;
        let trace = self.entry.loop_tools.trace.clone().unwrap_or_default();
        let run_id = response["run_id"].clone();
        match vector.id.as_str() {
            "PIL-TRACE-FETCH-RETAINED-G" => match self.call(&trace, json!({"run_id": run_id})).await? {
                Reply::Result(fetched) => {
                    self.validates(&mut check, "TraceFetchResponse", &fetched);
                    check.that(
                        fetched["trace"] == response["trace"],
                        "the fetched trace is not the one that rode the response",
                    );
                }
                Reply::RequestError(e) => check.that(false, e.error.message),
            },
            "PIL-TRACE-FETCH-LEVEL-G" => {
                match self.call(&trace, json!({"run_id": run_id, "trace_level": "summary"})).await? {
                    Reply::Result(fetched) => {
                        self.validates(&mut check, "TraceFetchResponse", &fetched);
                        check.that(fetched["trace"]["level"] == "summary", "the level is not the lower one");
                    }
                    Reply::RequestError(e) => check.that(false, e.error.message),
                }
            }
            _ => {
                self.expect_error(
                    &mut check,
                    &trace,
                    json!({"run_id": run_id, "trace_level": "none"}),
                    "invalid_request",
                )
                .await?;
            }
        }
        Ok(check.verdict())
    }
}
