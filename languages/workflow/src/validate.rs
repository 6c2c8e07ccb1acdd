//! Static checks and plan derivation for workflow/v1 (Part II §5.5, §5.6).
//! Validation reads the caller's visible catalog and nothing else; it
//! never invokes an entry.

use std::collections::{BTreeMap, BTreeSet};

use pilotage_guest_sdk::diag::{INPUT_BINDING, SAFE, aggregate, error_at, warning_at, with_hint};
use pilotage_guest_sdk::hints::hint;
use pilotage_guest_sdk::pointer::Path;
use pilotage_guest_sdk::{Arm, CatalogEntry, Diagnostic, Plan, PlanStep, RiskHints, Severity, Validation};
use serde_json::Value;

use crate::codes;
use crate::expr::{PathExpr, Root, Segment, Template, condition_paths, template_paths};
use crate::program::{InputParam, Program, Step, StepKind, parse, walk};

/// The caller's visible catalog, as validation and execution see it.
pub trait Catalog {
    /// One visible entry.
    fn get(&self, id: &str) -> Option<CatalogEntry>;
    /// Every visible entry id.
    fn ids(&self) -> Vec<String>;
}

/// Whether an entry kind can be called by a `call` step.
pub fn is_callable(kind: &str) -> bool {
    codes::ENTRY_KINDS.iter().any(|(name, callable, _)| *name == kind && *callable)
}

/// Validates `document` against `catalog`: every finding, and, when the
/// program is valid, its plan and references.
pub fn validate(document: &str, catalog: &dyn Catalog) -> Validation {
    let (program, mut diagnostics) = parse(document);
    let checker = Checker::new(&program, catalog, &mut diagnostics);
    let entries = checker.run();
    let valid = !diagnostics.iter().any(|d| d.severity == Severity::Error);
    let references = references(&program);
    let plan = valid.then(|| derive_plan(&program, &entries));
    Validation { diagnostics, plan, references, statements: Vec::new() }
}

/// Every catalog entry the program calls, in document order, once.
pub fn references(program: &Program) -> Vec<String> {
    let mut seen = BTreeSet::new();
    walk(&program.steps)
        .into_iter()
        .filter_map(|step| match &step.kind {
            StepKind::Call { capability, .. } if !capability.is_empty() => Some(capability.clone()),
            _ => None,
        })
        .filter(|id| seen.insert(id.clone()))
        .collect()
}

/// Where a step sits: the names addressable there.
#[derive(Clone, Default)]
struct Env {
    /// Step ids whose output is addressable.
    visible: BTreeSet<String>,
    /// Loop variables in scope.
    vars: BTreeSet<String>,
}

struct Checker<'p, 'd> {
    program: &'p Program,
    catalog: &'p dyn Catalog,
    diagnostics: &'d mut Vec<Diagnostic>,
    /// Every step by id (first occurrence).
    steps: BTreeMap<&'p str, &'p Step>,
    /// Every loop variable name used anywhere.
    all_vars: BTreeSet<&'p str>,
    /// Catalog entries of call steps that resolved.
    entries: BTreeMap<String, CatalogEntry>,
    /// `set` steps whose value some path reads.
    read: BTreeSet<String>,
}

impl<'p, 'd> Checker<'p, 'd> {
    fn new(program: &'p Program, catalog: &'p dyn Catalog, diagnostics: &'d mut Vec<Diagnostic>) -> Self {
        let mut steps = BTreeMap::new();
        let mut all_vars = BTreeSet::new();
        for step in walk(&program.steps) {
            if step.id.is_empty() {
                continue;
            }
            if step.id.contains(['#', '/']) {
                diagnostics.push(error_at(
                    codes::RESERVED_CHARACTER,
                    step.path.at("id").pointer(),
                    format!("step id '{}' contains '#' or '/', which are reserved for trace identity", step.id),
                ));
            }
            if steps.insert(step.id.as_str(), step).is_some() {
                diagnostics.push(error_at(
                    codes::DUPLICATE_STEP_ID,
                    step.path.at("id").pointer(),
                    format!("step id '{}' is used by an earlier step; ids are unique across the program", step.id),
                ));
            }
            if let StepKind::ForEach { var, .. } = &step.kind {
                all_vars.insert(var.as_str());
            }
        }
        Checker { program, catalog, diagnostics, steps, all_vars, entries: BTreeMap::new(), read: BTreeSet::new() }
    }

