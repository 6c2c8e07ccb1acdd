//! The manifest and its Language entries (Part II §5.1, Part III §4), and
//! the capability rules every Language entry must satisfy (Part II §4.3).

use serde::{Deserialize, Deserializer, Serialize};

use super::capabilities::{Capability, CapabilityDeclaration, EffectiveCapabilities};
use super::retention::Retention;
use super::{CATALOG_TOOL, GUIDE_TOOL};

/// The Server's Pilotage self-description (Part II §5.1).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Extension version, `major.minor` (Part II §11.1).
    pub pilotage: String,
    /// One entry per exposed Language; never empty.
    pub languages: Vec<LanguageEntry>,
    /// Server-level default capability declaration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<CapabilityDeclaration>,
}

/// Server-selected loop tool names (Part III §4.3).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LoopObject {
    /// The validate tool; always present.
    pub validate: String,
    /// The execute tool; present iff `execute` is declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execute: Option<String>,
    /// The trace-fetch tool; present iff `trace_fetch` is declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
}

/// Diagnostic locator dialect (Part II §5.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LocatorDialect {
    /// RFC 6901 JSON Pointers into a JSON program.
    JsonPointer,
    /// 1-based line/column ranges into a text program.
    TextRange,
    /// A value this version does not know: `validate` is treated as
    /// undeclared for the Language (Part II §1.3).
    #[serde(other, skip_serializing)]
    Unrecognized,
}

/// Execution mode (Part II §6.5.7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecutionMode {
    /// Evaluated during the execute request.
    Immediate,
    /// Installed to run later.
    Deploy,
    /// Either, chosen by the `mode` argument.
    Both,
    /// Unknown value: `execute` treated as undeclared (Part II §1.3).
    #[serde(other, skip_serializing)]
    Unrecognized,
}

/// A Language's highest trace level (Part II §5.8.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TraceCeiling {
    /// Ids, outcomes, decisions, truncated outputs.
    Summary,
    /// Everything, including step inputs and outputs.
    Full,
    /// Unknown value: `execute` treated as undeclared (Part II §1.3).
    #[serde(other, skip_serializing)]
    Unrecognized,
}

/// How calls to promoted sub-programs are traced (Part II §5.8.3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TraceSubprogram {
    /// One trace entry per call (the default).
    #[default]
    Opaque,
    /// Internal entries are inserted with a `/` prefix.
    Expanded,
}

impl<'de> Deserialize<'de> for TraceSubprogram {
    /// Unknown values fall back to `opaque` (Part II §1.3).
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Ok(if text == "expanded" { TraceSubprogram::Expanded } else { TraceSubprogram::Opaque })
    }
}

/// Whose authority a promoted program runs under (Part II §10.4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PromotionAuthority {
    /// The caller needs every authorization the body needs (the default).
    #[default]
    Caller,
    /// The promoter's retained authority applies to the body.
    Promoter,
    /// Unknown value: executing the promoted program requires approval
    /// (Part II §1.3).
    #[serde(other, skip_serializing)]
    Unrecognized,
}

/// One exposed Language (Part II §5.1; reference fields bound per
/// Part III §4).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LanguageEntry {
    /// Language identifier, `family/version`.
    pub name: String,
    /// Human-readable name.
    pub title: String,
    /// Always `pilotage_get_guide` in the MCP binding.
    pub guides: String,
    /// `pilotage_catalog` iff `catalog` is declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog: Option<String>,
    /// Optional resource URI of the guide index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guides_resource: Option<String>,
    /// Optional resource URI of the catalog.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog_resource: Option<String>,
    /// Loop tool names.
    #[serde(rename = "loop")]
    pub loop_tools: LoopObject,
    /// Language-level capability declaration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<CapabilityDeclaration>,
    /// Locator dialect; required because `validate` always is.
    pub locator: LocatorDialect,
    /// JSON Schema of the validation context, iff context is required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_schema: Option<serde_json::Value>,
    /// Execution mode, when `execute` is declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution: Option<ExecutionMode>,
    /// Trace ceiling, when `execute` is declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceCeiling>,
    /// Sub-program tracing; absent means `opaque`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_subprogram: Option<TraceSubprogram>,
    /// Retention, when `execute` is declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention: Option<Retention>,
    /// Promoted-program authority; absent means `caller`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promotion_authority: Option<PromotionAuthority>,
}

