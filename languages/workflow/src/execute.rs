//! The workflow/v1 interpreter: runs a validated program step by step,
//! invoking catalog entries only through the host, and records the flat
//! trace of Part II §5.8.2 as it goes.

use pilotage_guest_sdk::diag::{ERROR, PARTIAL, failure, success};
use pilotage_guest_sdk::trace::TraceBuilder;
use pilotage_guest_sdk::{Effects, InvokeError, RunResult};
use serde_json::{Map, Value};

use crate::doc::Doc;
use crate::expr::{PathExpr, Root, Scope, Template, decide, evaluate, resolve, template_paths};
use crate::program::{Program, Step, StepKind, parse};

/// Runs `document` (already validated by the host) with `input` (an empty
/// object when absent), every call through `effects`.
pub fn execute(document: &str, input: Option<Value>, effects: &mut dyn Effects) -> RunResult {
    let doc = Doc::parse(document);
    let (program, diagnostics) = parse(doc.as_ref());
    if !diagnostics.is_empty() {
        // The host validates before executing; reaching here means it did not.
        return RunResult {
            outcome: failure(ERROR, "the program does not parse; validate it first"),
            output: None,
            steps: Vec::new(),
            stats: None,
        };
    }
    let mut run = Run {
        input: input.unwrap_or(Value::Object(Map::new())),
        frames: vec![Frame::default()],
        trace: TraceBuilder::new(),
        effects,
        invocations: 0,
    };
    let result = run.sequence(&program.steps);
    let invocations = run.invocations;
    let stats = Some(serde_json::json!({ "invocations": invocations }).to_string());
    match result.and_then(|()| run.output(&program)) {
        Ok(output) => RunResult { outcome: success(), output, steps: run.trace.finish(), stats },
        Err(Stop(message)) => {
            // Effects are possible once any entry has been invoked.
            let status = if invocations > 0 { PARTIAL } else { ERROR };
            RunResult { outcome: failure(status, message), output: None, steps: run.trace.finish(), stats }
        }
    }
}

/// Execution stopped; the message becomes the Run's `outcome.error`.
struct Stop(String);

/// The values addressable in one block: step outputs and loop variables.
#[derive(Default)]
struct Frame<'d> {
    values: Vec<(Root<'d>, Value)>,
}

struct Run<'d, 'e> {
    input: Value,
    frames: Vec<Frame<'d>>,
    trace: TraceBuilder,
    effects: &'e mut dyn Effects,
    invocations: u32,
}

struct Frames<'r, 'd> {
    input: &'r Value,
    frames: &'r [Frame<'d>],
}

impl Scope for Frames<'_, '_> {
    fn root(&self, root: Root<'_>) -> Option<&Value> {
        if root == Root::Input {
            return Some(self.input);
        }
        self.frames
            .iter()
            .rev()
            .find_map(|frame| frame.values.iter().rev().find(|(name, _)| *name == root).map(|(_, value)| value))
    }
}

