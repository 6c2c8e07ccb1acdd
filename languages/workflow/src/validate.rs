//! Static checks and plan derivation for workflow/v1 (Part II §5.5, §5.6).
//! Validation reads the caller's visible catalog and nothing else; it
//! never invokes an entry.

use rustc_hash::{FxHashMap, FxHashSet};

use pilotage_guest_sdk::diag::{INPUT_BINDING, SAFE, aggregate, error_at, warning_at};
use pilotage_guest_sdk::findings::Findings;
use pilotage_guest_sdk::{Arm, Catalog, CatalogEntry, Diagnostic, Plan, PlanStep, RiskHints, Severity, Validation};
use serde_json::Value;

use crate::codes;
use crate::doc::Doc;
use crate::expr::{PathExpr, Root, Segment, Template, condition_paths, template_paths};
use crate::program::{InputParam, Location, Program, Step, StepKind, parse, walk};
use crate::schema::{ObjectSchema, Types};

/// Whether an entry kind can be called by a `call` step.
pub fn is_callable(kind: &str) -> bool {
    codes::ENTRY_KINDS.iter().any(|(name, callable, _)| *name == kind && *callable)
}

/// Validates `document` against `catalog` (the caller's visible catalog):
/// every finding, and, when the program is valid, its plan and references.
pub fn validate(document: &str, catalog: &dyn Catalog) -> Validation {
    let doc = Doc::parse(document);
    let (program, mut diagnostics) = parse(doc.as_ref());
    let steps = walk(&program.steps);
    let called = called(&steps);
    // Every entry the program calls, read once before the checks so the
    // checks can borrow the entries' schemas (`None`: not visible).
    let entries: FxHashMap<&str, Option<CatalogEntry>> = called.iter().map(|id| (*id, catalog.entry(id))).collect();
    Checker::new(&program, &steps, catalog, &entries, &mut diagnostics).run();
    let valid = !diagnostics.iter().any(|d| d.severity == Severity::Error);
    let plan = valid.then(|| derive_plan(&program, &entries));
    let references = called.iter().map(|id| (*id).to_owned()).collect();
    // Inside a component the instance is discarded when the call returns:
    // freeing the program's tree would cost instructions and give nothing
    // back. Native callers (tests, tools) free it as usual.
    #[cfg(target_family = "wasm")]
    {
        std::mem::forget(entries);
        std::mem::forget(called);
        std::mem::forget(steps);
        std::mem::forget(program);
        std::mem::forget(doc);
    }
    Validation { diagnostics, plan, references, statements: Vec::new() }
}

/// Every catalog entry the program calls, in document order, once.
pub fn references(program: &Program) -> Vec<String> {
    called(&walk(&program.steps)).into_iter().map(str::to_owned).collect()
}

/// The entry ids `steps` call, in order, once each.
fn called<'p>(steps: &[&Step<'p>]) -> Vec<&'p str> {
    let mut seen = FxHashSet::default();
    steps
        .iter()
        .filter_map(|step| match step.kind {
            StepKind::Call { capability, .. } if !capability.is_empty() => Some(capability),
            _ => None,
        })
        .filter(|id| seen.insert(*id))
        .collect()
}

/// Where a path expression sits: a member of the value at a path (`""`:
/// the value itself). The pointer text is built only for a finding.
#[derive(Clone, Copy)]
struct Place<'a>(&'a Location, &'a str);

impl Place<'_> {
    fn pointer(self) -> String {
        if self.1.is_empty() { self.0.pointer() } else { self.0.at(self.1) }
    }
}

/// Where a step sits: the names addressable there. Step ids are numbered
/// (see [`Checker::ids`]); entering an arm or a loop body records what it
/// makes visible and leaving it takes that back, so nothing is copied.
struct Env<'p> {
    /// By step number: whether that step's output is addressable.
    visible: Vec<bool>,
    /// Step numbers made visible, in order, for taking back.
    shown: Vec<usize>,
    /// Loop variables in scope, innermost last.
    vars: Vec<&'p str>,
}

impl Env<'_> {
    /// Takes back what was made visible since `mark` (a length of `shown`).
    fn restore(&mut self, mark: usize) {
        for number in self.shown.drain(mark..) {
            self.visible[number] = false;
        }
    }
}