    fn run(mut self) -> BTreeMap<String, CatalogEntry> {
        let mut env = Env::default();
        self.sequence(&self.program.steps, &mut env);
        if let Some((output, path)) = &self.program.output {
            let env = env.clone();
            self.template(output, path, &env);
        }
        for step in walk(&self.program.steps) {
            if matches!(step.kind, StepKind::Set { .. }) && !step.id.is_empty() && !self.read.contains(&step.id) {
                self.diagnostics.push(warning_at(
                    codes::UNUSED_VALUE,
                    step.path.pointer(),
                    format!("the value of step '{}' is never read", step.id),
                ));
            }
        }
        self.entries
    }

    fn sequence(&mut self, steps: &'p [Step], env: &mut Env) {
        for step in steps {
            self.step(step, env);
            // A step's output is addressable by the steps after it.
            env.visible.insert(step.id.clone());
        }
    }

    fn step(&mut self, step: &'p Step, env: &Env) {
        match &step.kind {
            StepKind::Call { capability, with } => {
                if let Some(with) = with {
                    self.template(with, &step.path.at("with"), env);
                }
                self.call(step, capability, with.as_ref());
            }
            StepKind::Set { value } => self.template(value, &step.path.at("value"), env),
            StepKind::Branch { condition, then_steps, else_steps } => {
                for path in condition_paths(condition) {
                    self.path(path, &step.path.at("if"), env);
                }
                // Arm-local values stay in their arm (Scope rules).
                self.sequence(then_steps, &mut env.clone());
                self.sequence(else_steps, &mut env.clone());
            }
            StepKind::ForEach { over, var, body, collect } => {
                if let Some(over) = over {
                    self.path(over, &step.path.at("over"), env);
                }
                let mut inner = env.clone();
                inner.vars.insert(var.clone());
                self.sequence(body, &mut inner);
                if let Some(collect) = collect {
                    self.template(collect, &step.path.at("collect"), &inner);
                }
            }
        }
    }

    fn template(&mut self, template: &'p Template, at: &Path, env: &Env) {
        for path in template_paths(template) {
            self.path(path, at, env);
        }
    }

    fn path(&mut self, path: &PathExpr, at: &Path, env: &Env) {
        let pointer = at.pointer();
        match &path.root {
            Root::Input => self.input_path(path, &pointer),
            Root::Step(id) => {
                if !self.steps.contains_key(id.as_str()) {
                    let names: Vec<&str> = self.steps.keys().copied().collect();
                    let diagnostic = error_at(
                        codes::UNKNOWN_STEP_REFERENCE,
                        pointer,
                        format!("{} names step '{id}', which the program does not have", path.text),
                    );
                    self.diagnostics.push(with_hint(diagnostic, hint(id, names)));
                    return;
                }
                if !env.visible.contains(id) {
                    self.diagnostics.push(with_hint(
                        error_at(
                            codes::SCOPE_VIOLATION,
                            pointer,
                            format!("{} reads step '{id}', which is not addressable here", path.text),
                        ),
                        Some(
                            "a step's output is addressable only by later steps of the same list or their nested steps; values made inside a branch arm or loop body stay there (read a loop's results through the loop's own output)"
                                .to_owned(),
                        ),
                    ));
                    return;
                }
                self.read.insert(id.clone());
                self.output_field(id, path, &pointer);
            }
            Root::Var(name) => {
                if env.vars.contains(name) {
                    return;
                }
                if self.all_vars.contains(name.as_str()) {
                    self.diagnostics.push(error_at(
                        codes::SCOPE_VIOLATION,
                        pointer,
                        format!("{} reads loop variable '{name}' outside its loop body", path.text),
                    ));
                } else {
                    let mut roots = vec!["input", "steps"];
                    roots.extend(env.vars.iter().map(String::as_str));
                    let diagnostic = error_at(
                        codes::BAD_EXPRESSION,
                        pointer,
                        format!(
                            "{} starts with '{name}', which is neither input, steps nor a loop variable in scope",
                            path.text
                        ),
                    );
                    self.diagnostics.push(with_hint(diagnostic, hint(name, roots)));
                }
            }
        }
    }

