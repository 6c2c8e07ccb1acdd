//! The closed label sets of the metrics: MCP methods and outcomes,
//! validation results, capacity pools, component call kinds, evaluation
//! bounds, host guarantees, store operations and the kinds of Run a
//! tenant's usage counts. Each enum's `as_str` is its label value and its
//! `ALL` lists the values in index order, so a family's handles are
//! resolved once into an array the enum indexes.

/// The MCP methods counted under their own name (`method` label); any
/// other method is `other`.
pub(super) const MCP_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "server/discover",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
    "subscriptions/listen",
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
    "skills/list",
    "skills/get",
    "resources/directory/read",
    "other",
];

/// How an MCP request ended (`outcome` label of the request metrics).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum McpOutcome {
    /// A result; for `tools/call`, one with `isError: false`.
    Ok,
    /// A `tools/call` result with `isError: true`: a Pilotage request
    /// error (Part III §7.2), OpenTelemetry's `tool_error`.
    ToolError,
    /// A JSON-RPC error response (a carrier error, Part III §7.1).
    RpcError,
}

impl McpOutcome {
    pub(super) const ALL: [McpOutcome; 3] = [McpOutcome::Ok, McpOutcome::ToolError, McpOutcome::RpcError];

    /// The label value: `ok`, `tool_error` or `rpc_error`.
    pub fn as_str(self) -> &'static str {
        match self {
            McpOutcome::Ok => "ok",
            McpOutcome::ToolError => "tool_error",
            McpOutcome::RpcError => "rpc_error",
        }
    }
}

/// How a validation ended (`result` label of `pilotage_validations_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ValidationResult {
    /// `valid: true`.
    Valid,
    /// `valid: false` (diagnostics with an error).
    Invalid,
    /// A validation bound was exceeded (`bounds_exceeded`).
    BoundsExceeded,
    /// The validator failed (`internal`).
    Failed,
}

impl ValidationResult {
    pub(super) const ALL: [ValidationResult; 4] = [
        ValidationResult::Valid,
        ValidationResult::Invalid,
        ValidationResult::BoundsExceeded,
        ValidationResult::Failed,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            ValidationResult::Valid => "valid",
            ValidationResult::Invalid => "invalid",
            ValidationResult::BoundsExceeded => "bounds_exceeded",
            ValidationResult::Failed => "failed",
        }
    }
}

/// Which of the node's pools a capacity figure is about (`pool` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CapacityPool {
    /// `describe`, `validate`, `bind-input`.
    Validation,
    /// Runs.
    Execution,
}

impl CapacityPool {
    pub(super) const ALL: [CapacityPool; 2] = [CapacityPool::Validation, CapacityPool::Execution];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            CapacityPool::Validation => "validation",
            CapacityPool::Execution => "execution",
        }
    }
}

/// Which bounds a component call ran under (`call` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CallLabel {
    /// `describe`, `validate`, `bind-input`.
    Validation,
    /// `execute`.
    Execution,
}

impl CallLabel {
    pub(super) const ALL: [CallLabel; 2] = [CallLabel::Validation, CallLabel::Execution];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            CallLabel::Validation => "validation",
            CallLabel::Execution => "execution",
        }
    }
}

/// A bound that stopped a call or a Run (Part II §10.1; `bound` label of
/// `pilotage_bound_trips_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BoundKind {
    /// Fuel ran out.
    Fuel,
    /// The memory limiter refused a growth.
    Memory,
    /// The wall-time deadline fired (epoch interruption, or a statement
    /// stopped at the Run's deadline).
    Deadline,
    /// The wasm stack bound.
    Stack,
    /// The result was larger than `result_bytes`.
    ResultBytes,
    /// The Run reached `invocations_per_run`.
    Invocations,
}

impl BoundKind {
    pub(super) const ALL: [BoundKind; 6] = [
        BoundKind::Fuel,
        BoundKind::Memory,
        BoundKind::Deadline,
        BoundKind::Stack,
        BoundKind::ResultBytes,
        BoundKind::Invocations,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            BoundKind::Fuel => "fuel",
            BoundKind::Memory => "memory",
            BoundKind::Deadline => "deadline",
            BoundKind::Stack => "stack",
            BoundKind::ResultBytes => "result_bytes",
            BoundKind::Invocations => "invocations",
        }
    }
}