/// The checks of one program; `'p` is the program (and its document).
struct Checker<'p, 'x> {
    program: &'p Program<'p>,
    /// Every step, depth first.
    steps: &'p [&'p Step<'p>],
    catalog: &'p dyn Catalog,
    /// The entries the program calls (`None`: not in the visible catalog).
    entries: &'p FxHashMap<&'p str, Option<CatalogEntry>>,
    diagnostics: &'x mut Vec<Diagnostic>,
    /// Every step id, numbered by the position of its first step in
    /// `steps`.
    ids: FxHashMap<&'p str, usize>,
    /// Every loop variable name used anywhere.
    all_vars: FxHashSet<&'p str>,
    /// Input schemas of called entries, decoded once per validation.
    inputs: FxHashMap<&'p str, Option<ObjectSchema<'p>>>,
    /// Output schemas, decoded when a path first reads a field.
    outputs: FxHashMap<&'p str, Option<ObjectSchema<'p>>>,
    /// By step number: whether some path reads that step's output.
    read: Vec<bool>,
}

impl<'p, 'x> Checker<'p, 'x> {
    fn new(
        program: &'p Program<'p>,
        steps: &'p [&'p Step<'p>],
        catalog: &'p dyn Catalog,
        entries: &'p FxHashMap<&'p str, Option<CatalogEntry>>,
        diagnostics: &'x mut Vec<Diagnostic>,
    ) -> Self {
        let mut ids = FxHashMap::default();
        let mut all_vars = FxHashSet::default();
        for (number, step) in steps.iter().enumerate() {
            if step.id.is_empty() {
                continue;
            }
            if step.id.contains(['#', '/']) {
                diagnostics.push(error_at(
                    codes::RESERVED_CHARACTER,
                    step.location.at("id"),
                    format!("step id '{}' contains '#' or '/', which are reserved for trace identity", step.id),
                ));
            }
            if ids.contains_key(step.id) {
                diagnostics.push(error_at(
                    codes::DUPLICATE_STEP_ID,
                    step.location.at("id"),
                    format!("step id '{}' is used by an earlier step; ids are unique across the program", step.id),
                ));
            } else {
                ids.insert(step.id, number);
            }
            if let StepKind::ForEach { var, .. } = step.kind {
                all_vars.insert(var);
            }
        }
        Checker {
            program,
            steps,
            catalog,
            entries,
            diagnostics,
            ids,
            all_vars,
            inputs: FxHashMap::default(),
            outputs: FxHashMap::default(),
            read: vec![false; steps.len()],
        }
    }

    fn run(mut self) {
        let mut env = Env { visible: vec![false; self.steps.len()], shown: Vec::new(), vars: Vec::new() };
        self.sequence(&self.program.steps, &mut env);
        if let Some(output) = &self.program.output {
            self.template(output, Place(&Location::Root, "output"), &env);
        }
        for step in self.steps {
            let unread = self.ids.get(step.id).is_some_and(|number| !self.read[*number]);
            if matches!(step.kind, StepKind::Set { .. }) && unread {
                self.diagnostics.push(warning_at(
                    codes::UNUSED_VALUE,
                    step.location.pointer(),
                    format!("the value of step '{}' is never read", step.id),
                ));
            }
        }
    }

