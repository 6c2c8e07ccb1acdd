//! [`PilotageClient`]: discovery, guides (cached by server, Language and
//! version), lookup, validate, execute, trace fetch, and
//! [`PilotageClient::run`], the loop for one Run with drift recovery and the
//! Host risk gate (Part II §7, §12.2; Part III §10.2).

use std::collections::BTreeMap;

use rmcp::model::Tool;
use serde_json::{Value, json};

use crate::gate::{ApprovalRequest, Approver, RiskSource};
use pilotage_protocol::catalog::{CatalogEntry, CatalogGetResult, CatalogListResult};
use pilotage_protocol::guide::{Guide, GuideFetchResult, GuideIndexResult};
use pilotage_protocol::manifest::{LanguageEntry, LocatorDialect, Manifest, PromotionAuthority};
use pilotage_protocol::requests::{ExecuteResponse, TraceFetchResponse, ValidateResponse};
use pilotage_protocol::risk::aggregate;
use pilotage_protocol::{GUIDE_TOOL, MANIFEST_TOOL, META_KEY};

use crate::connection::{ClientError, Connection, Reply, parse, result};

/// Options of one Run.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// The requested trace level (at least `summary` for a program not yet
    /// verified, Part II §7.1).
    pub trace_level: Option<String>,
    /// Ask the server to keep the Run for the fetch door.
    pub store: Option<bool>,
    /// An idempotency key.
    pub idempotency_key: Option<String>,
    /// Fetch the stored trace after the Run (step 9).
    pub fetch: bool,
    /// How many `catalog_drift` recoveries to attempt.
    pub drift_retries: u32,
    /// `mode` (`immediate` or `deploy`), required for a Language whose
    /// `execution` is `both` (Part III §4.4).
    pub mode: Option<String>,
    /// `test_run`, where the Language declares `execute.test_run` (Part II
    /// §6.5.7). The gate still judges the plan: a test run does not make
    /// a destructive plan safe to approve for deployment.
    pub test_run: Option<bool>,
    /// The platform's `x-assertions` (its docs/assertions.md): checked
    /// against the Run's trace and output, reported in the execute
    /// response's `assertions`.
    pub assertions: Option<Value>,
}

/// What happened in one Run of the standard loop.
#[derive(Clone, Debug, Default)]
pub struct RunReport {
    /// Each validation, in order.
    pub validations: Vec<ValidateResponse>,
    /// The approval request the gate raised, if any.
    pub approval: Option<ApprovalRequest>,
    /// Whether the Host let the Run go ahead.
    pub approved: bool,
    /// Each execute response, in order (drift refusals included).
    pub executions: Vec<ExecuteResponse>,
    /// The final execute response.
    pub execution: Option<ExecuteResponse>,
    /// The stored trace fetched afterwards.
    pub fetched: Option<TraceFetchResponse>,
}

/// The client side of the Pilotage loop.
#[derive(Debug)]
pub struct PilotageClient {
    connection: Connection,
    manifest: Manifest,
    tools: Vec<Tool>,
    guides: BTreeMap<(String, String, String, String), Guide>,
    seen_list_changes: u64,
}

/// Known run statuses; others with `ok: false` read as `partial`.
pub const KNOWN_STATUSES: [&str; 9] = [
    "success",
    "validation_error",
    "catalog_drift",
    "promotion_drift",
    "partial",
    "error",
    "timeout",
    "resource_exhausted",
    "engine_fault",
];

impl PilotageClient {
    /// Discovers the server (Part II §6.1, Part III §3.3): lists tools and
    /// calls `pilotage_manifest`, whose answer is authoritative over an
    /// inline manifest. Refuses servers of a higher major version and
    /// manifests whose loop tools are not in `tools/list`.
    ///
    /// # Errors
    /// [`ClientError::NotPilotage`] when there is no usable manifest.
    pub async fn discover(connection: Connection) -> Result<PilotageClient, ClientError> {
        let tools = connection.tools().await?;
        if !tools.iter().any(|tool| tool.name == MANIFEST_TOOL) {
            return Err(ClientError::NotPilotage(format!("no {MANIFEST_TOOL} tool")));
        }
        let manifest: Manifest = match connection.call(MANIFEST_TOOL, json!({})).await? {
            Reply::Result(value) => parse("manifest", value).map_err(|e| ClientError::NotPilotage(e.to_string()))?,
            Reply::RequestError(error) => {
                return Err(ClientError::NotPilotage(format!("{MANIFEST_TOOL} failed: {}", error.error.message)));
            }
        };
        let major = manifest.pilotage.split('.').next().and_then(|m| m.parse::<u32>().ok());
        if major != Some(1) {
            return Err(ClientError::NotPilotage(format!(
                "Pilotage {} is not a 1.x version this client implements",
                manifest.pilotage
            )));
        }
        let seen_list_changes = connection.list_changes();
        Ok(PilotageClient { connection, manifest, tools, guides: BTreeMap::new(), seen_list_changes })
    }

