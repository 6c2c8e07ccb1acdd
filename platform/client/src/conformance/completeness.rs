//! The completeness gate of Part IV §4.2: every declared closed-set member
//! of a Language (diagnostic code, run status, request-error kind) has a
//! good and a bad case in the binding that behave, or a stated reason it
//! is unreachable.

use serde_json::json;

use super::binding::{Case, MemberCases};
use super::runner::{Runner, RunnerError};
use crate::connection::Reply;

/// Whether `status` is one the platform adds to every Language's set:
/// those a tenant's policy on risk puts on any Run
/// (`pilotage_protocol::outcome::POLICY_STATUSES`), and `assertion_failed`
/// of the platform's assertions extension, which only a request carrying
/// `x-assertions` reaches.
fn is_platform_status(status: &str) -> bool {
    status == pilotage_protocol::assertions::ASSERTION_FAILED
        || pilotage_protocol::outcome::POLICY_STATUSES.iter().any(|(policy, ..)| *policy == status)
}

impl Runner<'_> {
    /// The completeness gate (Part IV §4.2): every declared diagnostic
    /// code, run status and request-error kind of the Language must have a
    /// good and a bad case that behave, or a stated reason it is
    /// unreachable. Returns every gap and every misbehaving case.
    pub async fn completeness(&self, codes: &[String], statuses: &[String]) -> Vec<String> {
        let mut gaps = Vec::new();
        let sets = &self.binding.closed_sets;
        let kinds: Vec<String> =
            pilotage_protocol::request_error::RequestErrorKind::ALL.iter().map(|k| k.as_str().to_owned()).collect();
        for (set, members, cases) in [
            ("diagnostic code", codes, &sets.diagnostic_codes),
            ("run status", statuses, &sets.run_statuses),
            ("request-error kind", &kinds, &sets.request_errors),
        ] {
            // A case for a value outside the declared set is a stale or
            // misspelt binding, not evidence.
            for listed in cases.keys().filter(|listed| !members.contains(listed)) {
                gaps.push(format!("{set} '{listed}' has cases in the binding but is not in the declared set"));
            }
            for member in members {
                match cases.get(member) {
                    // The platform's statuses, added to every Language's
                    // set: no binding of a Language reaches them (the
                    // default policy holds nothing; vectors send no
                    // assertions), and the platform's own tests cover each.
                    None if set == "run status" && is_platform_status(member) => {}
                    None => gaps.push(format!("{set} '{member}' has no good and bad case in the binding")),
                    Some(MemberCases::Unreachable { unreachable }) if unreachable.trim().is_empty() => {
                        gaps.push(format!("{set} '{member}' is marked unreachable without a reason"))
                    }
                    Some(MemberCases::Unreachable { .. }) => {}
                    Some(MemberCases::Cases { bad, good }) => {
                        match self.observe(set, bad).await {
                            Ok(seen) if seen.contains(member) => {}
                            Ok(seen) => gaps.push(format!("{set} '{member}': the bad case produced {seen:?}")),
                            Err(error) => gaps.push(format!("{set} '{member}': the bad case failed: {error}")),
                        }
                        match self.observe(set, good).await {
                            Ok(seen) if !seen.contains(member) => {}
                            Ok(seen) => gaps.push(format!("{set} '{member}': the good case still produced {seen:?}")),
                            Err(error) => gaps.push(format!("{set} '{member}': the good case failed: {error}")),
                        }
                    }
                }
            }
        }
        gaps
    }

    /// The closed-set values a case produces: diagnostic codes, the run
    /// status, or the request-error kind.
    async fn observe(&self, set: &str, case: &Case) -> Result<Vec<String>, RunnerError> {
        let default_tool =
            if set == "diagnostic code" { self.entry.loop_tools.validate.clone() } else { self.execute_tool()? };
        let tool = case.tool.clone().unwrap_or(default_tool);
        let mut args = match &case.arguments {
            Some(args) => args.clone(),
            None => json!({}),
        };
        if self.entry.loop_tools.execute.as_deref() == Some(tool.as_str()) {
            args = self.with_execute_arguments(args);
        }
        if let Some(program) = &case.program {
            args[self.argument()?] = program.clone();
        }
        if let Some(input) = &case.input {
            args["input"] = input.clone();
        }
        if let Some(setup) = &case.setup {
            match setup.as_str() {
                "stale_catalog" => args["expected_catalog_version"] = json!("cv_stale_token"),
                "current_catalog" => {
                    if let Some(version) = self.current_version().await? {
                        args["expected_catalog_version"] = json!(version);
                    }
                }
                "promote" | "promote_then_drift" => {
                    let reference = self.promote().await?;
                    args["program_ref"] = json!(reference);
                    if setup == "promote_then_drift" {
                        let operator =
                            self.operator.ok_or_else(|| RunnerError::SetupNeedsOperator { setup: setup.clone() })?;
                        let promotion = self
                            .binding
                            .promotion
                            .as_ref()
                            .ok_or_else(|| RunnerError::SetupNeedsPromotion { setup: setup.clone() })?;
                        operator.change_load_bearing(&self.entry.name, &promotion.referenced_entry).await?;
                    }
                }
                "fresh_key" => args["idempotency_key"] = json!(format!("gate-{}", rand::random::<u64>())),
                "used_key" => {
                    // The case's own request claims the key (a refused Run
                    // would not: Part II §6.5.6), then the same key comes
                    // back with another input, which the conflict check
                    // sees before the input is bound (§6.5.2 step 1).
                    let key = format!("gate-{}", rand::random::<u64>());
                    args["idempotency_key"] = json!(key);
                    self.call(&tool, args.clone()).await?;
                    args["input"] = json!({"different": rand::random::<u32>()});
                }
                other => return Err(RunnerError::UnknownSetup { setup: other.to_owned() }),
            }
        }
        Ok(match self.call(&tool, args).await? {
            Reply::RequestError(error) => vec![error.error.kind.as_str().to_owned()],
            Reply::Result(value) => match set {
                "diagnostic code" => value["diagnostics"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
                    .iter()
                    .filter_map(|d| d["code"].as_str().map(str::to_owned))
                    .collect(),
                "run status" => {
                    let mut seen: Vec<String> =
                        value["outcome"]["status"].as_str().map(str::to_owned).into_iter().collect();
                    seen.extend(
                        value["diagnostics"]
                            .as_array()
                            .cloned()
                            .unwrap_or_default()
                            .iter()
                            .filter_map(|d| d["code"].as_str().map(str::to_owned)),
                    );
                    seen
                }
                _ => Vec::new(),
            },
        })
    }
}
