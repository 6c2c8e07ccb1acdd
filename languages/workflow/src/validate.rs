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
use crate::schema::{ObjectSchema, Types};

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
    // Inside a component the instance is discarded when the call returns:
    // freeing the program's tree would cost instructions and give nothing
    // back. Native callers (tests, tools) free it as usual.
    #[cfg(target_family = "wasm")]
    std::mem::forget((program, entries));
    Validation { diagnostics, plan, references, statements: Vec::new() }
}

/// Every catalog entry the program calls, in document order, once.
pub fn references(program: &Program) -> Vec<String> {
    let mut seen = BTreeSet::new();
    walk(&program.steps)
        .into_iter()
        .filter_map(|step| match &step.kind {
            StepKind::Call { capability, .. } if !capability.is_empty() => Some(capability.as_str()),
            _ => None,
        })
        .filter(|id| seen.insert(*id))
        .map(str::to_owned)
        .collect()
}

/// Where a path expression sits: a member of the value at a path (`""`:
/// the value itself). The pointer text is built only for a finding.
#[derive(Clone, Copy)]
struct Place<'a>(&'a Path, &'a str);

impl Place<'_> {
    fn pointer(self) -> String {
        if self.1.is_empty() { self.0.pointer() } else { self.0.at(self.1).pointer() }
    }
}