    fn input_path(&mut self, path: &PathExpr, pointer: &str) {
        let Some(declared) = &self.program.input else { return };
        let Some(Segment::Field(name)) = path.segments.first() else { return };
        if declared.iter().any(|param| &param.name == name) {
            return;
        }
        let names: Vec<&str> = declared.iter().map(|param| param.name.as_str()).collect();
        let diagnostic = error_at(
            codes::UNDECLARED_INPUT,
            pointer,
            format!("{} reads input '{name}', which the program's 'input' does not declare", path.text),
        );
        self.diagnostics.push(with_hint(diagnostic, hint(name, names)));
    }

    fn output_field(&mut self, id: &str, path: &PathExpr, pointer: &str) {
        let Some(Segment::Field(field)) = path.segments.first() else { return };
        let Some(step) = self.steps.get(id) else { return };
        let StepKind::Call { capability, .. } = &step.kind else { return };
        let Some(entry) = self.entries.get(capability) else { return };
        let Some(schema) = entry.output_schema.as_deref().and_then(|text| serde_json::from_str::<Value>(text).ok())
        else {
            return;
        };
        let Some(properties) = schema.get("properties").and_then(Value::as_object) else { return };
        if properties.contains_key(field) {
            return;
        }
        let diagnostic = warning_at(
            codes::UNKNOWN_OUTPUT_FIELD,
            pointer,
            format!("{} reads '{field}', which the output_schema of '{capability}' does not list", path.text),
        );
        self.diagnostics.push(with_hint(diagnostic, hint(field, properties.keys().map(String::as_str))));
    }

    fn call(&mut self, step: &Step, capability: &str, with: Option<&Template>) {
        if capability.is_empty() {
            return;
        }
        let at = step.path.at("capability").pointer();
        let Some(entry) = self.catalog.get(capability) else {
            let ids = self.catalog.ids();
            let diagnostic = error_at(codes::UNKNOWN_CAPABILITY, at, format!("unknown capability '{capability}'"));
            self.diagnostics.push(with_hint(diagnostic, hint(capability, ids.iter().map(String::as_str))));
            return;
        };
        if !is_callable(&entry.kind) {
            self.diagnostics.push(error_at(
                codes::NOT_CALLABLE,
                at,
                format!("'{capability}' is a '{}' entry, which cannot be called", entry.kind),
            ));
            return;
        }
        if let Some(schema) = entry.input_schema.as_deref().and_then(|text| serde_json::from_str::<Value>(text).ok()) {
            self.arguments(step, capability, &schema, with);
        }
        self.entries.insert(capability.to_owned(), entry);
    }

    fn arguments(&mut self, step: &Step, capability: &str, schema: &Value, with: Option<&Template>) {
        let with_path = step.path.at("with");
        let empty = Vec::new();
        let members = match with {
            Some(Template::Object(members)) => members,
            _ => &empty,
        };
        let properties = schema.get("properties").and_then(Value::as_object);
        let required = schema.get("required").and_then(Value::as_array).cloned().unwrap_or_default();
        for name in required.iter().filter_map(Value::as_str) {
            if !members.iter().any(|(key, _)| key == name) {
                let at = if with.is_some() { with_path.pointer() } else { step.path.pointer() };
                self.diagnostics.push(error_at(
                    codes::ARGUMENT_MISMATCH,
                    at,
                    format!("'{capability}' requires argument '{name}' in 'with'"),
                ));
            }
        }
        let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
        for (name, argument) in members {
            let declared = properties.and_then(|p| p.get(name));
            match declared {
                None if closed => {
                    let names =
                        properties.map(|p| p.keys().map(String::as_str).collect::<Vec<_>>()).unwrap_or_default();
                    let diagnostic = error_at(
                        codes::ARGUMENT_MISMATCH,
                        with_path.at(name).pointer(),
                        format!("'{capability}' takes no argument '{name}'"),
                    );
                    self.diagnostics.push(with_hint(diagnostic, hint(name, names)));
                }
                Some(property) => {
                    if let Template::Literal(value) = argument
                        && let Some(expected) = type_mismatch(property, value)
                    {
                        self.diagnostics.push(error_at(
                            codes::ARGUMENT_MISMATCH,
                            with_path.at(name).pointer(),
                            format!("argument '{name}' of '{capability}' must be {expected}, found {value}"),
                        ));
                    }
                }
                None => {}
            }
        }
    }
}

