//! Every MCP request observed: [`PilotageServer`] wrapped in a handler
//! that serves each request through it, giving the request its server
//! span (parented on `params._meta.traceparent`, `telemetry::spans`) and
//! counting and timing it by method, tool and outcome
//! (`telemetry::metrics`), on either transport.
//!
//! Every request method of rmcp's `ServerHandler` is delegated and
//! observed, the ones the platform leaves to rmcp's defaults included, except
//! `subscriptions/listen` (a stream held open, not a request with a
//! latency) and the deprecated `logging/setLevel`, `resources/subscribe`
//! and `resources/unsubscribe`. Requests
//! rmcp refuses before dispatching them (an unsupported protocol version,
//! missing 2026-07-28 request metadata) have no span.

use std::time::Instant;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, CompleteRequestParams, CompleteResult, CustomRequest,
    CustomResult, DiscoverResult, GetPromptRequestParams, GetPromptResponse, GetSkillRequestParams, GetSkillResult,
    GetTaskParams, GetTaskResult, InitializeRequestParams, InitializeResult, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListSkillsResult, ListToolsResult, PaginatedRequestParams,
    ProtocolVersion, ReadResourceDirectoryRequestParams, ReadResourceDirectoryResult, ReadResourceRequestParams,
    ReadResourceResponse, ServerConfig, SubscribeRequestParams, SubscriptionFilter, Tool, UnsubscribeRequestParams,
    UpdateTaskParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use tracing::{Instrument, Span};

use super::resolution::ToolResolution;
use super::server::PilotageServer;
use pilotage_telemetry::metrics::{McpOutcome, Metrics, UNKNOWN_TOOL_LABEL};
use pilotage_telemetry::spans::{self, McpEnd, McpRequest, McpRequestDetails, Transport};

/// [`PilotageServer`] with every request observed. One per MCP session,
/// like the server it wraps.
#[derive(Clone, Debug)]
pub struct ObservedServer {
    inner: PilotageServer,
    metrics: Metrics,
    transport: Transport,
}

/// One request being observed.
struct Observation<'a> {
    metrics: &'a Metrics,
    method: &'static str,
    /// The tool of a `tools/call`, and whether the tenant serves it.
    tool: Option<(String, ToolResolution)>,
    span: Span,
    started: Instant,
}

impl Observation<'_> {
    /// Records the request's end: `tool_error` when its result says
    /// `isError: true`.
    fn end<T>(self, result: &Result<T, McpError>, tool_error: impl FnOnce(&T) -> bool) {
        let (outcome, end) = match result {
            Ok(answer) if tool_error(answer) => (McpOutcome::ToolError, McpEnd::ToolError),
            Ok(_) => (McpOutcome::Ok, McpEnd::Ok),
            Err(error) => (
                McpOutcome::RpcError,
                McpEnd::RpcError { code: i64::from(error.code.0), message: error.message.to_string() },
            ),
        };
        spans::mcp_server_span_end(&self.span, &end);
        let tool = self
            .tool
            .map(|(name, resolution)| if resolution.is_found() { name } else { UNKNOWN_TOOL_LABEL.to_owned() });
        self.metrics.mcp_request(self.method, tool.as_deref(), outcome, self.started.elapsed());
    }
}

impl ObservedServer {
    /// Observes `inner`'s requests arriving over Streamable HTTP.
    pub fn http(inner: PilotageServer) -> ObservedServer {
        let metrics = inner.platform.engine().metrics().clone();
        ObservedServer { inner, metrics, transport: Transport::Http }
    }

    /// Observes `inner`'s requests arriving over stdio.
    pub fn stdio(inner: PilotageServer) -> ObservedServer {
        let metrics = inner.platform.engine().metrics().clone();
        ObservedServer { inner, metrics, transport: Transport::Stdio }
    }

    /// Starts observing a request of `method` (its JSON-RPC name);
    /// `tool` is a `tools/call`'s tool, whose resolution `call_tool`
    /// reports through the context's extensions.
    fn begin(&self, method: &str, tool: Option<&str>, context: &mut RequestContext<RoleServer>) -> Observation<'_> {
        let label = Metrics::method_label(method);
        let tool = tool.map(|name| {
            let resolution = ToolResolution::default();
            context.extensions.insert(resolution.clone());
            (name.to_owned(), resolution)
        });
        // A custom method's name is the client's choice: the span is named
        // after its label (`other`), the attribute keeps it.
        let name = if label == "other" { label } else { method };
        let span = spans::mcp_server_span(&McpRequest {
            name,
            method,
            tool: tool.as_ref().map(|(name, _)| name.as_str()),
            transport: self.transport,
        });
        if !span.is_disabled() {
            let session = self.inner.session_id(&context.extensions);
            let protocol_version = context.protocol_version();
            let principal = self.inner.principal(&context.extensions);
            spans::mcp_server_span_details(
                &span,
                &McpRequestDetails {
                    request_id: context.id.to_string(),
                    session_id: session.as_deref(),
                    protocol_version: protocol_version.as_ref().map(|version| version.as_str()),
                    tenant: Some(&principal.tenant),
                    traceparent: context.meta.get_traceparent(),
                    tracestate: context.meta.get_tracestate(),
                },
            );
        }
        Observation { metrics: &self.metrics, method: label, tool, span, started: Instant::now() }
    }
}

