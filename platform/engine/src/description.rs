//! What a Language component declares about itself (its `describe`
//! export), in the platform's own types, and how the platform turns that
//! into a manifest Language entry (Part II §5.1).

use std::collections::BTreeMap;

use serde::Serialize;

use pilotage_protocol::capabilities::{Capability, CapabilityDeclaration, CapabilitySettings, CapabilityValue};
use pilotage_protocol::guide::{Guide, GuideLevel, estimate_tokens};
use pilotage_protocol::manifest::{ExecutionMode, LanguageEntry, LocatorDialect, LoopObject, TraceSubprogram};
use pilotage_protocol::resources::ResourceRef;
use pilotage_protocol::retention::Retention;
use pilotage_protocol::risk::RiskHints;
use pilotage_protocol::trace::TraceLevel;
use pilotage_protocol::{CATALOG_TOOL, GUIDE_TOOL};

/// How programs are carried on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProgramKind {
    /// A JSON value.
    Json,
    /// A string.
    Text,
}

/// Optional capabilities the engine supports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Features {
    /// Returns plans.
    pub plan: bool,
    /// Programs reference environment-bound names.
    pub catalog: bool,
    /// Programs execute.
    pub execute: bool,
    /// Side-effect-free test runs.
    pub test_run: bool,
    /// Programs can be promoted.
    pub promotion: bool,
}

/// One diagnostic code.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CodeInfo {
    /// The code.
    pub code: String,
    /// Its meaning.
    pub meaning: String,
}

/// One outcome status.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StatusInfo {
    /// The status.
    pub status: String,
    /// Its `ok` value.
    pub ok: bool,
    /// Whether side effects may have occurred.
    pub side_effects: bool,
    /// Its meaning.
    pub meaning: String,
}

/// One catalog entry kind.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KindInfo {
    /// The kind.
    pub kind: String,
    /// Whether entries of this kind can be invoked.
    pub callable: bool,
    /// Its meaning.
    pub meaning: String,
}

/// One engine-defined risk level.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RiskInfo {
    /// The level.
    pub risk: String,
    /// Its hints.
    pub hints: RiskHints,
    /// Its meaning.
    pub meaning: String,
}

/// A guide with its body and per-topic bodies.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GuideContent {
    /// Metadata, with `language`, `size_bytes` and `tokens_estimate` filled
    /// in by the host; `body` is not set here.
    pub guide: Guide,
    /// The body.
    pub body: String,
    /// Topic id → body of that topic alone.
    pub topic_bodies: BTreeMap<String, String>,
}

impl GuideContent {
    /// Builds a guide's content, computing the host-owned fields.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        language: &str,
        id: String,
        title: String,
        level: GuideLevel,
        topics: Vec<String>,
        version: String,
        format: String,
        body: String,
        topic_bodies: BTreeMap<String, String>,
    ) -> Self {
        let guide = Guide {
            id,
            title,
            level,
            topics,
            language: language.to_owned(),
            version,
            size_bytes: body.len() as u64,
            tokens_estimate: Some(estimate_tokens(&body)),
            format: Some(if format.is_empty() { "text/markdown".to_owned() } else { format }),
            body: None,
        };
        GuideContent { guide, body, topic_bodies }
    }

    /// The fetch form: metadata and body.
    pub fn with_body(&self) -> Guide {
        Guide { body: Some(self.body.clone()), ..self.guide.clone() }
    }
}

/// Everything a Language component declared about itself.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LanguageDescription {
    /// Language identifier.
    pub name: String,
    /// Human-readable title.
    pub title: String,
    /// JSON or text programs.
    pub program_kind: ProgramKind,
    /// The tool argument carrying a program.
    pub program_argument: String,
    /// Locator dialect.
    pub locator: LocatorDialect,
    /// Execution mode.
    pub execution: ExecutionMode,
    /// Highest trace level (`summary` or `full`).
    pub trace_ceiling: TraceLevel,
    /// Sub-program tracing.
    pub trace_subprogram: TraceSubprogram,
    /// JSON Schema of the context, when context is required.
    pub context_schema: Option<serde_json::Value>,
    /// Optional capabilities.
    pub features: Features,
    /// The closed diagnostic-code set.
    pub diagnostic_codes: Vec<CodeInfo>,
    /// Run-level statuses.
    pub run_statuses: Vec<StatusInfo>,
    /// Step-level statuses.
    pub step_statuses: Vec<StatusInfo>,
    /// Catalog entry kinds.
    pub entry_kinds: Vec<KindInfo>,
    /// Risk levels.
    pub risk_levels: Vec<RiskInfo>,
    /// Guides.
    pub guides: Vec<GuideContent>,
}