    /// Rediscovers when the server announced a tool-list change since the
    /// last discovery.
    ///
    /// # Errors
    /// As [`PilotageClient::discover`].
    pub async fn refresh_if_changed(&mut self) -> Result<bool, ClientError> {
        if self.connection.list_changes() == self.seen_list_changes {
            return Ok(false);
        }
        self.tools = self.connection.tools().await?;
        self.manifest = result("manifest", self.connection.call(MANIFEST_TOOL, json!({})).await?)?;
        self.seen_list_changes = self.connection.list_changes();
        Ok(true)
    }

    /// The connection.
    pub fn connection(&self) -> &Connection {
        &self.connection
    }

    /// The manifest in effect.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// Every tool.
    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    /// A Language entry.
    ///
    /// # Errors
    /// [`ClientError::Usage`] naming the Languages there are.
    pub fn language(&self, name: &str) -> Result<&LanguageEntry, ClientError> {
        self.manifest.languages.iter().find(|entry| entry.name == name).ok_or_else(|| {
            let names: Vec<&str> = self.manifest.languages.iter().map(|e| e.name.as_str()).collect();
            ClientError::Usage(format!("the server has no Language '{name}'; it has {}", names.join(", ")))
        })
    }

    /// The argument a program-valued tool takes its program in, read from
    /// the tool's `_meta` declaration only (Part III §5: never guessed).
    ///
    /// # Errors
    /// [`ClientError::NotPilotage`] when the tool has no declaration for
    /// `language`.
    pub fn program_argument(&self, tool: &str, language: &str) -> Result<String, ClientError> {
        let declaration = self
            .tools
            .iter()
            .find(|t| t.name == tool)
            .and_then(|t| t.meta.as_ref())
            .and_then(|meta| meta.get(META_KEY))
            .ok_or_else(|| ClientError::NotPilotage(format!("tool {tool} carries no program declaration")))?;
        if declaration.get("language").and_then(Value::as_str) == Some(language)
            && let Some(argument) = declaration.get("argument").and_then(Value::as_str)
        {
            return Ok(argument.to_owned());
        }
        declaration
            .get("languages")
            .and_then(Value::as_array)
            .and_then(|list| list.iter().find(|d| d.get("language").and_then(Value::as_str) == Some(language)))
            .and_then(|d| d.get("argument").and_then(Value::as_str))
            .map(str::to_owned)
            .ok_or_else(|| ClientError::NotPilotage(format!("tool {tool} declares no program argument for {language}")))
    }

    fn capability(&self, language: &str, capability: pilotage_protocol::capabilities::Capability) -> bool {
        self.language(language)
            .ok()
            .and_then(|entry| entry.effective_capabilities(&self.manifest))
            .is_some_and(|map| map.declares(capability))
    }

    /// The guide index (metadata only).
    ///
    /// # Errors
    /// [`ClientError::Request`] and transport failures.
    pub async fn guide_index(&self, language: &str) -> Result<Vec<Guide>, ClientError> {
        let index: GuideIndexResult =
            result("guide index", self.connection.call(GUIDE_TOOL, json!({"language": language})).await?)?;
        Ok(index.guides)
    }

    /// One guide with its body, cached by (server, Language, guide id,
    /// guide version) (Part II §3.3): a cached body is reused only while
    /// the index shows the same version.
    ///
    /// # Errors
    /// [`ClientError::Request`] for an unknown guide.
    pub async fn guide(&mut self, language: &str, id: &str) -> Result<Guide, ClientError> {
        let index = self.guide_index(language).await?;
        if let Some(listed) = index.iter().find(|g| g.id == id) {
            let key =
                (self.connection.endpoint().to_owned(), language.to_owned(), id.to_owned(), listed.version.clone());
            if let Some(cached) = self.guides.get(&key) {
                return Ok(cached.clone());
            }
        }
        let fetched: GuideFetchResult =
            result("guide", self.connection.call(GUIDE_TOOL, json!({"language": language, "id": id})).await?)?;
        let key =
            (self.connection.endpoint().to_owned(), language.to_owned(), id.to_owned(), fetched.guide.version.clone());
        self.guides.insert(key, fetched.guide.clone());
        Ok(fetched.guide)
    }

    /// The core guide (read first, Part II §7.1 step 2).
    ///
    /// # Errors
    /// [`ClientError::NotPilotage`] when the Language has no core guide.
    pub async fn core_guide(&mut self, language: &str) -> Result<Guide, ClientError> {
        let index = self.guide_index(language).await?;
        let core = index
            .iter()
            .find(|g| g.level == pilotage_protocol::guide::GuideLevel::Core)
            .ok_or_else(|| ClientError::NotPilotage(format!("{language} has no core guide")))?;
        let id = core.id.clone();
        self.guide(language, &id).await
    }

