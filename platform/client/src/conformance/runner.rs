//! The conformance [`Runner`]: each vector's checks through the real MCP
//! endpoint, the operator hooks of vectors that need one, and the
//! completeness gate of Part IV §4.2.

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;

use rmcp::model::Tool;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::connection::{Connection, Reply};
use pilotage_protocol::capabilities::{Capability, EffectiveCapabilities, SubFeature};
use pilotage_protocol::manifest::{LanguageEntry, Manifest};
use super::binding::{Binding, Case, MemberCases};

/// A future returned by an [`Operator`].
pub type OperatorFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, String>> + Send + 'a>>;

/// Server-side actions some vectors need, available when the suite runs
/// beside the server (the project's own tests) rather than against an
/// external endpoint.
pub trait Operator: Send + Sync {
    /// Changes a defined, non-load-bearing field (the description) of a
    /// visible catalog entry.
    fn change_description<'a>(&'a self, language: &'a str, id: &'a str) -> OperatorFuture<'a, ()>;
    /// Changes a load-bearing field (the input schema) of a catalog entry.
    fn change_load_bearing<'a>(&'a self, language: &'a str, id: &'a str) -> OperatorFuture<'a, ()>;
    /// Stores a Run of another caller and returns its id.
    fn foreign_run<'a>(&'a self, language: &'a str) -> OperatorFuture<'a, String>;
    /// How many side effects the world has seen so far.
    fn effects(&self) -> u64;
}

/// One vector of the specification's file.
#[derive(Clone, Debug, Deserialize)]
pub struct Vector {
    /// Its id, e.g. `PIL-LOOKUP-LIST-G`.
    pub id: String,
    /// `server` or `client`.
    pub target: String,
    /// The requirement it tests.
    pub requirement: String,
    /// Capabilities it needs (`catalog`, `execute.idempotency`, …).
    #[serde(default)]
    pub requires: Vec<String>,
}

/// The specification's vector file.
#[derive(Clone, Debug, Deserialize)]
pub struct VectorFile {
    /// How many vectors it claims.
    pub count: usize,
    /// The vectors.
    pub vectors: Vec<Vector>,
}

/// What happened to one vector.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum Verdict {
    /// Every assertion held.
    Passed,
    /// Not run, and why.
    Skipped {
        /// Why it could not run here.
        reason: String,
    },
    /// Some assertions failed.
    Failed {
        /// What failed.
        failures: Vec<String>,
    },
}

/// A vector's verdict for one Language.
#[derive(Clone, Debug, Serialize)]
pub struct VectorResult {
    /// The vector.
    pub id: String,
    /// The Language.
    pub language: String,
    /// The verdict.
    #[serde(flatten)]
    pub verdict: Verdict,
}

/// Runs vectors against one Language of one server.
pub struct Runner<'a> {
    connection: &'a Connection,
    endpoint: String,
    manifest: Manifest,
    tools: Vec<Tool>,
    entry: LanguageEntry,
    map: EffectiveCapabilities,
    binding: &'a Binding,
    schema: &'a Value,
    operator: Option<&'a dyn Operator>,
}

struct Check {
    failures: Vec<String>,
}

impl Check {
    fn new() -> Check {
        Check { failures: Vec::new() }
    }

    fn that(&mut self, holds: bool, what: impl Into<String>) {
        if !holds {
            self.failures.push(what.into());
        }
    }