    fn sequence(&mut self, steps: &'p [Step<'p>], env: &mut Env<'p>) {
        for step in steps {
            self.step(step, env);
            // A step's output is addressable by the steps after it.
            if let Some(&number) = self.ids.get(step.id)
                && !env.visible[number]
            {
                env.visible[number] = true;
                env.shown.push(number);
            }
        }
    }

    fn step(&mut self, step: &'p Step<'p>, env: &mut Env<'p>) {
        let at = |member| Place(&step.location, member);
        match &step.kind {
            StepKind::Call { capability, with } => {
                if let Some(with) = with {
                    self.template(with, at("with"), env);
                }
                self.call(step, capability, with.as_ref());
            }
            StepKind::Set { value } => self.template(value, at("value"), env),
            StepKind::Branch { condition, then_steps, else_steps } => {
                for path in condition_paths(condition) {
                    self.path(path, at("if"), env);
                }
                // Arm-local values stay in their arm (Scope rules).
                for arm in [then_steps, else_steps] {
                    let mark = env.shown.len();
                    self.sequence(arm, env);
                    env.restore(mark);
                }
            }
            StepKind::ForEach { over, var, body, collect } => {
                if let Some(over) = over {
                    self.path(over, at("over"), env);
                }
                let mark = env.shown.len();
                env.vars.push(var);
                self.sequence(body, env);
                if let Some(collect) = collect {
                    self.template(collect, at("collect"), env);
                }
                env.vars.pop();
                env.restore(mark);
            }
        }
    }

    fn template(&mut self, template: &'p Template<'p>, at: Place<'_>, env: &Env<'p>) {
        for path in template_paths(template) {
            self.path(path, at, env);
        }
    }

    fn path(&mut self, path: &'p PathExpr<'p>, at: Place<'_>, env: &Env<'p>) {
        // The pointer is built only for a finding: most paths are fine.
        match path.root {
            Root::Input => self.input_path(path, at),
            Root::Step(id) => {
                let Some(&number) = self.ids.get(id) else {
                    // Sorted, so the hint does not depend on the map's order.
                    let mut names: Vec<&str> = self.ids.keys().copied().collect();
                    names.sort_unstable();
                    let message = format!("{} names step '{id}', which the program does not have", path.text);
                    return self
                        .diagnostics
                        .error(codes::UNKNOWN_STEP_REFERENCE, at.pointer(), message)
                        .close_to(id, names);
                };
                if !env.visible[number] {
                    let message = format!("{} reads step '{id}', which is not addressable here", path.text);
                    let hint = "a step's output is addressable only by later steps of the same list or their nested steps; values made inside a branch arm or loop body stay there (read a loop's results through the loop's own output)";
                    return self.diagnostics.error(codes::SCOPE_VIOLATION, at.pointer(), message).hint(hint.to_owned());
                }
                self.read[number] = true;
                self.output_field(self.steps[number], path, at);
            }
            Root::Var(name) => {
                if env.vars.contains(&name) {
                    return;
                }
                if self.all_vars.contains(name) {
                    self.diagnostics.push(error_at(
                        codes::SCOPE_VIOLATION,
                        at.pointer(),
                        format!("{} reads loop variable '{name}' outside its loop body", path.text),
                    ));
                } else {
                    let mut roots = vec!["input", "steps"];
                    roots.extend(env.vars.iter().copied());
                    let message = format!(
                        "{} starts with '{name}', which is neither input, steps nor a loop variable in scope",
                        path.text
                    );
                    self.diagnostics.error(codes::BAD_EXPRESSION, at.pointer(), message).close_to(name, roots);
                }
            }
        }
    }

    fn input_path(&mut self, path: &PathExpr, at: Place<'_>) {
        let Some(declared) = &self.program.input else { return };
        let Some(Segment::Field(name)) = path.segments.first() else { return };
        if declared.iter().any(|param| param.name == *name) {
            return;
        }
        let names: Vec<&str> = declared.iter().map(|param| param.name).collect();
        let message = format!("{} reads input '{name}', which the program's 'input' does not declare", path.text);
        self.diagnostics.error(codes::UNDECLARED_INPUT, at.pointer(), message).close_to(name, names);
    }

    /// The callable entry `capability` names, if visible.
    fn callable(&self, capability: &str) -> Option<&'p CatalogEntry> {
        let entries: &'p FxHashMap<&'p str, Option<CatalogEntry>> = self.entries;
        entries.get(capability)?.as_ref().filter(|entry| is_callable(&entry.kind))
    }

    fn output_field(&mut self, step: &'p Step<'p>, path: &PathExpr, at: Place<'_>) {
        let Some(Segment::Field(field)) = path.segments.first() else { return };
        let StepKind::Call { capability, .. } = step.kind else { return };
        let Some(entry) = self.callable(capability) else { return };
        let schema = self
            .outputs
            .entry(capability)
            .or_insert_with(|| entry.output_schema.as_deref().and_then(ObjectSchema::parse));
        let Some(schema) = schema else { return };
        if schema.properties.is_none() || schema.property(field).is_some() {
            return;
        }
        let message = format!("{} reads '{field}', which the output_schema of '{capability}' does not list", path.text);
        self.diagnostics
            .warning(codes::UNKNOWN_OUTPUT_FIELD, at.pointer(), message)
            .close_to(field, schema.property_names());
    }

    fn call(&mut self, step: &Step, capability: &'p str, with: Option<&Template>) {
        if capability.is_empty() {
            return;
        }
        let at = || step.location.at("capability");
        // Copied out so the entry outlives this borrow of `self`.
        let entries: &'p FxHashMap<&'p str, Option<CatalogEntry>> = self.entries;
        let entry = match entries.get(capability) {
            Some(Some(entry)) => entry,
            _ => {
                let ids = self.catalog.ids();
                let message = format!("unknown capability '{capability}'");
                return self
                    .diagnostics
                    .error(codes::UNKNOWN_CAPABILITY, at(), message)
                    .close_to(capability, ids.iter().map(String::as_str));
            }
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
        let schema = self
            .inputs
            .entry(capability)
            .or_insert_with(|| entry.input_schema.as_deref().and_then(ObjectSchema::parse));
        if let Some(schema) = schema {
            let findings = arguments(step, capability, schema, with);
            self.diagnostics.extend(findings);
        }
    }
}

