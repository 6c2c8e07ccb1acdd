//! A tenant's invocations during a Run: HTTP-bound entries over HTTP, and
//! promoted programs as sub-Runs (Part II §5.8.3, traced `opaque`), under
//! the caller's authority (Part II §10.4, `promotion_authority: caller`)
//! and within the expansion and invocation bounds (Part II §10.1).

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde_json::Value;

use super::invoker::HttpInvoker;
use super::promotion::{PromotedProgram, drifted};
use crate::tenancy::{Platform, Principal, Tenant, ValidationCache};
use pilotage_engine::admission::Pool;
use pilotage_engine::catalog::CatalogSnapshot;
use pilotage_engine::effects::{InvokeError, Invoker};
use pilotage_engine::execution::{self, ExecutionRequest};
use pilotage_engine::validation::{self, Program};
use pilotage_protocol::catalog::CatalogEntry;

/// Invokes entries for one Run of one caller.
pub(crate) struct TenantInvoker {
    platform: Platform,
    tenant: Arc<Tenant>,
    principal: Principal,
    snapshot: CatalogSnapshot,
    http: HttpInvoker,
    depth: u32,
    budget: Arc<AtomicU32>,
}

impl TenantInvoker {
    /// An invoker for a Run against `snapshot`, the caller's view.
    pub(crate) fn new(
        platform: &Platform,
        tenant: Arc<Tenant>,
        principal: Principal,
        snapshot: CatalogSnapshot,
    ) -> TenantInvoker {
        let bounds = platform.engine().bounds();
        let http = HttpInvoker::new(
            tenant.egress().clone(),
            Arc::default(),
            Duration::from_millis(bounds.invocation_timeout_ms),
            bounds.invocation_bytes,
        );
        TenantInvoker {
            budget: Arc::new(AtomicU32::new(bounds.invocations_per_run)),
            platform: platform.clone(),
            tenant,
            principal,
            snapshot,
            http,
            depth: 0,
        }
    }

    fn nested(&self, snapshot: CatalogSnapshot) -> TenantInvoker {
        TenantInvoker {
            platform: self.platform.clone(),
            tenant: self.tenant.clone(),
            principal: self.principal.clone(),
            snapshot,
            http: HttpInvoker::new(
                self.tenant.egress().clone(),
                Arc::default(),
                Duration::from_millis(self.platform.engine().bounds().invocation_timeout_ms),
                self.platform.engine().bounds().invocation_bytes,
            ),
            depth: self.depth + 1,
            budget: self.budget.clone(),
        }
    }