/// Platform-side choices that complete a Language's manifest entry.
#[derive(Clone, Debug)]
pub struct Exposure {
    /// Loop tool names.
    pub loop_tools: LoopObject,
    /// Declared retention of runs.
    pub retention: Retention,
    /// Whether idempotency keys are supported.
    pub idempotency: bool,
}

impl LanguageDescription {
    /// Whether `code` is in the closed diagnostic set.
    pub(crate) fn declares_code(&self, code: &str) -> bool {
        self.diagnostic_codes.iter().any(|c| c.code == code)
    }

    /// The declared run status, if any.
    pub(crate) fn run_status(&self, status: &str) -> Option<&StatusInfo> {
        self.run_statuses.iter().find(|s| s.status == status)
    }

    /// Whether entries of `kind` can be invoked.
    pub fn is_callable(&self, kind: &str) -> bool {
        self.entry_kinds.iter().any(|k| k.kind == kind && k.callable)
    }

    /// The family part of the name (`workflow` for `workflow/v1`), used to
    /// name loop tools.
    pub fn family(&self) -> &str {
        self.name.split('/').next().unwrap_or(&self.name)
    }

    /// The Language-level capability declaration the platform publishes
    /// for this Language (Part II §4.1, §4.2): `trace_fetch` (with
    /// `narrate`, Part II §6.6) whenever runs execute and are retained.
    pub fn capabilities(&self, exposure: &Exposure) -> CapabilityDeclaration {
        let mut declaration = CapabilityDeclaration::default();
        let topic_fetch = self.guides.iter().any(|g| !g.topic_bodies.is_empty());
        declaration.set(
            Capability::Guides,
            if topic_fetch {
                CapabilityValue::Settings(CapabilitySettings { topic_fetch: Some(true), ..Default::default() })
            } else {
                CapabilityValue::Flag(true)
            },
        );
        if self.features.catalog {
            declaration.set(
                Capability::Catalog,
                CapabilityValue::Settings(CapabilitySettings {
                    search: Some(true),
                    changed_since: Some(true),
                    ..Default::default()
                }),
            );
        }
        declaration.set(Capability::Validate, CapabilityValue::Flag(true));
        if self.features.plan {
            declaration.set(Capability::Plan, CapabilityValue::Flag(true));
        }
        if self.features.execute {
            declaration.set(
                Capability::Execute,
                CapabilityValue::Settings(CapabilitySettings {
                    idempotency: Some(exposure.idempotency),
                    test_run: Some(self.features.test_run),
                    // Checked by the platform from the trace envelope, so
                    // every Language that executes has them.
                    assertions: Some(true),
                    ..Default::default()
                }),
            );
            // Narration is the platform's, made from the Language-neutral
            // trace envelope alone (the server's `operations/narration.rs`),
            // so every Language with a fetch door declares it.
            if exposure.retention.retains() {
                declaration.set(
                    Capability::TraceFetch,
                    CapabilityValue::Settings(CapabilitySettings { narrate: Some(true), ..Default::default() }),
                );
            }
        }
        declaration
    }

    /// The manifest Language entry (Part II §5.1) under `exposure`.
    pub fn language_entry(&self, exposure: &Exposure) -> LanguageEntry {
        let executes = self.features.execute;
        LanguageEntry {
            name: self.name.clone(),
            title: self.title.clone(),
            guides: GUIDE_TOOL.to_owned(),
            catalog: self.features.catalog.then(|| CATALOG_TOOL.to_owned()),
            // The optional resource surface (Part III §8.3), served by
            // the MCP binding for every Language.
            guides_resource: Some(ResourceRef::GuideIndex { language: self.name.clone() }.uri()),
            catalog_resource: self
                .features
                .catalog
                .then(|| ResourceRef::Catalog { language: self.name.clone(), cursor: None }.uri()),
            loop_tools: exposure.loop_tools.clone(),
            capabilities: Some(self.capabilities(exposure)),
            locator: self.locator,
            context_schema: self.context_schema.clone(),
            execution: executes.then_some(self.execution),
            trace: executes.then_some(match self.trace_ceiling {
                TraceLevel::Full => pilotage_protocol::manifest::TraceCeiling::Full,
                _ => pilotage_protocol::manifest::TraceCeiling::Summary,
            }),
            trace_subprogram: (executes && self.features.catalog).then_some(self.trace_subprogram),
            retention: executes.then(|| exposure.retention.clone()),
            promotion_authority: None,
        }
    }

    /// The default loop tool names: `validate_<family>`, `run_<family>`,
    /// `trace_<family>` (the last only when runs are retained).
    pub fn default_loop_tools(&self, retention: &Retention) -> LoopObject {
        let family: String = self
            .family()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' })
            .collect();
        LoopObject {
            validate: format!("validate_{family}"),
            execute: self.features.execute.then(|| format!("run_{family}")),
            trace: (self.features.execute && retention.retains()).then(|| format!("trace_{family}")),
        }
    }
}