/// Findings of the arguments in `with` against the entry's input schema.
fn arguments(step: &Step, capability: &str, schema: &ObjectSchema, with: Option<&Template>) -> Vec<Diagnostic> {
    let mut diagnostics = Vec::new();
    let with_path = || step.location.path().at("with");
    let members: &[(&str, Template)] = match with {
        Some(Template::Object(members)) => members,
        _ => &[],
    };
    for name in &schema.required {
        if !members.iter().any(|(key, _)| key == name) {
            let at = if with.is_some() { with_path().pointer() } else { step.location.pointer() };
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
                let message = format!("'{capability}' takes no argument '{name}'");
                let at = with_path().at(name).pointer();
                diagnostics.error(codes::ARGUMENT_MISMATCH, at, message).close_to(name, schema.property_names());
            }
            Some(property) => {
                if let Template::Literal(value) = argument
                    && let Some(expected) = type_mismatch(&property.types, &value.to_value())
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

fn derive_plan(program: &Program, entries: &FxHashMap<&str, Option<CatalogEntry>>) -> Plan {
    let mut steps = Vec::new();
    plan_sequence(&program.steps, None, None, entries, &mut steps);
    let max = aggregate(steps.iter().map(|step: &PlanStep| step.risk_hints));
    Plan { steps, max_risk: codes::risk_label(max.read_only, max.destructive, max.open_world).to_owned() }
}

fn plan_sequence(
    steps: &[Step],
    arm: Option<&Arm>,
    loop_id: Option<&str>,
    entries: &FxHashMap<&str, Option<CatalogEntry>>,
    out: &mut Vec<PlanStep>,
) {
    for step in steps {
        let (calls, risk, risk_hints): (Option<String>, String, RiskHints) = match &step.kind {
            StepKind::Call { capability, .. } => match entries.get(capability).and_then(Option::as_ref) {
                Some(entry) => (Some((*capability).to_owned()), entry.risk.clone(), entry.risk_hints),
                None => {
                    (Some((*capability).to_owned()), "destructive".to_owned(), pilotage_guest_sdk::diag::DESTRUCTIVE)
                }
            },
            _ => (None, "safe".to_owned(), SAFE),
        };
        out.push(PlanStep {
            id: step.id.to_owned(),
            calls,
            arm: arm.cloned(),
            loop_: loop_id.map(str::to_owned),
            risk,
            risk_hints,
        });
        match &step.kind {
            StepKind::Branch { then_steps, else_steps, .. } => {
                for (label, arm_steps) in [("then", then_steps), ("else", else_steps)] {
                    let arm = Arm { branch: step.id.to_owned(), label: label.to_owned() };
                    plan_sequence(arm_steps, Some(&arm), loop_id, entries, out);
                }
            }
            StepKind::ForEach { body, .. } => plan_sequence(body, arm, Some(step.id), entries, out),
            StepKind::Call { .. } | StepKind::Set { .. } => {}
        }
    }
}

/// Checks `input` against the program's declaration (the parameter-binding
/// convention): `input_binding` findings with pointers into `input`.
pub fn bind_input(document: &str, input: Option<&Value>) -> Vec<Diagnostic> {
    let doc = Doc::parse(document);
    let (program, _) = parse(doc.as_ref());
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
        match members.get(param.name) {
            None if param.required => diagnostics.push(error_at(
                INPUT_BINDING,
                "",
                format!("input '{}' ({}) is required", param.name, param.type_name),
            )),
            Some(value) if !fits_param(param, value) => diagnostics.push(error_at(
                INPUT_BINDING,
                pilotage_guest_sdk::pointer::pointer([param.name]),
                format!("input '{}' must be of type {}, found {value}", param.name, param.type_name),
            )),
            _ => {}
        }
    }
    for name in members.keys() {
        if !declared.iter().any(|param| param.name == name) {
            let names = declared.iter().map(|param| param.name);
            let message = format!("input '{name}' is not declared by the program");
            diagnostics
                .error(INPUT_BINDING, pilotage_guest_sdk::pointer::pointer([name]), message)
                .close_to(name, names);
        }
    }
    diagnostics
}

fn fits_param(param: &InputParam, value: &Value) -> bool {
    // `any` (the one input type that is not a JSON type) fits everything.
    crate::schema::is_of_type(param.type_name, value).unwrap_or(true)
}