    /// Runs a promoted program as a sub-Run and returns its output. Its
    /// component calls take their places in the node's pools as calls of
    /// a Run (`Admission::admit_nested`): they never wait behind other
    /// tenants, since the parent Run already holds its place.
    async fn run_promoted(
        &self,
        program: &PromotedProgram,
        entry: &CatalogEntry,
        input: &Value,
    ) -> Result<Value, InvokeError> {
        let bounds = self.platform.engine().bounds();
        if self.depth + 1 > bounds.expansion_depth {
            return Err(InvokeError::Bound(format!(
                "promoted programs nest deeper than the bound of {}",
                bounds.expansion_depth
            )));
        }
        let Some(slot) = self.tenant.language(&program.language) else {
            return Err(InvokeError::Unavailable(format!(
                "the Language of '{}' is no longer available",
                program.program_ref
            )));
        };
        let snapshot = self.tenant.snapshot(&self.principal, &program.language);
        let changed = drifted(program, &snapshot);
        if !changed.is_empty() {
            return Err(InvokeError::SubRun(format!(
                "promotion_drift: {} changed since '{}' was promoted; promote it again",
                changed.join(", "),
                program.program_ref
            )));
        }
        if let Some(schema) = &entry.input_schema
            && let Ok(validator) = jsonschema::validator_for(schema)
            && let Some(error) = validator.iter_errors(input).next()
        {
            return Err(InvokeError::SubRun(format!("input_binding: {error} at '{}'", error.instance_path())));
        }
        let component = &slot.component;
        let program_text = Program::from_argument(
            component.description().program_kind,
            &program.body,
            bounds.program_bytes,
            bounds.nesting_depth,
        )
        .map_err(|failure| InvokeError::Bound(failure.to_string()))?;
        let key = ValidationCache::key(
            &self.tenant.id,
            component.sha256(),
            &program_text.digest(),
            snapshot.catalog_version(),
            None,
        );
        let admission = self.platform.engine().admission();
        let nested = |pool| {
            admission
                .admit_nested(pool, &self.tenant.id, component.need())
                .map_err(|refused| InvokeError::Bound(refused.to_string()))
        };
        let validated = match self.platform.validations().get(&key) {
            Some(hit) => hit,
            None => {
                let _place = nested(Pool::Validation)?;
                let result = Arc::new(
                    validation::validate(component, &program_text, None, &snapshot)
                        .await
                        .map_err(|f| InvokeError::SubRun(f.to_string()))?,
                );
                self.platform.validations().put(key, result.clone());
                result
            }
        };
        if !validated.response.valid {
            return Err(InvokeError::SubRun(format!("promotion_drift: '{}' no longer validates", program.program_ref)));
        }
        let findings = {
            let _place = nested(Pool::Validation)?;
            validation::bind_input(component, &program_text, Some(input))
                .await
                .map_err(|f| InvokeError::SubRun(f.to_string()))?
        };
        if let Some(finding) = findings.first() {
            return Err(InvokeError::SubRun(format!("input_binding: {}", finding.message)));
        }
        let run_id = format!("{}/sub", program.program_ref);
        let _place = nested(Pool::Execution)?;
        let execution = execution::execute(
            component,
            ExecutionRequest {
                program: &program_text,
                input: Some(input),
                context: None,
                plan: validated.plan.as_ref(),
                references: &validated.references,
                statements: &validated.statements,
                data_source: self.tenant.data_source_for(&program.language),
                catalog: snapshot.clone(),
                invoker: Arc::new(self.nested(snapshot)),
                test_run: false,
                deploy: false,
                clock_ms: None,
                run_id: &run_id,
            },
        )
        .await;
        if execution.outcome.ok {
            Ok(execution.output.unwrap_or(Value::Null))
        } else {
            Err(InvokeError::SubRun(format!(
                "'{}' ended {}: {}",
                program.program_ref,
                execution.outcome.status,
                execution.outcome.error.unwrap_or_default()
            )))
        }
    }
}

#[async_trait::async_trait]
impl Invoker for TenantInvoker {
    async fn invoke(&self, entry: &CatalogEntry, input: &Value) -> Result<Value, InvokeError> {
        let left = self.budget.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| left.checked_sub(1));
        if left.is_err() {
            return Err(InvokeError::Bound("the Run reached its invocation bound (sub-programs included)".into()));
        }
        if let Some(program) = self.tenant.promoted(&entry.id)
            && program.entry.kind == entry.kind
        {
            return self.run_promoted(&program, entry, input).await;
        }
        let Some(binding) = self.snapshot.get_stored(&entry.id).and_then(|stored| stored.binding.as_ref()) else {
            return Err(InvokeError::Unavailable(format!("'{}' has no binding: nothing serves it", entry.id)));
        };
        // Most bindings name no secret: their headers are sent as they are.
        if binding.headers.values().all(|value| pilotage_store::sealing::referenced(value).is_empty()) {
            return self.http.invoke_binding(binding, input).await;
        }
        let mut headers = binding.headers.clone();
        for value in headers.values_mut() {
            for name in pilotage_store::sealing::referenced(value) {
                let secret = self.platform.secret_value(&self.tenant.id, &name).await.map_err(|error| {
                    InvokeError::Unavailable(format!("the binding of '{}' needs secret '{name}': {error}", entry.id))
                })?;
                *value = value.replace(&format!("{{secret:{name}}}"), &secret);
            }
        }
        self.http.invoke_with_headers(binding, input, &headers).await
    }
}