/// The expected type when a literal does not match a property schema's
/// `type`; `None` when it matches or the schema says nothing.
fn type_mismatch(property: &Value, value: &Value) -> Option<String> {
    let types: Vec<&str> = match property.get("type") {
        Some(Value::String(name)) => vec![name.as_str()],
        Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).collect(),
        _ => return None,
    };
    let fits = |name: &str| match name {
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => value.as_i64().is_some() || value.as_u64().is_some(),
        "boolean" => value.is_boolean(),
        "object" => value.is_object(),
        "array" => value.is_array(),
        "null" => value.is_null(),
        _ => true,
    };
    if types.iter().any(|name| fits(name)) { None } else { Some(format!("of type {}", types.join(" or "))) }
}

fn derive_plan(program: &Program, entries: &BTreeMap<String, CatalogEntry>) -> Plan {
    let mut steps = Vec::new();
    plan_sequence(&program.steps, None, None, entries, &mut steps);
    let max = aggregate(steps.iter().map(|step: &PlanStep| step.risk_hints));
    Plan { steps, max_risk: codes::risk_label(max.read_only, max.destructive, max.open_world).to_owned() }
}

fn plan_sequence(
    steps: &[Step],
    arm: Option<&Arm>,
    loop_id: Option<&str>,
    entries: &BTreeMap<String, CatalogEntry>,
    out: &mut Vec<PlanStep>,
) {
    for step in steps {
        let (calls, risk, risk_hints): (Option<String>, String, RiskHints) = match &step.kind {
            StepKind::Call { capability, .. } => match entries.get(capability) {
                Some(entry) => (Some(capability.clone()), entry.risk.clone(), entry.risk_hints),
                None => (Some(capability.clone()), "destructive".to_owned(), pilotage_guest_sdk::diag::DESTRUCTIVE),
            },
            _ => (None, "safe".to_owned(), SAFE),
        };
        out.push(PlanStep {
            id: step.id.clone(),
            calls,
            arm: arm.cloned(),
            loop_: loop_id.map(str::to_owned),
            risk,
            risk_hints,
        });
        match &step.kind {
            StepKind::Branch { then_steps, else_steps, .. } => {
                for (label, arm_steps) in [("then", then_steps), ("else", else_steps)] {
                    let arm = Arm { branch: step.id.clone(), label: label.to_owned() };
                    plan_sequence(arm_steps, Some(&arm), loop_id, entries, out);
                }
            }
            StepKind::ForEach { body, .. } => plan_sequence(body, arm, Some(&step.id), entries, out),
            StepKind::Call { .. } | StepKind::Set { .. } => {}
        }
    }
}

/// Checks `input` against the program's declaration (the parameter-binding
/// convention): `input_binding` findings with pointers into `input`.
pub fn bind_input(document: &str, input: Option<&Value>) -> Vec<Diagnostic> {
    let (program, _) = parse(document);
    let mut diagnostics = Vec::new();
    let Some(input) = input else {
        if let Some(declared) = &program.input {
            for param in declared.iter().filter(|param| param.required) {
                diagnostics.push(error_at(
                    INPUT_BINDING,
                    "",
                    format!("input '{}' ({}) is required and no input was given", param.name, param.type_name),
                ));
            }
        }
        return diagnostics;
    };
    let Some(members) = input.as_object() else {
        diagnostics.push(error_at(INPUT_BINDING, "", "input must be a JSON object"));
        return diagnostics;
    };
    let Some(declared) = &program.input else { return diagnostics };
    for param in declared {
        match members.get(&param.name) {
            None if param.required => diagnostics.push(error_at(
                INPUT_BINDING,
                "",
                format!("input '{}' ({}) is required", param.name, param.type_name),
            )),
            Some(value) if !fits_param(param, value) => diagnostics.push(error_at(
                INPUT_BINDING,
                Path::root().at(&param.name).pointer(),
                format!("input '{}' must be of type {}, found {value}", param.name, param.type_name),
            )),
            _ => {}
        }
    }
    for name in members.keys() {
        if !declared.iter().any(|param| &param.name == name) {
            let names: Vec<&str> = declared.iter().map(|param| param.name.as_str()).collect();
            let diagnostic = error_at(
                INPUT_BINDING,
                Path::root().at(name).pointer(),
                format!("input '{name}' is not declared by the program"),
            );
            diagnostics.push(with_hint(diagnostic, hint(name, names)));
        }
    }
    diagnostics
}

fn fits_param(param: &InputParam, value: &Value) -> bool {
    match param.type_name.as_str() {
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => value.as_i64().is_some() || value.as_u64().is_some(),
        "boolean" => value.is_boolean(),
        "object" => value.is_object(),
        "array" => value.is_array(),
        _ => true,
    }
}