    /// One page of the catalog.
    ///
    /// # Errors
    /// [`ClientError::Request`] and transport failures.
    pub async fn catalog_list(
        &self,
        language: &str,
        query: Option<&str>,
        cursor: Option<&str>,
    ) -> Result<CatalogListResult, ClientError> {
        let tool = self
            .language(language)?
            .catalog
            .clone()
            .ok_or_else(|| ClientError::Usage(format!("{language} declares no catalog")))?;
        let mut args = json!({"language": language, "verb": "list"});
        if let Some(q) = query {
            args["q"] = json!(q);
        }
        if let Some(cursor) = cursor {
            args["cursor"] = json!(cursor);
        }
        result("catalog list", self.connection.call(&tool, args).await?)
    }

    /// One catalog entry.
    ///
    /// # Errors
    /// [`ClientError::Request`] (`not_found`) and transport failures.
    pub async fn catalog_get(&self, language: &str, id: &str) -> Result<CatalogGetResult, ClientError> {
        let tool = self
            .language(language)?
            .catalog
            .clone()
            .ok_or_else(|| ClientError::Usage(format!("{language} declares no catalog")))?;
        result(
            "catalog get",
            self.connection.call(&tool, json!({"language": language, "verb": "get", "id": id})).await?,
        )
    }

    /// Validates a program.
    ///
    /// # Errors
    /// [`ClientError::Request`] (for example `bounds_exceeded`) and
    /// transport failures; an invalid program is an `Ok` response.
    pub async fn validate(
        &self,
        language: &str,
        program: &Value,
        context: Option<&Value>,
    ) -> Result<ValidateResponse, ClientError> {
        let entry = self.language(language)?;
        if entry.locator == LocatorDialect::Unrecognized {
            return Err(ClientError::Usage(format!("{language} uses a locator dialect this client does not know")));
        }
        let tool = entry.loop_tools.validate.clone();
        let argument = self.program_argument(&tool, language)?;
        let mut args = json!({argument: program});
        if let Some(context) = context {
            args["context"] = context.clone();
        }
        result("validate", self.connection.call(&tool, args).await?)
    }

    /// Sends an execute request as built by the caller (the Host's
    /// transmission; callers go through the gate first).
    ///
    /// # Errors
    /// [`ClientError::Request`] and transport failures; a refused or failed
    /// Run is an `Ok` response.
    pub async fn execute_raw(&self, language: &str, args: Value) -> Result<ExecuteResponse, ClientError> {
        let tool = self
            .language(language)?
            .loop_tools
            .execute
            .clone()
            .ok_or_else(|| ClientError::Usage(format!("{language} does not declare execute")))?;
        result("execute", self.connection.call(&tool, args).await?)
    }

    /// Fetches a stored trace (Part II §6.6) at the lower of `level` and
    /// the recorded level.
    ///
    /// # Errors
    /// [`ClientError::Request`] (`not_found`) and transport failures.
    pub async fn trace(
        &self,
        language: &str,
        run_id: &str,
        level: Option<&str>,
    ) -> Result<TraceFetchResponse, ClientError> {
        self.fetch_trace(language, json!({"run_id": run_id, "trace_level": level})).await
    }

    /// Fetches a stored trace with a `question` (Part II §6.6
    /// "Narration"): the answer is in the response's `narration`, which is
    /// interpretation; the facts beside it are the same as [`Self::trace`]'s.
    ///
    /// # Errors
    /// [`ClientError::Request`]: `invalid_request` where the Language does
    /// not declare `trace_fetch.narrate` or the question is too long,
    /// `not_found`; transport failures.
    pub async fn ask(
        &self,
        language: &str,
        run_id: &str,
        level: Option<&str>,
        question: &str,
    ) -> Result<TraceFetchResponse, ClientError> {
        self.fetch_trace(language, json!({"run_id": run_id, "trace_level": level, "question": question})).await
    }

    async fn fetch_trace(&self, language: &str, mut args: Value) -> Result<TraceFetchResponse, ClientError> {
        let tool = self
            .language(language)?
            .loop_tools
            .trace
            .clone()
            .ok_or_else(|| ClientError::Usage(format!("{language} does not declare trace_fetch")))?;
        // An absent level is omitted, not sent as null.
        if let Some(object) = args.as_object_mut() {
            object.retain(|_, value| !value.is_null());
        }
        result("trace", self.connection.call(&tool, args).await?)
    }