/// Where a step sits: the names addressable there.
#[derive(Clone, Default)]
struct Env<'p> {
    /// Step ids whose output is addressable.
    visible: BTreeSet<&'p str>,
    /// Loop variables in scope.
    vars: BTreeSet<&'p str>,
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
    /// Their input schemas, decoded once per validation.
    inputs: BTreeMap<String, Option<ObjectSchema>>,
    /// Their output schemas, decoded when a path first reads a field.
    outputs: BTreeMap<String, Option<ObjectSchema>>,
    /// `set` steps whose value some path reads.
    read: BTreeSet<&'p str>,
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
        Checker {
            program,
            catalog,
            diagnostics,
            steps,
            all_vars,
            entries: BTreeMap::new(),
            inputs: BTreeMap::new(),
            outputs: BTreeMap::new(),
            read: BTreeSet::new(),
        }
    }

    fn run(mut self) -> BTreeMap<String, CatalogEntry> {
        let mut env = Env::default();
        self.sequence(&self.program.steps, &mut env);
        if let Some((output, path)) = &self.program.output {
            let env = env.clone();
            self.template(output, Place(path, ""), &env);
        }
        for step in walk(&self.program.steps) {
            if matches!(step.kind, StepKind::Set { .. }) && !step.id.is_empty() && !self.read.contains(step.id.as_str())
            {
                self.diagnostics.push(warning_at(
                    codes::UNUSED_VALUE,
                    step.path.pointer(),
                    format!("the value of step '{}' is never read", step.id),
                ));
            }
        }
        self.entries
    }

    fn sequence(&mut self, steps: &'p [Step], env: &mut Env<'p>) {
        for step in steps {
            self.step(step, env);
            // A step's output is addressable by the steps after it.
            env.visible.insert(step.id.as_str());
        }
    }

    fn step(&mut self, step: &'p Step, env: &Env<'p>) {
        match &step.kind {
            StepKind::Call { capability, with } => {
                if let Some(with) = with {
                    self.template(with, Place(&step.path, "with"), env);
                }
                self.call(step, capability, with.as_ref());
            }
            StepKind::Set { value } => self.template(value, Place(&step.path, "value"), env),
            StepKind::Branch { condition, then_steps, else_steps } => {
                for path in condition_paths(condition) {
                    self.path(path, Place(&step.path, "if"), env);
                }
                // Arm-local values stay in their arm (Scope rules).
                self.sequence(then_steps, &mut env.clone());
                self.sequence(else_steps, &mut env.clone());
            }
            StepKind::ForEach { over, var, body, collect } => {
                if let Some(over) = over {
                    self.path(over, Place(&step.path, "over"), env);
                }
                let mut inner = env.clone();
                inner.vars.insert(var.as_str());
                self.sequence(body, &mut inner);
                if let Some(collect) = collect {
                    self.template(collect, Place(&step.path, "collect"), &inner);
                }
            }
        }
    }

    fn template(&mut self, template: &'p Template, at: Place<'_>, env: &Env<'p>) {
        for path in template_paths(template) {
            self.path(path, at, env);
        }
    }

    fn path(&mut self, path: &'p PathExpr, at: Place<'_>, env: &Env<'p>) {
        // The pointer is built only for a finding: most paths are fine.
        match &path.root {
            Root::Input => self.input_path(path, at),
            Root::Step(id) => {
                if !self.steps.contains_key(id.as_str()) {
                    let names: Vec<&str> = self.steps.keys().copied().collect();
                    let diagnostic = error_at(
                        codes::UNKNOWN_STEP_REFERENCE,
                        at.pointer(),
                        format!("{} names step '{id}', which the program does not have", path.text),
                    );
                    self.diagnostics.push(with_hint(diagnostic, hint(id, names)));
                    return;
                }
                if !env.visible.contains(id.as_str()) {
                    self.diagnostics.push(with_hint(
                        error_at(
                            codes::SCOPE_VIOLATION,
                            at.pointer(),
                            format!("{} reads step '{id}', which is not addressable here", path.text),
                        ),
                        Some(
                            "a step's output is addressable only by later steps of the same list or their nested steps; values made inside a branch arm or loop body stay there (read a loop's results through the loop's own output)"
                                .to_owned(),
                        ),
                    ));
                    return;
                }
                self.read.insert(id.as_str());
                self.output_field(id, path, at);
            }
            Root::Var(name) => {
                if env.vars.contains(name.as_str()) {
                    return;
                }
                if self.all_vars.contains(name.as_str()) {
                    self.diagnostics.push(error_at(
                        codes::SCOPE_VIOLATION,
                        at.pointer(),
                        format!("{} reads loop variable '{name}' outside its loop body", path.text),
                    ));
                } else {
                    let mut roots = vec!["input", "steps"];
                    roots.extend(env.vars.iter().copied());
                    let diagnostic = error_at(
                        codes::BAD_EXPRESSION,
                        at.pointer(),
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

    fn input_path(&mut self, path: &PathExpr, at: Place<'_>) {
        let Some(declared) = &self.program.input else { return };
        let Some(Segment::Field(name)) = path.segments.first() else { return };
        if declared.iter().any(|param| &param.name == name) {
            return;
        }
        let names: Vec<&str> = declared.iter().map(|param| param.name.as_str()).collect();
        let diagnostic = error_at(
            codes::UNDECLARED_INPUT,
            at.pointer(),
            format!("{} reads input '{name}', which the program's 'input' does not declare", path.text),
        );
        self.diagnostics.push(with_hint(diagnostic, hint(name, names)));
    }

    fn output_field(&mut self, id: &str, path: &PathExpr, at: Place<'_>) {
        let Some(Segment::Field(field)) = path.segments.first() else { return };
        let Some(step) = self.steps.get(id) else { return };
        let StepKind::Call { capability, .. } = &step.kind else { return };
        if !self.outputs.contains_key(capability) {
            let Some(entry) = self.entries.get(capability) else { return };
            let schema = entry.output_schema.as_deref().and_then(ObjectSchema::parse);
            self.outputs.insert(capability.clone(), schema);
        }
        let Some(Some(schema)) = self.outputs.get(capability) else { return };
        if schema.properties.is_none() || schema.property(field).is_some() {
            return;
        }
        let diagnostic = warning_at(
            codes::UNKNOWN_OUTPUT_FIELD,
            at.pointer(),
            format!("{} reads '{field}', which the output_schema of '{capability}' does not list", path.text),
        );
        let hint = hint(field, schema.property_names());
        self.diagnostics.push(with_hint(diagnostic, hint));
    }

    fn call(&mut self, step: &Step, capability: &str, with: Option<&Template>) {
        if capability.is_empty() {
            return;
        }
        if !self.inputs.contains_key(capability) {
            let at = || step.path.at("capability").pointer();
            let Some(entry) = self.catalog.get(capability) else {
                let ids = self.catalog.ids();
                let diagnostic =
                    error_at(codes::UNKNOWN_CAPABILITY, at(), format!("unknown capability '{capability}'"));
                self.diagnostics.push(with_hint(diagnostic, hint(capability, ids.iter().map(String::as_str))));
                return;
            };
            if !is_callable(&entry.kind) {
                self.diagnostics.push(error_at(
                    codes::NOT_CALLABLE,
                    at(),
                    format!("'{capability}' is a '{}' entry, which cannot be called", entry.kind),
                ));
                return;
            }
            // Decoded once per entry, however many steps call it.
            let input = entry.input_schema.as_deref().and_then(ObjectSchema::parse);
            self.inputs.insert(capability.to_owned(), input);
            self.entries.insert(capability.to_owned(), entry);
        }
        if let Some(Some(schema)) = self.inputs.get(capability) {
            let findings = arguments(step, capability, schema, with);
            self.diagnostics.extend(findings);
        }
    }
}

/// Findings of the arguments in `with` against the entry's input schema.
fn arguments(step: &Step, capability: &str, schema: &ObjectSchema, with: Option<&Template>) -> Vec<Diagnostic> {
    let mut diagnostics = Vec::new();
    let with_path = || step.path.at("with");
    let members: &[(String, Template)] = match with {
        Some(Template::Object(members)) => members,
        _ => &[],
    };
    for name in &schema.required {
        if !members.iter().any(|(key, _)| key == name) {
            let at = if with.is_some() { with_path().pointer() } else { step.path.pointer() };
            diagnostics.push(error_at(
                codes::ARGUMENT_MISMATCH,
                at,
                format!("'{capability}' requires argument '{name}' in 'with'"),
            ));
        }
    }
    for (name, argument) in members {
        match schema.property(name) {
            None if schema.closed => {
                let diagnostic = error_at(
                    codes::ARGUMENT_MISMATCH,
                    with_path().at(name).pointer(),
                    format!("'{capability}' takes no argument '{name}'"),
                );
                diagnostics.push(with_hint(diagnostic, hint(name, schema.property_names())));
            }
            Some(property) => {
                if let Template::Literal(value) = argument
                    && let Some(expected) = type_mismatch(&property.types, value)
                {
                    diagnostics.push(error_at(
                        codes::ARGUMENT_MISMATCH,
                        with_path().at(name).pointer(),
                        format!("argument '{name}' of '{capability}' must be {expected}, found {value}"),
                    ));
                }
            }
            None => {}
        }
    }
    diagnostics
}

/// The expected type when a literal does not match a property's declared
/// `type`; `None` when it matches or the schema declares no type.
fn type_mismatch(types: &Types, value: &Value) -> Option<String> {
    if types.fits(value) { None } else { Some(format!("of type {}", types.names().collect::<Vec<_>>().join(" or "))) }
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
    // `any` (the one input type that is not a JSON type) fits everything.
    crate::schema::is_of_type(&param.type_name, value).unwrap_or(true)
}