    fn verdict(self) -> Verdict {
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

fn skip(reason: impl Into<String>) -> Verdict {
    Verdict::Skipped { reason: reason.into() }
}

impl<'a> Runner<'a> {
    /// A runner for `binding.language` on the server behind `connection`.
    ///
    /// # Errors
    /// A message when the server has no manifest or not that Language.
    pub async fn new(
        connection: &'a Connection,
        binding: &'a Binding,
        schema: &'a Value,
        operator: Option<&'a dyn Operator>,
    ) -> Result<Runner<'a>, String> {
        let tools = connection.tools().await.map_err(|e| e.to_string())?;
        let manifest: Manifest =
            match connection.call(pilotage_protocol::MANIFEST_TOOL, json!({})).await.map_err(|e| e.to_string())? {
                Reply::Result(value) => {
                    serde_json::from_value(value).map_err(|e| format!("the manifest does not parse: {e}"))?
                }
                Reply::RequestError(error) => return Err(format!("pilotage_manifest failed: {}", error.error.message)),
            };
        let entry = manifest
            .languages
            .iter()
            .find(|l| l.name == binding.language)
            .cloned()
            .ok_or_else(|| format!("the server has no Language {}", binding.language))?;
        let map = entry.effective_capabilities(&manifest).ok_or("the Language has no capability declaration")?;
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

    fn declared(&self, requirement: &str) -> bool {
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

    fn argument(&self) -> Result<String, String> {
        let tool = &self.entry.loop_tools.validate;
        self.tools
            .iter()
            .find(|t| t.name == tool.as_str())
            .and_then(|t| t.meta.as_ref())
            .and_then(|meta| meta.get(pilotage_protocol::META_KEY))
            .and_then(|d| d.get("argument"))
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| format!("{tool} carries no program declaration"))
    }

    async fn call(&self, tool: &str, args: Value) -> Result<Reply, String> {
        self.connection.call(tool, args).await.map_err(|e| e.to_string())
    }

    fn validates(&self, check: &mut Check, def: &str, value: &Value) {
        for error in schema_errors(self.schema, def, value) {
            check.failures.push(error);
        }
    }

    async fn validate(&self, program: &Value, context: Option<&Value>) -> Result<Reply, String> {
        let mut args = json!({self.argument()?: program});
        if let Some(context) = context {
            args["context"] = context.clone();
        }
        self.call(&self.entry.loop_tools.validate, args).await
    }

    fn execute_tool(&self) -> Result<String, String> {
        self.entry.loop_tools.execute.clone().ok_or_else(|| "no execute tool".to_owned())
    }

    async fn execute(&self, extra: Value) -> Result<Reply, String> {
        self.call(&self.execute_tool()?, extra).await
    }

    /// The binding's `execute_arguments` under `args` (members of `args`
    /// win): the base of every execute request.
    fn with_execute_arguments(&self, args: Value) -> Value {
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
    fn sample_args(&self, sample: &super::binding::Sample) -> Result<Value, String> {
        let mut args = json!({self.argument()?: sample.program});
        if let Some(input) = &sample.input {
            args["input"] = input.clone();
        }
        Ok(self.with_execute_arguments(args))
    }

    async fn closed_sets_body(&self) -> Result<String, String> {
        let index = match self.call(pilotage_protocol::GUIDE_TOOL, json!({"language": self.entry.name})).await? {
            Reply::Result(value) => value,
            Reply::RequestError(e) => return Err(e.error.message),
        };
        let id = index["guides"]
            .as_array()
            .and_then(|guides| {
                guides.iter().find(|g| g["topics"].as_array().is_some_and(|t| t.iter().any(|t| t == "closed-sets")))
            })
            .and_then(|g| g["id"].as_str())
            .ok_or("no closed-sets guide")?
            .to_owned();
        match self.call(pilotage_protocol::GUIDE_TOOL, json!({"language": self.entry.name, "id": id})).await? {
            Reply::Result(value) => Ok(value["guide"]["body"].as_str().unwrap_or("").to_owned()),
            Reply::RequestError(e) => Err(e.error.message),
        }
    }

    async fn promote(&self) -> Result<String, String> {
        let promotion = self.binding.promotion.as_ref().ok_or("the binding gives no promotion")?;
        match self.call(&promotion.tool, promotion.arguments.clone()).await? {
            Reply::Result(value) => value["program_ref"]
                .as_str()
                .map(str::to_owned)
                .ok_or_else(|| format!("promotion returned no program_ref: {value}")),
            Reply::RequestError(e) => Err(format!("promotion failed: {}", e.error.message)),
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
                    Err(error) => Verdict::Failed { failures: vec![error] },
                }
            };
            results.push(VectorResult { id: vector.id.clone(), language: self.entry.name.clone(), verdict });
        }
        results
    }

    /// Runs one vector.
    ///
    /// # Errors
    /// A message when the vector could not be carried out at all.
    pub async fn run(&self, vector: &Vector) -> Result<Verdict, String> {
        // One state machine holds every vector's arm; in a debug build it
        // is large enough to overflow a 2 MiB thread stack, so it lives on
        // the heap.
        Box::pin(self.run_vector(vector)).await
    }

    async fn run_vector(&self, vector: &Vector) -> Result<Verdict, String> {
        let mut check = Check::new();
        let b = self.binding;
        let language = self.entry.name.clone();
        let effects_before = self.operator.map(|o| o.effects());
        let side_effect_free = |check: &mut Check| {
            if let (Some(operator), Some(before)) = (self.operator, effects_before) {
                check.that(operator.effects() == before, "side effects occurred");
            }
        };
        match vector.id.as_str() {
            "PIL-DISCOVER-MANIFEST-G" => {
                let reply = self.call(pilotage_protocol::MANIFEST_TOOL, json!({})).await?;
                let Reply::Result(manifest) = reply else {
                    return Ok(Verdict::Failed { failures: vec!["manifest is a request error".into()] });
                };
                self.validates(&mut check, "Manifest", &manifest);
                check.that(!self.manifest.languages.is_empty(), "no Language");
                let names: BTreeSet<&str> = self.tools.iter().map(|t| t.name.as_ref()).collect();
                for entry in &self.manifest.languages {
                    let map = entry.effective_capabilities(&self.manifest);
                    let declares = |c| map.as_ref().is_some_and(|m| m.declares(c));
                    check.that(
                        names.contains(entry.loop_tools.validate.as_str()),
                        format!("{} missing from tools/list", entry.loop_tools.validate),
                    );
                    check.that(
                        entry.loop_tools.execute.is_some() == declares(Capability::Execute),
                        "loop.execute does not match execute",
                    );
                    check.that(
                        entry.loop_tools.trace.is_some() == declares(Capability::TraceFetch),
                        "loop.trace does not match trace_fetch",
                    );
                    for tool in entry.loop_tools.execute.iter().chain(&entry.loop_tools.trace) {
                        check.that(names.contains(tool.as_str()), format!("{tool} missing from tools/list"));
                    }
                    check.that(entry.guides == pilotage_protocol::GUIDE_TOOL, "guides is not pilotage_get_guide");
                    check.that(
                        entry.catalog.as_deref()
                            == declares(Capability::Catalog).then_some(pilotage_protocol::CATALOG_TOOL),
                        "catalog does not match the catalog capability",
                    );
                }
                side_effect_free(&mut check);
            }
            "PIL-DISCOVER-INITMETA-G" => match self.connection.inline_manifest() {
                None => return Ok(skip("the server attaches no inline manifest (a MAY of Part III §3.2)")),
                Some(inline) => {
                    self.validates(&mut check, "Manifest", &serde_json::to_value(&inline).unwrap_or_default());
                    check.that(inline == self.manifest, "the inline manifest differs from pilotage_manifest's");
                }
            },
            "PIL-COLDSTART-SIGNPOSTS-G" => {
                let instructions = self.connection.instructions().unwrap_or_default();
                check.that(
                    (instructions.contains("Pilotage") || instructions.contains(pilotage_protocol::EXTENSION_ID))
                        && instructions.contains("pilotage_manifest"),
                    "the welcome text does not name Pilotage and pilotage_manifest",
                );
                let description = |name: &str| {
                    self.tools
                        .iter()
                        .find(|t| t.name == name)
                        .and_then(|t| t.description.as_deref().map(str::to_lowercase))
                        .unwrap_or_default()
                };
                let manifest = description(pilotage_protocol::MANIFEST_TOOL);
                check.that(
                    manifest.contains("first") || manifest.contains("start"),
                    "pilotage_manifest is not signposted as the starting point",
                );
                check.that(
                    description(pilotage_protocol::GUIDE_TOOL).contains("learn"),
                    "pilotage_get_guide does not state the learn stage",
                );
                if self.manifest.languages.iter().any(|l| l.catalog.is_some()) {
                    check.that(
                        description(pilotage_protocol::CATALOG_TOOL).contains("lookup"),
                        "pilotage_catalog does not state the lookup stage",
                    );
                }
                for entry in &self.manifest.languages {
                    for (tool, stage) in [
                        (Some(&entry.loop_tools.validate), "validate"),
                        (entry.loop_tools.execute.as_ref(), "execute"),
                        (entry.loop_tools.trace.as_ref(), "trace"),
                    ] {
                        if let Some(tool) = tool {
                            let text = description(tool);
                            check.that(
                                text.contains(stage) && text.contains(&entry.name.to_lowercase()),
                                format!("{tool} does not state its stage and Language"),
                            );
                        }
                    }
                }
            }
            "PIL-LEARN-INDEX-G" => match self.call(pilotage_protocol::GUIDE_TOOL, json!({"language": language})).await? {
                Reply::Result(index) => {
                    self.validates(&mut check, "GuideIndexResult", &index);
                    let guides = index["guides"].as_array().cloned().unwrap_or_default();
                    check.that(guides.iter().all(|g| g.get("body").is_none()), "an index entry carries a body");
                    check.that(guides.iter().any(|g| g["level"] == "core"), "no core guide");
                    let closed: Vec<&Value> = guides
                        .iter()
                        .filter(|g| g["topics"].as_array().is_some_and(|t| t.iter().any(|t| t == "closed-sets")))
                        .collect();
                    check.that(
                        closed.len() == 1 && closed[0]["level"] == "reference",
                        "not exactly one reference closed-sets guide",
                    );
                }
                Reply::RequestError(e) => check.that(false, format!("request error: {}", e.error.message)),
            },
            "PIL-LEARN-FETCH-G" => {
                let index = self.call(pilotage_protocol::GUIDE_TOOL, json!({"language": language})).await?;
                let Reply::Result(index) = index else { return Err("no index".into()) };
                let id = index["guides"][0]["id"].clone();
                match self.call(pilotage_protocol::GUIDE_TOOL, json!({"language": language, "id": id})).await? {
                    Reply::Result(guide) => {
                        self.validates(&mut check, "GuideFetchResult", &guide);
                        check.that(guide["guide"]["body"].is_string(), "no body string");
                    }
                    Reply::RequestError(e) => check.that(false, format!("request error: {}", e.error.message)),
                }
            }
            "PIL-LEARN-UNKNOWN-ID-B" => {
                self.expect_error(
                    &mut check,
                    pilotage_protocol::GUIDE_TOOL,
                    json!({"language": language, "id": "no-such-guide"}),
                    "not_found",
                )
                .await?;
            }
            "PIL-LEARN-TOPIC-UNDECLARED-B" => {
                if self.declared("guides.topic_fetch") {
                    return Ok(skip(format!("{language} declares guides.topic_fetch")));
                }
                let Reply::Result(index) =
                    self.call(pilotage_protocol::GUIDE_TOOL, json!({"language": language})).await?
                else {
                    return Err("no index".into());
                };
                let guide = &index["guides"][0];
                let topic = guide["topics"][0].clone();
                self.expect_error(
                    &mut check,
                    pilotage_protocol::GUIDE_TOOL,
                    json!({"language": language, "id": guide["id"], "topic": topic}),
                    "invalid_request",
                )
                .await?;
            }
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
                    return Ok(skip(format!("{language} declares catalog.changed_since")));
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
                    return Ok(skip(
                        "needs an operator to change a catalog entry (not available against an external endpoint)",
                    ));
                };
                let first = self.catalog(json!({"verb": "list"})).await?["catalog_version"].clone();
                operator.change_description(&language, entry).await?;
                let second = self.catalog(json!({"verb": "list"})).await?["catalog_version"].clone();
                check.that(first != second, "a description change did not move the token");
            }
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
                    return Ok(skip(
                        "needs an operator to observe side effects (not available against an external endpoint)",
                    ));
                }
                side_effect_free(&mut check);
            }
            "PIL-VALIDATE-RESERVED-CHARS-B" => {
                let Some(sample) = &b.reserved_character else {
                    return Ok(skip(format!("{language} has no author-chosen step identifiers")));
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
                    return Ok(skip(format!("{language} declares a context_schema")));
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
                    return Ok(skip(format!("{language} declares no context_schema, so no context can be missing")));
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
            "PIL-EXECUTE-SUCCESS-G" => {
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
            }
            "PIL-EXECUTE-GUARD-B" => {
                let response = self.execute_ok(self.sample_args(&b.invalid)?, &mut check).await?;
                check.that(response["outcome"]["status"] == "validation_error", "status is not validation_error");
                check.that(response["diagnostics"].as_array().is_some_and(|d| !d.is_empty()), "no diagnostics");
                check.that(response["run_id"].is_string(), "no run_id");
                side_effect_free(&mut check);
            }
            "PIL-EXECUTE-DRIFT-B" => {
                let mut args = self.sample_args(&b.valid)?;
                args["expected_catalog_version"] = json!("cv_stale_token");
                let response = self.execute_ok(args, &mut check).await?;
                check.that(response["outcome"]["status"] == "catalog_drift", "status is not catalog_drift");
                side_effect_free(&mut check);
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
            "PIL-EXECUTE-PROMOTION-DRIFT-B" => {
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
            }
            "PIL-EXECUTE-BOTH-RUNNABLES-B" => {
                let mut args = self.sample_args(&b.valid)?;
                args["program_ref"] = json!("prog_any");
                self.expect_error(&mut check, &self.execute_tool()?, args, "invalid_request").await?;
            }
            "PIL-EXECUTE-NO-RUNNABLE-B" => {
                let args = self.with_execute_arguments(json!({"input": {"x": 1}}));
                self.expect_error(&mut check, &self.execute_tool()?, args, "invalid_request").await?;
            }
            "PIL-EXECUTE-INPUT-BINDING-B" => {
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
            }
            "PIL-EXECUTE-UNKNOWN-TRACE-LEVEL-B" => {
                let mut args = self.sample_args(&b.valid)?;
                args["trace_level"] = json!("verbose");
                self.expect_error(&mut check, &self.execute_tool()?, args, "invalid_request").await?;
            }
            "PIL-EXECUTE-TEST-RUN-UNDECLARED-B" => {
                if self.declared("execute.test_run") {
                    return Ok(skip(format!("{language} declares execute.test_run")));
                }
                let mut args = self.sample_args(&b.valid)?;
                args["test_run"] = json!(true);
                self.expect_error(&mut check, &self.execute_tool()?, args, "invalid_request").await?;
            }
            "PIL-EXECUTE-MODE-MISSING-B" => {
                if self.entry.execution != Some(pilotage_protocol::manifest::ExecutionMode::Both) {
                    return Ok(skip(format!("{language} does not execute both ways, so mode is never required")));
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
            "PIL-TRACE-BRANCH-DECISION-G" => {
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
                let Reply::Result(validation) = self.validate(&branching.program, None).await? else {
                    return Err("validation failed".into());
                };
                let untaken: Vec<String> = validation["plan"]["steps"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
                    .iter()
                    .filter(|s| {
                        s["arm"]["branch"] == decision.at.as_str() && s["arm"]["label"] != decision.took.as_str()
                    })
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
            }
            "PIL-TRACE-ZERO-ITERATION-LOOP-G" => {
                let (Some(zero_iteration_loop), Some(loop_step)) = (&b.zero_iteration_loop, &b.loop_step) else {
                    return Ok(skip("the binding gives no loop program"));
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
            "PIL-TRACE-PARTIAL-B" => {
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
                        || (!["success", "validation_error", "catalog_drift", "promotion_drift"]
                            .contains(&status.as_str())
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
            "PIL-EXECUTE-STORE-RETAIN-G" => {
                let mut args = self.sample_args(&b.valid)?;
                args["store"] = json!(true);
                args["trace_level"] = json!("none");
                let response = self.execute_ok(args, &mut check).await?;
                check.that(response.get("trace").is_none(), "an inline trace at level none");
                let trace = self.entry.loop_tools.trace.clone().unwrap_or_default();
                match self.call(&trace, json!({"run_id": response["run_id"]})).await? {
                    Reply::Result(fetched) => self.validates(&mut check, "TraceFetchResponse", &fetched),
                    Reply::RequestError(e) => {
                        check.that(false, format!("the stored run was not fetched: {}", e.error.message))
                    }
                }
            }
            "PIL-EXECUTE-STORE-UNSUPPORTED-B" => {
                if self.entry.retention != Some(pilotage_protocol::retention::Retention::None) {
                    return Ok(skip(format!(
                        "{language} declares retention {}, not none",
                        self.entry.retention.as_ref().map_or("?".into(), |r| r.to_string())
                    )));
                }
                let mut args = self.sample_args(&b.valid)?;
                args["store"] = json!(true);
                self.expect_error(&mut check, &self.execute_tool()?, args, "unsupported").await?;
                side_effect_free(&mut check);
            }
            "PIL-TRACE-FETCH-RETAINED-G" | "PIL-TRACE-FETCH-LEVEL-G" | "PIL-TRACE-FETCH-LEVEL-B" => {
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
                    let result =
                        self.connection.call(&trace, json!({"run_id": id})).await.map_err(|e| e.to_string())?;
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
            "PIL-AUTHZ-INVISIBLE-ENTRY-B" => {
                let Some(invisible) = &b.invisible_entry else {
                    return Ok(skip("the binding names no invisible entry"));
                };
                let hidden =
                    self.catalog_error(json!({"verb": "get", "id": invisible}), "not_found", &mut check).await?;
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
            }
            "PIL-EXECUTE-ENGINE-ERROR-B" => {
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
            }
            "PIL-EXECUTE-INTERNAL-B" => {
                let Some(fault) = &b.internal_fault else {
                    return Ok(skip("no validator crash can be injected into this Language through its endpoint"));
                };
                self.expect_error(&mut check, &self.execute_tool()?, self.sample_args(fault)?, "internal").await?;
                side_effect_free(&mut check);
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
            "PIL-CARRIER-UNKNOWN-TOOL-B" => match self.connection.call("no_such_tool", json!({})).await {
                Err(crate::ClientError::Carrier { code, .. }) => {
                    check.that(code == -32602, format!("code {code}"))
                }
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
                    .await
                    .map_err(|e| e.to_string())?;
                let body: Value = response.json().await.unwrap_or(Value::Null);
                check.that(body["error"]["code"] == -32700, format!("answer {body}"));
            }
            other => return Ok(skip(format!("{other} is not a vector this runner knows"))),
        }
        Ok(check.verdict())
    }

    async fn expect_error(&self, check: &mut Check, tool: &str, args: Value, kind: &str) -> Result<Value, String> {
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

    async fn catalog(&self, mut args: Value) -> Result<Value, String> {
        args["language"] = json!(self.entry.name);
        match self.call(pilotage_protocol::CATALOG_TOOL, args).await? {
            Reply::Result(value) => Ok(value),
            Reply::RequestError(e) => Err(format!("catalog request error: {}", e.error.message)),
        }
    }

    async fn catalog_error(&self, mut args: Value, kind: &str, check: &mut Check) -> Result<Value, String> {
        args["language"] = json!(self.entry.name);
        self.expect_error(check, pilotage_protocol::CATALOG_TOOL, args, kind).await
    }

    async fn current_version(&self) -> Result<Option<String>, String> {
        if !self.declared("catalog") {
            return Ok(None);
        }
        Ok(self.catalog(json!({"verb": "list"})).await?["catalog_version"].as_str().map(str::to_owned))
    }

    async fn validate_ok(&self, program: &Value, context: Option<&Value>, check: &mut Check) -> Result<Value, String> {
        match self.validate(program, context).await? {
            Reply::Result(value) => {
                self.validates(check, "ValidateResponse", &value);
                Ok(value)
            }
            Reply::RequestError(e) => Err(format!("validate answered a request error: {}", e.error.message)),
        }
    }

    async fn execute_ok(&self, args: Value, check: &mut Check) -> Result<Value, String> {
        match self.execute(args).await? {
            Reply::Result(value) => {
                self.validates(check, "ExecuteResponse", &value);
                Ok(value)
            }
            Reply::RequestError(e) => {
                Err(format!("execute answered a request error: {} {}", e.error.kind.as_str(), e.error.message))
            }
        }
    }

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
    async fn observe(&self, set: &str, case: &Case) -> Result<Vec<String>, String> {
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
                        let operator = self.operator.ok_or("needs an operator")?;
                        let promotion = self.binding.promotion.as_ref().ok_or("needs a promotion")?;
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
                other => return Err(format!("unknown setup '{other}'")),
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

fn has_error(response: &Value) -> bool {
    response["diagnostics"].as_array().is_some_and(|d| d.iter().any(|d| d["severity"] == "error"))
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

/// A one-line summary per Language: passed / skipped / failed.
pub fn summary(results: &[VectorResult]) -> String {
    let mut languages: Vec<&str> = results.iter().map(|r| r.language.as_str()).collect();
    languages.sort();
    languages.dedup();
    languages
        .into_iter()
        .map(|language| {
            let of = |f: &dyn Fn(&Verdict) -> bool| {
                results.iter().filter(|r| r.language == language && f(&r.verdict)).count()
            };
            format!(
                "{language}: {} passed, {} skipped, {} failed",
                of(&|v| matches!(v, Verdict::Passed)),
                of(&|v| matches!(v, Verdict::Skipped { .. })),
                of(&|v| matches!(v, Verdict::Failed { .. }))
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}