impl LanguageEntry {
    /// This entry's effective capability map under `manifest`'s
    /// Server-level declaration (Part II §4.2). `None` when neither level
    /// declares anything.
    pub fn effective_capabilities(&self, manifest: &Manifest) -> Option<EffectiveCapabilities> {
        EffectiveCapabilities::compute(manifest.capabilities.as_ref(), self.capabilities.as_ref())
    }
}

/// One named violation of the capability rules (Part II §4.2, §4.3) or of
/// the manifest's reference-field binding (Part III §4).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ManifestViolation {
    /// Occurs when the manifest has no Language (Part II §5.1).
    NoLanguages,
    /// Occurs when `pilotage` is not `major.minor` (Part II §11.1).
    BadVersion(String),
    /// Occurs when neither the Server nor the Language declares capabilities
    /// (Part II §4.2).
    NoCapabilityDeclaration {
        /// The Language.
        language: String,
    },
    /// Occurs when `guides` or `validate` is undeclared (rule 1).
    BelowFloor {
        /// The Language.
        language: String,
        /// The missing floor capability.
        missing: Capability,
    },
    /// Occurs when a Language with environment-bound names does not declare
    /// `catalog` (rule 2).
    CatalogObligation {
        /// The Language.
        language: String,
    },
    /// Occurs when a declared capability's dependency is undeclared (rule 3).
    MissingDependency {
        /// The Language.
        language: String,
        /// The declared capability.
        capability: Capability,
        /// What it requires.
        requires: Capability,
    },
    /// Occurs when `execute` is declared without a `summary` or `full`
    /// trace ceiling (rule 4).
    TraceObligation {
        /// The Language.
        language: String,
    },
    /// Occurs when `trace_fetch` is declared with retention `none` (rule 5).
    RetentionObligation {
        /// The Language.
        language: String,
    },
    /// Occurs when a `loop`, `guides` or `catalog` field does not match the
    /// effective map (rule 7, Part III §4).
    Inconsistent {
        /// The Language.
        language: String,
        /// Which field, and how.
        detail: String,
    },
    /// Occurs when a field that is mandatory under the declared
    /// capabilities is missing (Part II §5.1: `locator`, `execution`,
    /// `trace`, `retention`).
    MissingField {
        /// The Language.
        language: String,
        /// The field's wire name.
        field: &'static str,
    },
    /// Occurs when two Language entries share a name.
    DuplicateLanguage(String),
}

impl std::fmt::Display for ManifestViolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ManifestViolation::NoLanguages => write!(f, "the manifest lists no Language (Part II §5.1)"),
            ManifestViolation::BadVersion(version) => {
                write!(f, "pilotage version '{version}' is not major.minor (Part II §11.1)")
            }
            ManifestViolation::NoCapabilityDeclaration { language } => {
                write!(f, "{language}: no capability declaration at Server or Language level (Part II §4.2)")
            }
            ManifestViolation::BelowFloor { language, missing } => write!(
                f,
                "{language}: minimum floor not met, '{}' is undeclared (Part II §4.3 rule 1)",
                missing.as_str()
            ),
            ManifestViolation::CatalogObligation { language } => write!(
                f,
                "{language}: programs reference environment-bound names but 'catalog' is undeclared (Part II §4.3 rule 2)"
            ),
            ManifestViolation::MissingDependency { language, capability, requires } => write!(
                f,
                "{language}: '{}' is declared but '{}' is not (Part II §4.3 rule 3)",
                capability.as_str(),
                requires.as_str()
            ),
            ManifestViolation::TraceObligation { language } => {
                write!(f, "{language}: 'execute' needs a trace ceiling of summary or full (Part II §4.3 rule 4)")
            }
            ManifestViolation::RetentionObligation { language } => {
                write!(f, "{language}: 'trace_fetch' cannot be declared with retention 'none' (Part II §4.3 rule 5)")
            }
            ManifestViolation::Inconsistent { language, detail } => {
                write!(f, "{language}: {detail} (Part II §4.3 rule 7)")
            }
            ManifestViolation::MissingField { language, field } => {
                write!(f, "{language}: '{field}' is required under the declared capabilities (Part II §5.1)")
            }
            ManifestViolation::DuplicateLanguage(name) => {
                write!(f, "Language '{name}' appears twice in the manifest")
            }
        }
    }
}