/// A request method served by the inner server, observed; never an
/// `isError` result.
macro_rules! observed_request {
    ($(#[$attribute:meta])* $name:ident, $method:literal, $request:ty, $result:ty) => {
        $(#[$attribute])*
        async fn $name(&self, request: $request, mut context: RequestContext<RoleServer>) -> Result<$result, McpError> {
            let observation = self.begin($method, None, &mut context);
            let result = self.inner.$name(request, context).instrument(observation.span.clone()).await;
            observation.end(&result, |_| false);
            result
        }
    };
}

impl ServerHandler for ObservedServer {
    fn get_info(&self) -> ServerConfig {
        self.inner.get_info()
    }

    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        self.inner.supported_protocol_versions()
    }

    fn negotiate_initialize(&self, request: &InitializeRequestParams) -> Result<InitializeResult, McpError> {
        self.inner.negotiate_initialize(request)
    }

    async fn ping(&self, mut context: RequestContext<RoleServer>) -> Result<(), McpError> {
        let observation = self.begin("ping", None, &mut context);
        let result = self.inner.ping(context).instrument(observation.span.clone()).await;
        observation.end(&result, |_| false);
        result
    }

    async fn discover(&self, mut context: RequestContext<RoleServer>) -> Result<DiscoverResult, McpError> {
        let observation = self.begin("server/discover", None, &mut context);
        let result = self.inner.discover(context).instrument(observation.span.clone()).await;
        observation.end(&result, |_| false);
        result
    }

    observed_request!(initialize, "initialize", InitializeRequestParams, InitializeResult);
    observed_request!(complete, "completion/complete", CompleteRequestParams, CompleteResult);
    observed_request!(get_prompt, "prompts/get", GetPromptRequestParams, GetPromptResponse);
    observed_request!(list_prompts, "prompts/list", Option<PaginatedRequestParams>, ListPromptsResult);
    observed_request!(list_resources, "resources/list", Option<PaginatedRequestParams>, ListResourcesResult);
    observed_request!(
        list_resource_templates,
        "resources/templates/list",
        Option<PaginatedRequestParams>,
        ListResourceTemplatesResult
    );
    observed_request!(read_resource, "resources/read", ReadResourceRequestParams, ReadResourceResponse);
    observed_request!(list_tools, "tools/list", Option<PaginatedRequestParams>, ListToolsResult);

    // The session-bound resource subscriptions (up to 2025-11-25).
    observed_request!(
        #[allow(deprecated)]
        subscribe,
        "resources/subscribe",
        SubscribeRequestParams,
        ()
    );
    observed_request!(
        #[allow(deprecated)]
        unsubscribe,
        "resources/unsubscribe",
        UnsubscribeRequestParams,
        ()
    );

    observed_request!(get_task, "tasks/get", GetTaskParams, GetTaskResult);
    observed_request!(update_task, "tasks/update", UpdateTaskParams, ());
    observed_request!(cancel_task, "tasks/cancel", CancelTaskParams, ());
    observed_request!(list_skills, "skills/list", Option<PaginatedRequestParams>, ListSkillsResult);
    observed_request!(get_skill, "skills/get", GetSkillRequestParams, GetSkillResult);
    observed_request!(
        read_resource_directory,
        "resources/directory/read",
        ReadResourceDirectoryRequestParams,
        ReadResourceDirectoryResult
    );

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        mut context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let tool = request.name.clone();
        let observation = self.begin("tools/call", Some(&tool), &mut context);
        let result = self.inner.call_tool(request, context).instrument(observation.span.clone()).await;
        observation.end(
            &result,
            |response| matches!(response, CallToolResponse::Complete(answer) if answer.is_error == Some(true)),
        );
        result
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        mut context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, McpError> {
        let method = request.method.clone();
        let observation = self.begin(&method, None, &mut context);
        let result = self.inner.on_custom_request(request, context).instrument(observation.span.clone()).await;
        observation.end(&result, |_| false);
        result
    }

    fn accepted_subscription_filter(&self, requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
        self.inner.accepted_subscription_filter(requested)
    }

    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), McpError> {
        self.inner.listen(subscription).await
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.inner.get_tool(name)
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.inner.on_initialized(context).await
    }
}
