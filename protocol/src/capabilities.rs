//! Capability declarations, the effective capability map, and the rules of
//! Part II §4.3.

use serde::{Deserialize, Serialize};

/// One Pilotage capability (Part II §4.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Capability {
    /// Teaching material exists.
    Guides,
    /// A versioned inventory of environment-bound names exists.
    Catalog,
    /// A side-effect-free checker exists.
    Validate,
    /// Validation of a valid program returns a plan.
    Plan,
    /// Programs can be executed.
    Execute,
    /// Stored traces can be fetched by `run_id`.
    TraceFetch,
}

impl Capability {
    /// Every capability, in the order of Part II §4.1.
    pub const ALL: [Capability; 6] = [
        Capability::Guides,
        Capability::Catalog,
        Capability::Validate,
        Capability::Plan,
        Capability::Execute,
        Capability::TraceFetch,
    ];

    /// The wire identifier (`trace_fetch`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Capability::Guides => "guides",
            Capability::Catalog => "catalog",
            Capability::Validate => "validate",
            Capability::Plan => "plan",
            Capability::Execute => "execute",
            Capability::TraceFetch => "trace_fetch",
        }
    }

    /// The capability this one depends on (Part II §4.1 "Dependency").
    pub fn dependency(self) -> Option<Capability> {
        match self {
            Capability::Guides | Capability::Catalog => None,
            Capability::Validate => Some(Capability::Guides),
            Capability::Plan | Capability::Execute => Some(Capability::Validate),
            Capability::TraceFetch => Some(Capability::Execute),
        }
    }
}

/// Sub-feature booleans of one capability (Part II §4.1, §4.2). Absent
/// members are `false`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapabilitySettings {
    /// `catalog.search`
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<bool>,
    /// `catalog.changed_since`
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed_since: Option<bool>,
    /// `guides.topic_fetch`
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic_fetch: Option<bool>,
    /// `execute.test_run`
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_run: Option<bool>,
    /// `execute.idempotency`
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency: Option<bool>,
    /// `trace_fetch.narrate`
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub narrate: Option<bool>,
    /// `execute.x-assertions`: the platform's assertions extension
    /// ([`crate::assertions`]); not a Pilotage sub-feature, so it has no
    /// [`SubFeature`].
    #[serde(rename = "x-assertions", default, skip_serializing_if = "Option::is_none")]
    pub assertions: Option<bool>,
}

/// A sub-feature of a capability (Part II §4.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SubFeature {
    /// `catalog.search`
    Search,
    /// `catalog.changed_since`
    ChangedSince,
    /// `guides.topic_fetch`
    TopicFetch,
    /// `execute.test_run`
    TestRun,
    /// `execute.idempotency`
    Idempotency,
    /// `trace_fetch.narrate`
    Narrate,
}

impl SubFeature {
    /// The capability this sub-feature refines.
    pub fn parent(self) -> Capability {
        match self {
            SubFeature::Search | SubFeature::ChangedSince => Capability::Catalog,
            SubFeature::TopicFetch => Capability::Guides,
            SubFeature::TestRun | SubFeature::Idempotency => Capability::Execute,
            SubFeature::Narrate => Capability::TraceFetch,
        }
    }

    fn read(self, settings: &CapabilitySettings) -> bool {
        let value = match self {
            SubFeature::Search => settings.search,
            SubFeature::ChangedSince => settings.changed_since,
            SubFeature::TopicFetch => settings.topic_fetch,
            SubFeature::TestRun => settings.test_run,
            SubFeature::Idempotency => settings.idempotency,
            SubFeature::Narrate => settings.narrate,
        };
        value == Some(true)
    }
}

/// The value of one capability in a declaration: `true`/`false` or a
/// sub-feature object (Part II §4.2). Any other JSON value is kept as
/// [`CapabilityValue::Unrecognized`] and treated as undeclared (Part II §1.3).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum CapabilityValue {
    /// `true` (declared) or `false` (undeclared).
    Flag(bool),
    /// Declared, with sub-features.
    Settings(CapabilitySettings),
    /// A value this version does not understand: undeclared.
    Unrecognized(serde_json::Value),
}

impl CapabilityValue {
    /// Whether this value declares its capability.
    pub fn is_declared(&self) -> bool {
        matches!(self, CapabilityValue::Flag(true) | CapabilityValue::Settings(_))
    }
}

/// A capability declaration: capability identifier → value (Part II §4.2).
/// Unknown capability identifiers are ignored.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CapabilityDeclaration {
    /// `guides`
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guides: Option<CapabilityValue>,
    /// `catalog`
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog: Option<CapabilityValue>,
    /// `validate`
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validate: Option<CapabilityValue>,
    /// `plan`
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<CapabilityValue>,
    /// `execute`
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execute: Option<CapabilityValue>,
    /// `trace_fetch`
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_fetch: Option<CapabilityValue>,
}