impl<'d> Run<'d, '_> {
    fn scope(&self) -> Frames<'_, 'd> {
        Frames { input: &self.input, frames: &self.frames }
    }

    fn bind(&mut self, root: Root<'d>, value: Value) {
        if let Some(frame) = self.frames.last_mut() {
            frame.values.push((root, value));
        }
    }

    fn sequence(&mut self, steps: &[Step<'d>]) -> Result<(), Stop> {
        for step in steps {
            self.step(step)?;
        }
        Ok(())
    }

    fn step(&mut self, step: &Step<'d>) -> Result<(), Stop> {
        let trace_id = self.trace.id(step.id);
        match &step.kind {
            StepKind::Call { capability, with } => {
                let arguments = match with {
                    Some(template) => evaluate(template, &self.scope()),
                    None => Ok(Value::Object(Map::new())),
                };
                let arguments = match arguments {
                    Ok(arguments) => arguments,
                    Err(message) => return Err(self.fail_step(trace_id, Some(capability), None, message)),
                };
                let started = self.effects.now();
                self.invocations += 1;
                let result = self.effects.invoke(&trace_id, capability, &arguments);
                let elapsed = self.effects.now().saturating_sub(started);
                match result {
                    Ok(output) => {
                        self.trace.step(
                            trace_id,
                            Some((*capability).to_owned()),
                            Some(arguments.to_string()),
                            Some(output.to_string()),
                            success(),
                            Some(elapsed),
                        );
                        self.bind(Root::Step(step.id), output);
                        Ok(())
                    }
                    Err(InvokeError::Failed(message)) | Err(InvokeError::Refused(message)) => {
                        let message = format!("step '{}' ({capability}) failed: {message}", step.id);
                        self.trace.step(
                            trace_id,
                            Some((*capability).to_owned()),
                            Some(arguments.to_string()),
                            Some(Value::Null.to_string()),
                            failure(ERROR, message.clone()),
                            Some(elapsed),
                        );
                        Err(Stop(message))
                    }
                }
            }
            StepKind::Set { value } => {
                let read = read_values(template_paths(value), &self.scope());
                match evaluate(value, &self.scope()) {
                    Ok(result) => {
                        self.trace.step(
                            trace_id,
                            None,
                            Some(read.to_string()),
                            Some(result.to_string()),
                            success(),
                            Some(0),
                        );
                        self.bind(Root::Step(step.id), result);
                        Ok(())
                    }
                    Err(message) => Err(self.fail_step(trace_id, None, Some(read), message)),
                }
            }
            StepKind::Branch { condition, then_steps, else_steps } => {
                let (truth, because) = match decide(condition, &self.scope()) {
                    Ok(decision) => decision,
                    Err(message) => {
                        let message = format!("branch '{}': {message}", step.id);
                        let index = self.trace.branch(step.id, "none", message.clone());
                        self.trace.set_outcome(index, failure(ERROR, message.clone()));
                        return Err(Stop(message));
                    }
                };
                let (label, arm) = if truth { ("then", then_steps) } else { ("else", else_steps) };
                self.trace.branch(step.id, label, because);
                self.frames.push(Frame::default());
                let result = self.sequence(arm);
                self.frames.pop();
                result
            }
            StepKind::ForEach { over, var, body, collect } => {
                self.for_each(step, over.as_ref(), var, body, collect.as_ref())
            }
        }
    }

    fn for_each(
        &mut self,
        step: &Step<'d>,
        over: Option<&PathExpr>,
        var: &'d str,
        body: &[Step<'d>],
        collect: Option<&Template>,
    ) -> Result<(), Stop> {
        let handle = self.trace.enter_loop(step.id);
        let items = match over.map(|path| (path, resolve(path, &self.scope()).cloned())) {
            Some((_, Some(Value::Array(items)))) => items,
            Some((path, found)) => {
                let message = match found {
                    Some(value) => format!("loop '{}': {} is {value}, not a list", step.id, path.text),
                    None => format!("loop '{}': {} resolved to nothing", step.id, path.text),
                };
                self.trace.exit_loop(handle, message.clone());
                self.trace.set_outcome(handle.index(), failure(ERROR, message.clone()));
                return Err(Stop(message));
            }
            None => Vec::new(),
        };
        let total = items.len();
        let mut collected = Vec::with_capacity(total);
        for (position, item) in items.into_iter().enumerate() {
            self.trace.next_iteration(handle, format!("item {} of {total}", position + 1));
            self.frames.push(Frame::default());
            self.bind(Root::Var(var), item.clone());
            let mut result = self.sequence(body);
            if result.is_ok() {
                let value = match collect {
                    Some(template) => {
                        evaluate(template, &self.scope()).map_err(|m| Stop(format!("loop '{}' collect: {m}", step.id)))
                    }
                    None => Ok(item),
                };
                match value {
                    Ok(value) => collected.push(value),
                    Err(stop) => result = Err(stop),
                }
            }
            self.frames.pop();
            if let Err(stop) = result {
                self.trace.abandon_loop(handle);
                return Err(stop);
            }
        }
        let reason = if total == 0 { "the list is empty".to_owned() } else { format!("all {total} items done") };
        self.trace.exit_loop(handle, reason);
        self.bind(Root::Step(step.id), Value::Array(collected));
        Ok(())
    }

    fn fail_step(&mut self, trace_id: String, calls: Option<&str>, read: Option<Value>, message: String) -> Stop {
        let input = read.unwrap_or(Value::Null).to_string();
        self.trace.step(
            trace_id,
            calls.map(str::to_owned),
            Some(input),
            Some(Value::Null.to_string()),
            failure(ERROR, message.clone()),
            Some(0),
        );
        Stop(message)
    }

    fn output(&self, program: &Program) -> Result<Option<String>, Stop> {
        match &program.output {
            None => Ok(None),
            Some(template) => evaluate(template, &self.scope())
                .map(|value| Some(value.to_string()))
                .map_err(|message| Stop(format!("output mapping: {message}"))),
        }
    }
}

/// The `input` recorded for a `set` step: each path it reads, with the
/// value found (null when nothing).
fn read_values(paths: Vec<&PathExpr>, scope: &dyn Scope) -> Value {
    let mut read = Map::new();
    for path in paths {
        read.insert(path.text.to_owned(), resolve(path, scope).cloned().unwrap_or(Value::Null));
    }
    Value::Object(read)
}