/// Checks a whole manifest: version, non-empty Language list, unique names,
/// and every rule of Part II §4.3 for each Language. Returns every
/// violation, in Language order; an empty list means the manifest is valid.
///
/// `has_environment_bound_names` tells, per Language name, whether its
/// programs reference live Server state (Part II §3.2 test A); the rule
/// cannot be decided from the manifest alone.
pub fn check_manifest(
    manifest: &Manifest,
    has_environment_bound_names: impl Fn(&str) -> bool,
) -> Vec<ManifestViolation> {
    let mut violations = Vec::new();
    if !is_version_string(&manifest.pilotage) {
        violations.push(ManifestViolation::BadVersion(manifest.pilotage.clone()));
    }
    if manifest.languages.is_empty() {
        violations.push(ManifestViolation::NoLanguages);
    }
    let mut seen = std::collections::BTreeSet::new();
    for entry in &manifest.languages {
        if !seen.insert(entry.name.as_str()) {
            violations.push(ManifestViolation::DuplicateLanguage(entry.name.clone()));
        }
        violations.extend(check_language(manifest, entry, has_environment_bound_names(&entry.name)));
    }
    violations
}

fn is_version_string(text: &str) -> bool {
    let mut parts = text.split('.');
    let numeric = |part: Option<&str>| part.is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    numeric(parts.next()) && numeric(parts.next()) && parts.next().is_none()
}

