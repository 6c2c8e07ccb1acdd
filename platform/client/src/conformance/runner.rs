//! The conformance [`Runner`]: its connection to one Language of one
//! server, the requests and checks the vectors share, and the dispatch of
//! a vector to its group (`vectors_discovery`, `vectors_lookup`,
//! `vectors_validate`, `vectors_execute`, `vectors_trace`). The vector
//! file and verdicts are in `vector_file`, the completeness gate in
//! `completeness`.

use rmcp::model::Tool;
use serde_json::{Value, json};

use super::binding::{Binding, Sample};
use super::operator::{Operator, OperatorError};
use super::vector_file::{Vector, VectorFile, VectorResult, Verdict};
use crate::connection::{ClientError, Connection, Reply};
use pilotage_protocol::capabilities::{Capability, EffectiveCapabilities, SubFeature};
use pilotage_protocol::manifest::{LanguageEntry, Manifest};
use pilotage_protocol::request_error::RequestError;

/// Why the runner could not carry out a vector (or start at all). A vector
/// that ran and whose assertions failed is a [`Verdict::Failed`], not an
/// error; an error becomes the vector's one failure, in the words of its
/// `Display`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunnerError {
    /// Occurs when the connection or transport fails, or the server answers
    /// a call with a JSON-RPC error or without `structuredContent`.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// Occurs when the raw HTTP request of a carrier vector
    /// (PIL-CARRIER-MALFORMED-B) cannot be sent.
    #[error(transparent)]
    Http(#[from] reqwest::Error),
    /// Occurs when an [`Operator`] action fails.
    #[error(transparent)]
    Operator(#[from] OperatorError),
    /// Occurs when `pilotage_manifest` answers with a request error.
    #[error("pilotage_manifest failed: {}", .request_error.error.message)]
    ManifestRefused {
        /// The request error.
        request_error: RequestError,
    },
    /// Occurs when `pilotage_manifest`'s result does not parse as a
    /// manifest.
    #[error("the manifest does not parse: {source}")]
    ManifestShape {
        /// Why it does not parse.
        source: serde_json::Error,
    },
    /// Occurs when the manifest does not list the binding's Language.
    #[error("the server has no Language {language}")]
    UnknownLanguage {
        /// The binding's Language.
        language: String,
    },
    /// Occurs when the Language's manifest entry has no capability
    /// declaration.
    #[error("the Language has no capability declaration")]
    NoCapabilities {
        /// The Language.
        language: String,
    },
    /// Occurs when the Language's validate tool carries no program
    /// declaration in its `_meta` (Part III §5), so the program argument
    /// is unknown.
    #[error("{tool} carries no program declaration")]
    NoProgramDeclaration {
        /// The validate tool.
        tool: String,
    },
    /// Occurs when a vector needs execute and the Language declares no
    /// execute tool.
    #[error("no execute tool")]
    NoExecuteTool {
        /// The Language.
        language: String,
    },
    /// Occurs when the guide index a vector reads answers with a request
    /// error.
    #[error("no index")]
    NoGuideIndex {
        /// The Language.
        language: String,
        /// The request error.
        request_error: RequestError,
    },
    /// Occurs when the guide index or the closed-sets guide, read for the
    /// documented closed sets, answers with a request error.
    #[error("{}", .request_error.error.message)]
    GuideRefused {
        /// The Language.
        language: String,
        /// The request error.
        request_error: RequestError,
    },
    /// Occurs when the guide index lists no guide with the `closed-sets`
    /// topic.
    #[error("no closed-sets guide")]
    NoClosedSetsGuide {
        /// The Language.
        language: String,
    },
    /// Occurs when a catalog request whose result a vector needs answers
    /// with a request error.
    #[error("catalog request error: {}", .request_error.error.message)]
    CatalogRefused {
        /// The Language.
        language: String,
        /// The request error.
        request_error: RequestError,
    },
    /// Occurs when validate answers with a request error where a vector
    /// needs its response.
    #[error("validate answered a request error: {}", .request_error.error.message)]
    ValidateRefused {
        /// The request error.
        request_error: RequestError,
    },
    /// Occurs when validating the branching sample, for the plan that names
    /// the untaken arm's steps (PIL-TRACE-BRANCH-DECISION-G), answers with
    /// a request error.
    #[error("validation failed")]
    BranchPlanRefused {
        /// The request error.
        request_error: RequestError,
    },
    /// Occurs when execute answers with a request error where a vector
    /// needs its response.
    #[error(
        "execute answered a request error: {} {}",
        .request_error.error.kind.as_str(),
        .request_error.error.message
    )]
    ExecuteRefused {
        /// The request error.
        request_error: RequestError,
    },
    /// Occurs when a vector needs a promoted program and the binding gives
    /// no promotion.
    #[error("the binding gives no promotion")]
    NoPromotion {
        /// The Language.
        language: String,
    },
    /// Occurs when the binding's promote tool answers with a request error.
    #[error("promotion failed: {}", .request_error.error.message)]
    PromotionRefused {
        /// The promote tool.
        tool: String,
        /// The request error.
        request_error: RequestError,
    },
    /// Occurs when the binding's promote tool answers without a
    /// `program_ref`.
    #[error("promotion returned no program_ref: {result}")]
    NoProgramRef {
        /// The promote tool.
        tool: String,
        /// Its result.
        result: Value,
    },
    /// Occurs when a closed-set case's setup needs an operator and none is
    /// given.
    #[error("needs an operator")]
    SetupNeedsOperator {
        /// The setup.
        setup: String,
    },
    /// Occurs when a closed-set case's setup needs a promotion and the
    /// binding gives none.
    #[error("needs a promotion")]
    SetupNeedsPromotion {
        /// The setup.
        setup: String,
    },
    /// Occurs when a closed-set case names a setup the runner does not
    /// know.
    #[error("unknown setup '{setup}'")]
    UnknownSetup {
        /// The setup.
        setup: String,
    },
}