/// A guarantee of the host that a component broke (`kind` label of
/// `pilotage_host_guarantee_violations_total`): the `engine_fault` cases of
/// execution (Part II §6.5.4, §10.1) and the defects the host corrects in
/// a validation (Part II §5.5, §6.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GuaranteeKind {
    /// The component trapped (a panic, `unreachable`, a bad access).
    Trap,
    /// It tried to invoke an entry or run a statement outside its
    /// validated program, or an entry the caller cannot see.
    Containment,
    /// Its trace hid or invented an invocation or a statement.
    TraceMismatch,
    /// Its trace broke plan–trace correspondence.
    PlanCorrespondence,
    /// Its result broke the contract: an outcome inconsistent with `ok`, a
    /// status outside the Language's closed set, output that is not JSON,
    /// a malformed trace step.
    MalformedResult,
    /// A validation defect the host corrected (an undeclared diagnostic
    /// code, a reserved character in a step id, a plan calling an
    /// invisible entry).
    ValidationDefect,
}

impl GuaranteeKind {
    pub(super) const ALL: [GuaranteeKind; 6] = [
        GuaranteeKind::Trap,
        GuaranteeKind::Containment,
        GuaranteeKind::TraceMismatch,
        GuaranteeKind::PlanCorrespondence,
        GuaranteeKind::MalformedResult,
        GuaranteeKind::ValidationDefect,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            GuaranteeKind::Trap => "trap",
            GuaranteeKind::Containment => "containment",
            GuaranteeKind::TraceMismatch => "trace_mismatch",
            GuaranteeKind::PlanCorrespondence => "plan_correspondence",
            GuaranteeKind::MalformedResult => "malformed_result",
            GuaranteeKind::ValidationDefect => "validation_defect",
        }
    }
}

/// A store operation whose latency is measured (`operation` label of
/// `pilotage_store_operation_duration_seconds`): the ones on a request's
/// path and the periodic ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StoreOperation {
    /// `Store::ping` (`/readyz`).
    Ping,
    /// Writing a retained Run.
    RunInsert,
    /// Reading a Run (trace fetch).
    RunGet,
    /// Deleting a session's Runs.
    RunsDeleteSession,
    /// The stored-bytes quota read.
    RunBytesOfTenant,
    /// The expiry sweep.
    Sweep,
    /// Claiming an idempotency key.
    IdempotencyClaim,
    /// Reading an idempotency key.
    IdempotencyGet,
    /// Renewing a claim's lease.
    IdempotencyRenew,
    /// Recording a claimed Run's response.
    IdempotencyComplete,
    /// Taking over a claim whose lease ran out.
    IdempotencyTakeOver,
    /// Releasing a refused Run's claim.
    IdempotencyRelease,
    /// Storing a promoted program.
    PromotedInsert,
    /// Writing an audit record.
    Audit,
}

impl StoreOperation {
    pub(super) const ALL: [StoreOperation; 14] = [
        StoreOperation::Ping,
        StoreOperation::RunInsert,
        StoreOperation::RunGet,
        StoreOperation::RunsDeleteSession,
        StoreOperation::RunBytesOfTenant,
        StoreOperation::Sweep,
        StoreOperation::IdempotencyClaim,
        StoreOperation::IdempotencyGet,
        StoreOperation::IdempotencyRenew,
        StoreOperation::IdempotencyComplete,
        StoreOperation::IdempotencyTakeOver,
        StoreOperation::IdempotencyRelease,
        StoreOperation::PromotedInsert,
        StoreOperation::Audit,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            StoreOperation::Ping => "ping",
            StoreOperation::RunInsert => "run_insert",
            StoreOperation::RunGet => "run_get",
            StoreOperation::RunsDeleteSession => "runs_delete_session",
            StoreOperation::RunBytesOfTenant => "run_bytes_of_tenant",
            StoreOperation::Sweep => "sweep",
            StoreOperation::IdempotencyClaim => "idempotency_claim",
            StoreOperation::IdempotencyGet => "idempotency_get",
            StoreOperation::IdempotencyRenew => "idempotency_renew",
            StoreOperation::IdempotencyComplete => "idempotency_complete",
            StoreOperation::IdempotencyTakeOver => "idempotency_take_over",
            StoreOperation::IdempotencyRelease => "idempotency_release",
            StoreOperation::PromotedInsert => "promoted_insert",
            StoreOperation::Audit => "audit",
        }
    }
}

/// The kinds of Run a tenant's usage counts, in `UsageKind` order.
pub const USAGE_KINDS: [&str; 4] = ["immediate", "test", "deploy", "firing"];