/// Checks one Language entry against Part II §4.3 rules 1–5 and 7 and the
/// fields Part II §5.1 makes mandatory. Returns every violation found.
pub fn check_language(
    manifest: &Manifest,
    entry: &LanguageEntry,
    has_environment_bound_names: bool,
) -> Vec<ManifestViolation> {
    let language = entry.name.clone();
    let Some(map) = entry.effective_capabilities(manifest) else {
        return vec![ManifestViolation::NoCapabilityDeclaration { language }];
    };
    let mut violations = Vec::new();

    // Rule 1: the minimum floor.
    for missing in [Capability::Guides, Capability::Validate] {
        if !map.declares(missing) {
            violations.push(ManifestViolation::BelowFloor { language: language.clone(), missing });
        }
    }
    // Rule 2: catalog obligation.
    if has_environment_bound_names && !map.declares(Capability::Catalog) {
        violations.push(ManifestViolation::CatalogObligation { language: language.clone() });
    }
    // Rule 3: dependencies.
    for capability in Capability::ALL {
        if let Some(requires) = capability.dependency()
            && map.declares(capability)
            && !map.declares(requires)
        {
            violations.push(ManifestViolation::MissingDependency { language: language.clone(), capability, requires });
        }
    }
    let executes = map.declares(Capability::Execute);
    // Rule 4: trace obligation.
    if executes && !matches!(entry.trace, Some(TraceCeiling::Summary | TraceCeiling::Full)) {
        violations.push(ManifestViolation::TraceObligation { language: language.clone() });
    }
    // Rule 5: retention obligation.
    if map.declares(Capability::TraceFetch) && entry.retention == Some(Retention::None) {
        violations.push(ManifestViolation::RetentionObligation { language: language.clone() });
    }
    // Part II §5.1 conditional fields.
    if executes && entry.execution.is_none() {
        violations.push(ManifestViolation::MissingField { language: language.clone(), field: "execution" });
    }
    if executes && entry.retention.is_none() {
        violations.push(ManifestViolation::MissingField { language: language.clone(), field: "retention" });
    }
    // Rule 7 and the Part III §4 reference binding.
    let mut inconsistent = |detail: String| {
        violations.push(ManifestViolation::Inconsistent { language: language.clone(), detail });
    };
    if entry.guides != GUIDE_TOOL {
        inconsistent(format!("'guides' must be '{GUIDE_TOOL}', found '{}'", entry.guides));
    }
    match (&entry.catalog, map.declares(Capability::Catalog)) {
        (Some(reference), true) if reference != CATALOG_TOOL => {
            inconsistent(format!("'catalog' must be '{CATALOG_TOOL}', found '{reference}'"))
        }
        (None, true) => inconsistent("'catalog' is declared but the catalog reference is absent".into()),
        (Some(_), false) => inconsistent("a catalog reference is present but 'catalog' is undeclared".into()),
        _ => {}
    }
    if entry.loop_tools.validate.is_empty() {
        inconsistent("loop.validate is empty".into());
    }
    match (&entry.loop_tools.execute, executes) {
        (None, true) => inconsistent("'execute' is declared but loop.execute is absent".into()),
        (Some(_), false) => inconsistent("loop.execute is present but 'execute' is undeclared".into()),
        _ => {}
    }
    match (&entry.loop_tools.trace, map.declares(Capability::TraceFetch)) {
        (None, true) => inconsistent("'trace_fetch' is declared but loop.trace is absent".into()),
        (Some(_), false) => inconsistent("loop.trace is present but 'trace_fetch' is undeclared".into()),
        _ => {}
    }
    violations
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn manifest(language: serde_json::Value) -> Manifest {
        serde_json::from_value(json!({"pilotage": "1.1", "languages": [language]})).unwrap()
    }

    fn good_language() -> serde_json::Value {
        json!({
            "name": "workflow/v1", "title": "Workflows", "guides": "pilotage_get_guide",
            "catalog": "pilotage_catalog",
            "loop": {"validate": "validate_workflow", "execute": "run_workflow", "trace": "trace_workflow"},
            "capabilities": {"guides": true, "catalog": true, "validate": true, "plan": true,
                             "execute": {"idempotency": true}, "trace_fetch": true},
            "locator": "json-pointer", "execution": "immediate", "trace": "full", "retention": "PT1H"
        })
    }

    fn violations_of(language: serde_json::Value) -> Vec<ManifestViolation> {
        check_manifest(&manifest(language), |_| true)
    }

    #[test]
    fn a_complete_language_has_no_violation() {
        assert_eq!(violations_of(good_language()), vec![]);
    }

    #[test]
    fn rule_1_floor() {
        let mut language = good_language();
        language["capabilities"]["guides"] = json!(false);
        let found = violations_of(language);
        assert!(
            found.contains(&ManifestViolation::BelowFloor {
                language: "workflow/v1".into(),
                missing: Capability::Guides
            })
        );
        // validate → guides dependency is reported too: every violation, named.
        assert!(
            found
                .iter()
                .any(|v| matches!(v, ManifestViolation::MissingDependency { requires: Capability::Guides, .. }))
        );
    }

    #[test]
    fn rule_2_catalog_obligation_depends_on_environment_bound_names() {
        let mut language = good_language();
        language["capabilities"]["catalog"] = json!(false);
        language.as_object_mut().unwrap().remove("catalog");
        let with_names = check_manifest(&manifest(language.clone()), |_| true);
        assert!(with_names.contains(&ManifestViolation::CatalogObligation { language: "workflow/v1".into() }));
        let pure = check_manifest(&manifest(language), |_| false);
        assert!(pure.is_empty(), "{pure:?}");
    }

    #[test]
    fn rule_3_dependencies() {
        let mut language = good_language();
        language["capabilities"]["execute"] = json!(false);
        language["loop"].as_object_mut().unwrap().remove("execute");
        let found = violations_of(language);
        assert!(found.contains(&ManifestViolation::MissingDependency {
            language: "workflow/v1".into(),
            capability: Capability::TraceFetch,
            requires: Capability::Execute
        }));
    }

    #[test]
    fn rule_4_trace_obligation() {
        let mut language = good_language();
        language.as_object_mut().unwrap().remove("trace");
        assert!(
            violations_of(language).contains(&ManifestViolation::TraceObligation { language: "workflow/v1".into() })
        );
        let mut unknown = good_language();
        unknown["trace"] = json!("verbose");
        assert!(
            violations_of(unknown).contains(&ManifestViolation::TraceObligation { language: "workflow/v1".into() })
        );
    }

    #[test]
    fn rule_5_retention_none_forbids_trace_fetch() {
        let mut language = good_language();
        language["retention"] = json!("none");
        assert!(
            violations_of(language)
                .contains(&ManifestViolation::RetentionObligation { language: "workflow/v1".into() })
        );
    }

    #[test]
    fn rule_7_loop_names_match_the_map_both_ways() {
        let mut extra = good_language();
        extra["capabilities"]["trace_fetch"] = json!(false);
        assert!(violations_of(extra).iter().any(
            |v| matches!(v, ManifestViolation::Inconsistent { detail, .. } if detail.contains("loop.trace is present"))
        ));
        let mut missing = good_language();
        missing["loop"].as_object_mut().unwrap().remove("trace");
        assert!(violations_of(missing).iter().any(
            |v| matches!(v, ManifestViolation::Inconsistent { detail, .. } if detail.contains("loop.trace is absent"))
        ));
        let mut wrong_guides = good_language();
        wrong_guides["guides"] = json!("get_guides");
        assert!(violations_of(wrong_guides).iter().any(
            |v| matches!(v, ManifestViolation::Inconsistent { detail, .. } if detail.contains("pilotage_get_guide"))
        ));
    }

    #[test]
    fn server_level_declaration_satisfies_the_declaration_requirement() {
        let mut language = good_language();
        let capabilities = language.as_object_mut().unwrap().remove("capabilities").unwrap();
        let mut m = manifest(language);
        assert_eq!(
            check_manifest(&m, |_| true),
            vec![ManifestViolation::NoCapabilityDeclaration { language: "workflow/v1".into() }]
        );
        m.capabilities = Some(serde_json::from_value(capabilities).unwrap());
        assert_eq!(check_manifest(&m, |_| true), vec![]);
    }

    #[test]
    fn version_and_emptiness() {
        let empty: Manifest = serde_json::from_value(json!({"pilotage": "1", "languages": []})).unwrap();
        let found = check_manifest(&empty, |_| true);
        assert!(found.contains(&ManifestViolation::NoLanguages));
        assert!(found.contains(&ManifestViolation::BadVersion("1".into())));
    }

    #[test]
    fn unknown_enum_values_fall_back() {
        let mut language = good_language();
        language["trace_subprogram"] = json!("inlined");
        language["promotion_authority"] = json!("nobody");
        language["locator"] = json!("xpath");
        let parsed: LanguageEntry = serde_json::from_value(language).unwrap();
        assert_eq!(parsed.trace_subprogram, Some(TraceSubprogram::Opaque));
        assert_eq!(parsed.promotion_authority, Some(PromotionAuthority::Unrecognized));
        assert_eq!(parsed.locator, LocatorDialect::Unrecognized);
    }
}