/// Runs vectors against one Language of one server.
pub struct Runner<'a> {
    pub(super) connection: &'a Connection,
    pub(super) endpoint: String,
    pub(super) manifest: Manifest,
    pub(super) tools: Vec<Tool>,
    pub(super) entry: LanguageEntry,
    map: EffectiveCapabilities,
    pub(super) binding: &'a Binding,
    schema: &'a Value,
    pub(super) operator: Option<&'a dyn Operator>,
}

/// The failed assertions of one vector, and the operator's count of side
/// effects when the vector started.
pub(super) struct Check {
    failures: Vec<String>,
    effects_before: Option<u64>,
}

impl Check {
    fn new(effects_before: Option<u64>) -> Check {
        Check { failures: Vec::new(), effects_before }
    }

    /// Records `what` as a failure unless `holds`.
    pub(super) fn that(&mut self, holds: bool, what: impl Into<String>) {
        if !holds {
            self.failures.push(what.into());
        }
    }

    /// Passed when nothing failed, else the failures.
    pub(super) fn verdict(self) -> Verdict {
        if self.failures.is_empty() { Verdict::Passed } else { Verdict::Failed { failures: self.failures } }
    }
}

/// Errors of `value` against `$defs/<name>` of the schema document.
pub fn schema_errors(schema: &Value, name: &str, value: &Value) -> Vec<String> {
    let mut document = schema.clone();
    if document.get("$defs").and_then(|defs| defs.get(name)).is_none() {
        return vec![format!("the schema has no $defs/{name}")];
    }
    document["$ref"] = Value::String(format!("#/$defs/{name}"));
    match jsonschema::validator_for(&document) {
        Ok(validator) => {
            validator.iter_errors(value).map(|e| format!("{name}: {e} at '{}'", e.instance_path())).collect()
        }
        Err(error) => vec![format!("the schema does not compile: {error}")],
    }
}

/// A skip, and why.
pub(super) fn skip(reason: impl Into<String>) -> Verdict {
    Verdict::Skipped { reason: reason.into() }
}