    /// The risk of running a validated inline program (Part II §7.3): the
    /// plan's hints, else the aggregate of the Server's references, else
    /// nothing (fail closed).
    pub async fn inline_risk(&self, language: &str, validation: &ValidateResponse) -> RiskSource {
        if let Some(plan) = &validation.plan {
            return RiskSource::Plan(plan.max_risk_hints);
        }
        let Some(references) = &validation.references else {
            return RiskSource::Missing("the server returned neither a plan nor references".into());
        };
        let mut hints = Vec::new();
        for id in references {
            match self.catalog_get(language, id).await {
                Ok(found) => hints.push(found.entry.risk_hints),
                Err(_) => return RiskSource::Missing(format!("the referenced entry '{id}' could not be looked up")),
            }
        }
        RiskSource::References(aggregate(hints))
    }

    /// The risk of running a promoted program: its entry's hints (Part II
    /// §7.3, §7.4), and whether its authority model is unknown.
    pub fn promoted_risk(&self, language: &str, entry: Option<&CatalogEntry>) -> (RiskSource, bool) {
        let unknown_authority = self
            .language(language)
            .ok()
            .is_some_and(|l| l.promotion_authority == Some(PromotionAuthority::Unrecognized));
        match entry {
            Some(entry) => (RiskSource::PromotedEntry(entry.risk_hints), unknown_authority),
            None => (RiskSource::Missing("the promoted entry could not be looked up".into()), unknown_authority),
        }
    }

    /// One Run of the standard loop (Part II §7.1 steps 5–9) for a program
    /// the Model authored: validate (the caller revises on findings), gate,
    /// execute with `expected_catalog_version`, recover from
    /// `catalog_drift` by revalidating and gating again, and optionally
    /// fetch the stored trace. The execute request is transmitted only when
    /// the gate allows it.
    ///
    /// # Errors
    /// [`ClientError`] for transport failures and request errors; findings,
    /// refusals and failed Runs are in the report.
    pub async fn run(
        &mut self,
        language: &str,
        program: Value,
        input: Option<Value>,
        options: &RunOptions,
        approver: &dyn Approver,
    ) -> Result<RunReport, ClientError> {
        self.refresh_if_changed().await?;
        let mut report = RunReport::default();
        let entry = self.language(language)?.clone();
        if !self.capability(language, pilotage_protocol::capabilities::Capability::Execute) {
            return Err(ClientError::Usage(format!("{language} does not declare execute")));
        }
        let tool = entry.loop_tools.execute.clone().unwrap_or_default();
        let argument = self.program_argument(&tool, language)?;
        let mut attempts = 0;
        loop {
            let validation = self.validate(language, &program, None).await?;
            report.validations.push(validation.clone());
            if !validation.valid {
                // Convergence duty: never execute with an error finding.
                return Ok(report);
            }
            let risk = self.inline_risk(language, &validation).await;
            let text = match &program {
                Value::String(text) => Some(text.clone()),
                _ => None,
            };
            let request = ApprovalRequest {
                language: language.to_owned(),
                program_text: text,
                plan: validation.plan.clone(),
                risk,
                unknown_authority: false,
            };
            let approved = !request.required() || approver.approve(&request);
            report.approval = request.required().then_some(request);
            report.approved = approved;
            if !approved {
                return Ok(report);
            }
            let mut args = json!({argument.clone(): program.clone()});
            if let Some(input) = &input {
                args["input"] = input.clone();
            }
            args["trace_level"] = json!(options.trace_level.clone().unwrap_or_else(|| "full".into()));
            if let Some(version) = &validation.catalog_version {
                args["expected_catalog_version"] = json!(version);
            }
            if let Some(store) = options.store {
                args["store"] = json!(store);
            }
            if let Some(key) = &options.idempotency_key {
                args["idempotency_key"] = json!(key);
            }
            if let Some(mode) = &options.mode {
                args["mode"] = json!(mode);
            }
            if let Some(test_run) = options.test_run {
                args["test_run"] = json!(test_run);
            }
            if let Some(assertions) = &options.assertions {
                args[pilotage_protocol::assertions::MEMBER] = assertions.clone();
            }
            let response = self.execute_raw(language, args).await?;
            report.executions.push(response.clone());
            let status = response.outcome.effective_status(&KNOWN_STATUSES).to_owned();
            if status == "catalog_drift" && attempts < options.drift_retries {
                // Drift recovery (Part II §7.5): the program is unchanged,
                // so validating again against the current catalog and
                // gating again is the whole recovery.
                attempts += 1;
                continue;
            }
            if options.fetch
                && entry.loop_tools.trace.is_some()
                && let Ok(fetched) = self.trace(language, &response.run_id, None).await
            {
                report.fetched = Some(fetched);
            }
            report.execution = Some(response);
            return Ok(report);
        }
    }

    /// Ends the connection.
    pub async fn close(self) {
        self.connection.close().await;
    }
}