impl CapabilityDeclaration {
    /// The value this declaration gives `capability`, if it names it.
    pub fn get(&self, capability: Capability) -> Option<&CapabilityValue> {
        match capability {
            Capability::Guides => self.guides.as_ref(),
            Capability::Catalog => self.catalog.as_ref(),
            Capability::Validate => self.validate.as_ref(),
            Capability::Plan => self.plan.as_ref(),
            Capability::Execute => self.execute.as_ref(),
            Capability::TraceFetch => self.trace_fetch.as_ref(),
        }
    }

    /// Sets the value of `capability`.
    pub fn set(&mut self, capability: Capability, value: CapabilityValue) {
        let slot = match capability {
            Capability::Guides => &mut self.guides,
            Capability::Catalog => &mut self.catalog,
            Capability::Validate => &mut self.validate,
            Capability::Plan => &mut self.plan,
            Capability::Execute => &mut self.execute,
            Capability::TraceFetch => &mut self.trace_fetch,
        };
        *slot = Some(value);
    }
}

/// The effective capability map of one Language (Part II §4.2): for each
/// capability, the Language-level value when the Language names it, else
/// the Server-level value. Replacement is per capability, never a merge of
/// sub-features.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EffectiveCapabilities {
    values: [Option<CapabilityValue>; 6],
}

impl EffectiveCapabilities {
    /// Computes the map from the Server-level and Language-level
    /// declarations. Returns `None` when neither exists: such a manifest is
    /// invalid (Part II §4.2).
    pub fn compute(
        server: Option<&CapabilityDeclaration>,
        language: Option<&CapabilityDeclaration>,
    ) -> Option<EffectiveCapabilities> {
        if server.is_none() && language.is_none() {
            return None;
        }
        let mut values: [Option<CapabilityValue>; 6] = Default::default();
        for (slot, capability) in values.iter_mut().zip(Capability::ALL) {
            let from_language = language.and_then(|declaration| declaration.get(capability));
            let from_server = server.and_then(|declaration| declaration.get(capability));
            *slot = from_language.or(from_server).cloned();
        }
        Some(EffectiveCapabilities { values })
    }

    fn value(&self, capability: Capability) -> Option<&CapabilityValue> {
        let index = Capability::ALL.iter().position(|c| *c == capability).unwrap_or(0);
        self.values[index].as_ref()
    }

    /// Whether `capability` is declared (Part II §4.2: absent or `false`
    /// means undeclared).
    pub fn declares(&self, capability: Capability) -> bool {
        self.value(capability).is_some_and(CapabilityValue::is_declared)
    }

    /// Whether `feature` is declared: its parent is declared and its own
    /// boolean is `true` (Part II §4.2).
    pub fn declares_sub(&self, feature: SubFeature) -> bool {
        match self.value(feature.parent()) {
            Some(CapabilityValue::Settings(settings)) => feature.read(settings),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn declaration(json: serde_json::Value) -> CapabilityDeclaration {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn language_level_replaces_server_level_per_capability_without_merging() {
        let server = declaration(serde_json::json!({
            "guides": true, "validate": true, "catalog": {"search": true, "changed_since": true}
        }));
        let language = declaration(serde_json::json!({"catalog": {"search": false}}));
        let map = EffectiveCapabilities::compute(Some(&server), Some(&language)).unwrap();
        assert!(map.declares(Capability::Catalog));
        assert!(!map.declares_sub(SubFeature::Search));
        // changed_since came only from the server object, which was replaced.
        assert!(!map.declares_sub(SubFeature::ChangedSince));
        assert!(map.declares(Capability::Guides));
    }

    #[test]
    fn false_and_absent_are_undeclared_and_unknown_values_too() {
        let language = declaration(serde_json::json!({
            "guides": true, "validate": false, "plan": "yes"
        }));
        let map = EffectiveCapabilities::compute(None, Some(&language)).unwrap();
        assert!(map.declares(Capability::Guides));
        assert!(!map.declares(Capability::Validate));
        assert!(!map.declares(Capability::Plan));
        assert!(!map.declares(Capability::Execute));
    }

    #[test]
    fn sub_feature_needs_its_parent_declared_and_true() {
        let language = declaration(serde_json::json!({"execute": {"idempotency": true, "test_run": false}}));
        let map = EffectiveCapabilities::compute(None, Some(&language)).unwrap();
        assert!(map.declares_sub(SubFeature::Idempotency));
        assert!(!map.declares_sub(SubFeature::TestRun));
        assert!(!map.declares_sub(SubFeature::Narrate));
        let flag_only = declaration(serde_json::json!({"execute": true}));
        let map = EffectiveCapabilities::compute(None, Some(&flag_only)).unwrap();
        assert!(!map.declares_sub(SubFeature::Idempotency));
    }

    #[test]
    fn no_declaration_at_either_level_is_invalid() {
        assert!(EffectiveCapabilities::compute(None, None).is_none());
    }

    #[test]
    fn unknown_capability_identifiers_are_ignored() {
        let parsed = declaration(serde_json::json!({"guides": true, "teleport": true}));
        assert_eq!(parsed.guides, Some(CapabilityValue::Flag(true)));
    }
}