impl<'a> Runner<'a> {
    /// A runner for `binding.language` on the server behind `connection`.
    ///
    /// # Errors
    /// [`RunnerError::Client`] when listing tools or calling
    /// `pilotage_manifest` fails; [`RunnerError::ManifestRefused`] and
    /// [`RunnerError::ManifestShape`] when the server has no usable
    /// manifest; [`RunnerError::UnknownLanguage`] and
    /// [`RunnerError::NoCapabilities`] when it has not that Language, or
    /// not with a capability declaration.
    pub async fn new(
        connection: &'a Connection,
        binding: &'a Binding,
        schema: &'a Value,
        operator: Option<&'a dyn Operator>,
    ) -> Result<Runner<'a>, RunnerError> {
        let tools = connection.tools().await?;
        let manifest: Manifest = match connection.call(pilotage_protocol::MANIFEST_TOOL, json!({})).await? {
            Reply::Result(value) => {
                serde_json::from_value(value).map_err(|source| RunnerError::ManifestShape { source })?
            }
            Reply::RequestError(request_error) => return Err(RunnerError::ManifestRefused { request_error }),
        };
        let entry = manifest
            .languages
            .iter()
            .find(|l| l.name == binding.language)
            .cloned()
            .ok_or_else(|| RunnerError::UnknownLanguage { language: binding.language.clone() })?;
        let map = entry
            .effective_capabilities(&manifest)
            .ok_or_else(|| RunnerError::NoCapabilities { language: entry.name.clone() })?;
        Ok(Runner {
            endpoint: connection.endpoint().to_owned(),
            connection,
            manifest,
            tools,
            entry,
            map,
            binding,
            schema,
            operator,
        })
    }

    /// Whether the Language declares `requirement` (`catalog`,
    /// `execute.idempotency`, …).
    pub(super) fn declared(&self, requirement: &str) -> bool {
        let (capability, sub) = match requirement.split_once('.') {
            Some((capability, sub)) => (capability, Some(sub)),
            None => (requirement, None),
        };
        let Some(capability) = Capability::ALL.into_iter().find(|c| c.as_str() == capability) else { return false };
        if !self.map.declares(capability) {
            return false;
        }
        let feature = match sub {
            None => return true,
            Some("search") => SubFeature::Search,
            Some("changed_since") => SubFeature::ChangedSince,
            Some("topic_fetch") => SubFeature::TopicFetch,
            Some("test_run") => SubFeature::TestRun,
            Some("idempotency") => SubFeature::Idempotency,
            Some("narrate") => SubFeature::Narrate,
            Some(_) => return false,
        };
        self.map.declares_sub(feature)
    }

    /// The argument the validate tool takes its program in, from its
    /// `_meta` declaration.
    pub(super) fn argument(&self) -> Result<String, RunnerError> {
        let tool = &self.entry.loop_tools.validate;
        self.tools
            .iter()
            .find(|t| t.name == tool.as_str())
            .and_then(|t| t.meta.as_ref())
            .and_then(|meta| meta.get(pilotage_protocol::META_KEY))
            .and_then(|d| d.get("argument"))
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| RunnerError::NoProgramDeclaration { tool: tool.clone() })
    }

    /// Calls `tool`; a carrier or transport failure is an error.
    pub(super) async fn call(&self, tool: &str, args: Value) -> Result<Reply, RunnerError> {
        Ok(self.connection.call(tool, args).await?)
    }

    /// Fails `check` with every error of `value` against `$defs/<def>`.
    pub(super) fn validates(&self, check: &mut Check, def: &str, value: &Value) {
        for error in schema_errors(self.schema, def, value) {
            check.failures.push(error);
        }
    }

    /// Fails `check` when the operator saw side effects since the vector
    /// started; without an operator there is nothing to count.
    pub(super) fn side_effect_free(&self, check: &mut Check) {
        if let (Some(operator), Some(before)) = (self.operator, check.effects_before) {
            check.that(operator.effects() == before, "side effects occurred");
        }
    }

    /// Validates `program`, with `context` when given.
    pub(super) async fn validate(&self, program: &Value, context: Option<&Value>) -> Result<Reply, RunnerError> {
        let mut args = json!({self.argument()?: program});
        if let Some(context) = context {
            args["context"] = context.clone();
        }
        self.call(&self.entry.loop_tools.validate, args).await
    }

    /// The Language's execute tool.
    pub(super) fn execute_tool(&self) -> Result<String, RunnerError> {
        self.entry
            .loop_tools
            .execute
            .clone()
            .ok_or_else(|| RunnerError::NoExecuteTool { language: self.entry.name.clone() })
    }

    async fn execute(&self, extra: Value) -> Result<Reply, RunnerError> {
        self.call(&self.execute_tool()?, extra).await
    }

    /// The binding's `execute_arguments` under `args` (members of `args`
    /// win): the base of every execute request.
    pub(super) fn with_execute_arguments(&self, args: Value) -> Value {
        let mut merged = match &self.binding.execute_arguments {
            Some(Value::Object(base)) => base.clone(),
            _ => serde_json::Map::new(),
        };
        if let Value::Object(own) = args {
            merged.extend(own);
        }
        Value::Object(merged)
    }

    /// The arguments of an execute request running `sample`.
    pub(super) fn sample_args(&self, sample: &Sample) -> Result<Value, RunnerError> {
        let mut args = json!({self.argument()?: sample.program});
        if let Some(input) = &sample.input {
            args["input"] = input.clone();
        }
        Ok(self.with_execute_arguments(args))
    }

    /// The body of the Language's closed-sets guide.
    pub(super) async fn closed_sets_body(&self) -> Result<String, RunnerError> {
        let refused = |request_error| RunnerError::GuideRefused { language: self.entry.name.clone(), request_error };
        let index = match self.call(pilotage_protocol::GUIDE_TOOL, json!({"language": self.entry.name})).await? {
            Reply::Result(value) => value,
            Reply::RequestError(e) => return Err(refused(e)),
        };
        let id = index["guides"]
            .as_array()
            .and_then(|guides| {
                guides.iter().find(|g| g["topics"].as_array().is_some_and(|t| t.iter().any(|t| t == "closed-sets")))
            })
            .and_then(|g| g["id"].as_str())
            .ok_or_else(|| RunnerError::NoClosedSetsGuide { language: self.entry.name.clone() })?
            .to_owned();
        match self.call(pilotage_protocol::GUIDE_TOOL, json!({"language": self.entry.name, "id": id})).await? {
            Reply::Result(value) => Ok(value["guide"]["body"].as_str().unwrap_or("").to_owned()),
            Reply::RequestError(e) => Err(refused(e)),
        }
    }

    /// Promotes the binding's program; its `program_ref`.
    pub(super) async fn promote(&self) -> Result<String, RunnerError> {
        let promotion = self
            .binding
            .promotion
            .as_ref()
            .ok_or_else(|| RunnerError::NoPromotion { language: self.entry.name.clone() })?;
        match self.call(&promotion.tool, promotion.arguments.clone()).await? {
            Reply::Result(value) => value["program_ref"]
                .as_str()
                .map(str::to_owned)
                .ok_or_else(|| RunnerError::NoProgramRef { tool: promotion.tool.clone(), result: value.clone() }),
            Reply::RequestError(request_error) => {
                Err(RunnerError::PromotionRefused { tool: promotion.tool.clone(), request_error })
            }
        }
    }

    /// Runs every server-target vector in `file`; client-target vectors are
    /// reported as skipped (they run against a client, not a server).
    pub async fn run_all(&self, file: &VectorFile) -> Vec<VectorResult> {
        let mut results = Vec::new();
        for vector in &file.vectors {
            let verdict = if vector.target != "server" {
                skip("a client-target vector: it runs against the reference client, not a server")
            } else if let Some(reason) = self.binding.unreachable.get(&vector.id) {
                skip(reason.clone())
            } else if let Some(missing) = vector.requires.iter().find(|r| !self.declared(r)) {
                skip(format!("requires {missing}, which {} does not declare", self.entry.name))
            } else {
                match self.run(vector).await {
                    Ok(verdict) => verdict,
                    Err(error) => Verdict::Failed { failures: vec![error.to_string()] },
                }
            };
            results.push(VectorResult { id: vector.id.clone(), language: self.entry.name.clone(), verdict });
        }
        results
    }

    /// Runs one vector.
    ///
    /// # Errors
    /// A [`RunnerError`] when the vector could not be carried out at all.
    pub async fn run(&self, vector: &Vector) -> Result<Verdict, RunnerError> {
        // One state machine holds every vector's arm; in a debug build it
        // is large enough to overflow a 2 MiB thread stack, so it lives on
        // the heap.
        Box::pin(self.run_vector(vector)).await
    }

    /// Hands `vector` to the group of vectors it belongs to; each group's
    /// method answers `None` for an id that is not its own.
    async fn run_vector(&self, vector: &Vector) -> Result<Verdict, RunnerError> {
        let effects_before = self.operator.map(|o| o.effects());
        if let Some(verdict) = self.discovery_vector(vector, Check::new(effects_before)).await? {
            return Ok(verdict);
        }
        if let Some(verdict) = self.lookup_vector(vector, Check::new(effects_before)).await? {
            return Ok(verdict);
        }
        if let Some(verdict) = self.validate_vector(vector, Check::new(effects_before)).await? {
            return Ok(verdict);
        }
        if let Some(verdict) = self.execute_vector(vector, Check::new(effects_before)).await? {
            return Ok(verdict);
        }
        if let Some(verdict) = self.trace_vector(vector, Check::new(effects_before)).await? {
            return Ok(verdict);
        }
        Ok(skip(format!("{} is not a vector this runner knows", vector.id)))
    }

    /// Calls `tool` and checks that it answers a valid request error of
    /// `kind`; the error as JSON, or null for a result.
    pub(super) async fn expect_error(
        &self,
        check: &mut Check,
        tool: &str,
        args: Value,
        kind: &str,
    ) -> Result<Value, RunnerError> {
        match self.call(tool, args).await? {
            Reply::RequestError(error) => {
                let value = serde_json::to_value(&error).unwrap_or_default();
                self.validates(check, "RequestError", &value);
                check.that(
                    error.error.kind.as_str() == kind,
                    format!("kind {} instead of {kind}", error.error.kind.as_str()),
                );
                Ok(value)
            }
            Reply::Result(value) => {
                check.that(false, format!("a result instead of a {kind} request error: {value}"));
                Ok(Value::Null)
            }
        }
    }

    /// A catalog request for the Language; a request error is an error.
    pub(super) async fn catalog(&self, mut args: Value) -> Result<Value, RunnerError> {
        args["language"] = json!(self.entry.name);
        match self.call(pilotage_protocol::CATALOG_TOOL, args).await? {
            Reply::Result(value) => Ok(value),
            Reply::RequestError(request_error) => {
                Err(RunnerError::CatalogRefused { language: self.entry.name.clone(), request_error })
            }
        }
    }

    /// A catalog request for the Language that must answer a request
    /// error of `kind`.
    pub(super) async fn catalog_error(
        &self,
        mut args: Value,
        kind: &str,
        check: &mut Check,
    ) -> Result<Value, RunnerError> {
        args["language"] = json!(self.entry.name);
        self.expect_error(check, pilotage_protocol::CATALOG_TOOL, args, kind).await
    }

    /// The current `catalog_version`, when the Language declares a catalog.
    pub(super) async fn current_version(&self) -> Result<Option<String>, RunnerError> {
        if !self.declared("catalog") {
            return Ok(None);
        }
        Ok(self.catalog(json!({"verb": "list"})).await?["catalog_version"].as_str().map(str::to_owned))
    }

    /// A validate response, checked against `ValidateResponse`.
    pub(super) async fn validate_ok(
        &self,
        program: &Value,
        context: Option<&Value>,
        check: &mut Check,
    ) -> Result<Value, RunnerError> {
        match self.validate(program, context).await? {
            Reply::Result(value) => {
                self.validates(check, "ValidateResponse", &value);
                Ok(value)
            }
            Reply::RequestError(request_error) => Err(RunnerError::ValidateRefused { request_error }),
        }
    }

    /// An execute response, checked against `ExecuteResponse`.
    pub(super) async fn execute_ok(&self, args: Value, check: &mut Check) -> Result<Value, RunnerError> {
        match self.execute(args).await? {
            Reply::Result(value) => {
                self.validates(check, "ExecuteResponse", &value);
                Ok(value)
            }
            Reply::RequestError(request_error) => Err(RunnerError::ExecuteRefused { request_error }),
        }
    }
}

#[cfg(test)]
mod tests {
    use pilotage_protocol::request_error::{RequestError, RequestErrorKind};
    use serde_json::json;

    use super::RunnerError;

    #[test]
    fn runner_errors_read_as_the_failure_lines_they_become() {
        let refusal = || RequestError::new(RequestErrorKind::InvalidRequest, "no such tool");
        for (error, text) in [
            (RunnerError::ManifestRefused { request_error: refusal() }, "pilotage_manifest failed: no such tool"),
            (
                RunnerError::ExecuteRefused { request_error: refusal() },
                "execute answered a request error: invalid_request no such tool",
            ),
            (RunnerError::GuideRefused { language: "workflow/v1".into(), request_error: refusal() }, "no such tool"),
            (
                RunnerError::NoProgramRef { tool: "promote".into(), result: json!({"ok": true}) },
                "promotion returned no program_ref: {\"ok\":true}",
            ),
            (RunnerError::UnknownSetup { setup: "warm".into() }, "unknown setup 'warm'"),
            (RunnerError::NoExecuteTool { language: "workflow/v1".into() }, "no execute tool"),
        ] {
            assert_eq!(error.to_string(), text);
        }
    }
}
