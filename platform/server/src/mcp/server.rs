//! [`PilotageServer`], rmcp's `ServerHandler` for the platform: the
//! initialize result with the extension, instructions and the inline
//! manifest, `server/discover`, each tenant's tools, every call routed to
//! its operation with its result in the Part III §6 envelope ([`envelope`]),
//! the resource surface (`resources`), and sessions and subscriptions
//! registered for `list_changed` and resource updates.

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, CustomRequest, CustomResult, DiscoverResult, ErrorCode,
    ExtensionCapabilities, GetSkillRequestParams, GetSkillResult, GetTaskParams, GetTaskResult, Implementation,
    InitializeRequestParams, InitializeResult, JsonObject, ListResourceTemplatesResult, ListResourcesResult,
    ListSkillsResult, ListToolsResult, MetaObject, PaginatedRequestParams, ReadResourceRequestParams,
    ReadResourceResponse, ServerCapabilities, ServerConfig, SubscribeRequestParams, SubscriptionFilter,
    UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};

use super::approval_wait;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Value, json};

use super::content::{envelope, run_envelope, structured_with_text};
use super::listeners::{Audience, Listeners, MAX_SUBSCRIPTIONS, MAX_URI_BYTES, catalog_version};
use super::resolution::ToolResolution;
use super::tasks_2025::{self, Form2025};
use super::tools::{self, ToolRole};
use super::{apps, arguments, resources, skills, tasks};
use crate::operations::{self, Caller, Context};
use crate::tenancy::{Platform, Principal};
use pilotage_protocol::{EXTENSION_ID, META_KEY, PILOTAGE_VERSION};
use std::sync::Arc;

/// The welcome text of the initialize result (Part III §3.4): names
/// Pilotage and sends the agent to `pilotage_manifest` first.
pub const INSTRUCTIONS: &str = "This server implements Pilotage (io.github.jafarsa0/pilotage): it accepts programs \
(workflows, queries) in the Languages its manifest lists, checks them before anything runs, and returns a trace that \
shows what ran. Call pilotage_manifest first. Then read the core guide (pilotage_get_guide), look up the names you \
need (pilotage_catalog), validate your program, run it with the catalog_version you validated against, and check the \
trace against your task.";

/// Whether `uri` names a resource of this server's kinds: one of the
/// Pilotage surface (`pilotage://`, Part III §8.3), an MCP Apps view
/// (`ui://`, SEP-1865) or a skill's file (`skill://pilotage/`, SEP-2640),
/// which may be subscribed to like any other.
fn is_resource(uri: &str) -> bool {
    pilotage_protocol::resources::ResourceRef::parse(uri).is_some()
        || apps::View::parse(uri).is_some()
        || skills::is_skill_uri(uri)
}

/// The MCP server of the platform. One instance per MCP session.
#[derive(Clone, Debug)]
pub struct PilotageServer {
    pub(super) platform: Platform,
    /// Where this server's session and subscriptions register for
    /// `notifications/tools/list_changed`.
    listeners: Arc<Listeners>,
    /// The session id of a stdio connection (the process lifetime, Part III
    /// §8.1).
    stdio_session: Option<String>,
}

impl PilotageServer {
    /// A server over HTTP: sessions come from `Mcp-Session-Id`.
    pub fn new(platform: Platform, listeners: Arc<Listeners>) -> PilotageServer {
        PilotageServer { platform, listeners, stdio_session: None }
    }

    /// A server over stdio: the session is the process.
    pub fn stdio(platform: Platform, listeners: Arc<Listeners>, session_id: String) -> PilotageServer {
        PilotageServer { platform, listeners, stdio_session: Some(session_id) }
    }

    fn parts(extensions: &rmcp::model::Extensions) -> Option<&http::request::Parts> {
        extensions.get::<http::request::Parts>()
    }

    /// The edge's mark of a request in the 2025-11-25 task form.
    fn form_2025(extensions: &rmcp::model::Extensions) -> Option<Form2025> {
        Self::parts(extensions).and_then(|parts| parts.extensions.get::<Form2025>().copied())
    }

    pub(super) fn principal(&self, extensions: &rmcp::model::Extensions) -> Principal {
        Self::parts(extensions)
            .and_then(|parts| parts.extensions.get::<Principal>().cloned())
            .unwrap_or_else(|| self.platform.dev_principal().clone())
    }

    pub(super) fn session_id(&self, extensions: &rmcp::model::Extensions) -> Option<String> {
        if let Some(session) = &self.stdio_session {
            return Some(session.clone());
        }
        Self::parts(extensions)
            .and_then(|parts| parts.headers.get("mcp-session-id"))
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
    }

    fn context(&self, extensions: &rmcp::model::Extensions) -> Result<Context, McpError> {
        let principal = self.principal(extensions);
        let tenant = self
            .platform
            .tenant(&principal.tenant)
            .ok_or_else(|| McpError::invalid_request(format!("unknown tenant '{}'", principal.tenant), None))?;
        Ok(Context {
            platform: self.platform.clone(),
            caller: Caller { principal, session_id: self.session_id(extensions), address: Self::address(extensions) },
            tenant,
        })
    }

    /// The connection's peer address the HTTP edge put on the request.
    fn address(extensions: &rmcp::model::Extensions) -> Option<String> {
        Self::parts(extensions)?
            .extensions
            .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
            .map(|info| info.0.ip().to_string())
    }

    fn pilotage_meta(&self, extensions: &rmcp::model::Extensions) -> Option<MetaObject> {
        let context = self.context(extensions).ok()?;
        let mut meta = MetaObject::new();
        meta.insert(META_KEY.to_owned(), json!({"manifest": context.tenant.manifest().value}));
        Some(meta)
    }
}

impl ServerHandler for PilotageServer {
    fn get_info(&self) -> ServerConfig {
        let mut extensions = ExtensionCapabilities::new();
        let mut settings = JsonObject::new();
        settings.insert("version".to_owned(), json!(PILOTAGE_VERSION));
        extensions.insert(EXTENSION_ID.to_owned(), settings);
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_resources()
            .enable_resources_list_changed()
            .enable_resources_subscribe()
            .enable_extensions_with(extensions)
            .build();
        // Long Runs as MCP tasks (`tasks`) and the guides as skills
        // (`skills`, without directory reads): declared beside Pilotage.
        let mut capabilities = capabilities;
        let declared = capabilities.extensions.get_or_insert_with(ExtensionCapabilities::new);
        declared.insert(rmcp::model::TASKS_EXTENSION_ID.to_owned(), JsonObject::new());
        declared.insert(rmcp::model::SKILLS_EXTENSION_ID.to_owned(), JsonObject::new());
        ServerConfig::new(capabilities)
            .with_server_info(
                Implementation::new("pilotage-platform", env!("CARGO_PKG_VERSION")).with_title("Pilotage Platform"),
            )
            .with_instructions(INSTRUCTIONS)
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        context.peer.set_peer_info(request.clone());
        let mut result = self.negotiate_initialize(&request)?;
        result.meta = self.pilotage_meta(&context.extensions);
        Ok(result)
    }

    async fn discover(&self, context: RequestContext<RoleServer>) -> Result<DiscoverResult, McpError> {
        let mut result =
            DiscoverResult::from_server_info(self.supported_protocol_versions().into_owned(), self.get_info());
        if let Some(pilotage) = self.pilotage_meta(&context.extensions) {
            let meta = result.meta.get_or_insert_with(MetaObject::new);
            for (key, value) in pilotage.0 {
                meta.insert(key, value);
            }
        }
        Ok(result)
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let principal = self.principal(&context.extensions);
        if let Some(session) = self.session_id(&context.extensions) {
            let audience = Audience { tenant: principal.tenant, scopes: principal.scopes };
            self.listeners.add(session, audience, context.peer.clone());
        }
    }

    /// Clients of the 2026-07-28 revision have no session to receive
    /// notifications on; they open `subscriptions/listen`: tool-list and
    /// resource-list changes, and updates of the requested resources of
    /// this surface.
    fn accepted_subscription_filter(&self, requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
        // The accepted filter tells the client which URIs it follows: at
        // most MAX_SUBSCRIPTIONS of this surface's, none over MAX_URI_BYTES.
        let ours: Vec<String> = requested
            .resource_subscriptions
            .iter()
            .flatten()
            .filter(|uri| uri.len() <= MAX_URI_BYTES && is_resource(uri))
            .take(MAX_SUBSCRIPTIONS)
            .cloned()
            .collect();
        Some(
            SubscriptionFilter::builder()
                .tools_list_changed()
                .resources_list_changed()
                .resource_subscriptions(ours)
                .build(),
        )
    }

    /// Holds one subscription open until the client cancels it or the
    /// server stops, delivering the tenant's tool-list changes to it.
    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), McpError> {
        let principal = self.principal(&subscription.request_context().extensions);
        let sessions = &self.listeners;
        let uris = subscription.accepted().resource_subscriptions.clone().unwrap_or_default();
        // Each catalog resource starts from the version this subscriber
        // sees now: it is told `updated` only when that moves.
        let tenant = self.platform.tenant(&principal.tenant);
        let uris = uris
            .into_iter()
            .map(|uri| {
                let version = tenant.as_ref().and_then(|tenant| catalog_version(tenant, &principal.scopes, &uri));
                (uri, version)
            })
            .collect();
        let audience = Audience { tenant: principal.tenant, scopes: principal.scopes };
        let listener = sessions.listen(audience, subscription.sink().clone(), uris);
        subscription.cancelled().await;
        sessions.unlisten(listener);
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let form_2025 = Self::form_2025(&context.extensions).is_some();
        let context = self.context(&context.extensions)?;
        let mut listed = tools::tools(&context.tenant, &context.caller.principal);
        if form_2025 {
            // The 2025-11-25 form declares task support per tool; the edge
            // moves the mark to the tool's `execution`.
            for tool in &mut listed {
                if matches!(tools::role_of(&context.tenant, &tool.name), Some(ToolRole::Execute(_))) {
                    tool.meta
                        .get_or_insert_with(MetaObject::new)
                        .insert(tasks_2025::EXECUTION_MARK.to_owned(), json!({"taskSupport": "optional"}));
                }
            }
        }
        Ok(ListToolsResult::with_all_items(listed))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let context = self.context(&context.extensions)?;
        resources::admit(&context)?;
        let mut listed = resources::list(&context);
        listed.extend(skills::resources(&context));
        Ok(ListResourcesResult::with_all_items(listed))
    }

    /// SEP-2640 `skills/list`: one skill per Language of the caller's
    /// tenant, each a complete manifest of its files (`skills`).
    async fn list_skills(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, McpError> {
        let context = self.context(&context.extensions)?;
        resources::admit(&context)?;
        Ok(ListSkillsResult::with_all_items(skills::list(&context)))
    }

    /// SEP-2640 `skills/get`: -32602 for a URI that is no skill's `SKILL.md`.
    async fn get_skill(
        &self,
        request: GetSkillRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, McpError> {
        let context = self.context(&context.extensions)?;
        resources::admit(&context)?;
        skills::get(&context, &request.uri).map(GetSkillResult::new)
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        self.context(&context.extensions)?;
        Ok(ListResourceTemplatesResult::with_all_items(resources::templates()))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let context = self.context(&context.extensions)?;
        resources::admit(&context)?;
        if request.uri.starts_with(skills::PREFIX) {
            return skills::read(&context, &request.uri).map(Into::into);
        }
        resources::read(&context, &request.uri).map(Into::into)
    }

    /// Legacy (up to 2025-11-25) subscriptions, per session: the URI gets
    /// `notifications/resources/updated` when its tenant's Languages change.
    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let session = self.session_id(&context.extensions);
        let context = self.context(&context.extensions)?;
        resources::admit(&context)?;
        if request.uri.len() > MAX_URI_BYTES {
            return Err(McpError::invalid_params(format!("a resource URI is at most {MAX_URI_BYTES} bytes"), None));
        }
        if !is_resource(&request.uri) {
            return Err(resources::not_found(
                format!("'{}' is no resource of this server", request.uri),
                &request.uri,
                None,
            ));
        }
        if let Some(session) = session {
            let version = catalog_version(&context.tenant, &context.caller.principal.scopes, &request.uri);
            self.listeners
                .subscribe(&session, request.uri, version)
                .map_err(|full| resources::bounds_exceeded(full.to_string()))?;
        }
        Ok(())
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        if let Some(session) = self.session_id(&context.extensions) {
            self.listeners.unsubscribe(&session, &request.uri);
        }
        Ok(())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let _serving = self.platform.in_flight().enter();
        // A client that declared the Tasks extension (in this request's
        // `_meta`, or at initialize for a session) gets an execute as a
        // task; any other gets exactly the bounded call.
        // A 2025-11-25 client asks per call (`params.task`, marked by the
        // edge); only an execute tool supports it.
        let form_2025 = Self::form_2025(&context.extensions).is_some();
        let as_task =
            form_2025 || context.client_capabilities().is_some_and(|capabilities| capabilities.supports_tasks());
        // What a held execute's wait needs (`approval_wait`): the peer, the
        // revision, and whether the client shows URL elicitations.
        let peer = context.peer.clone();
        let stateless = approval_wait::stateless(context.protocol_version().as_ref());
        let shows_urls = context
            .client_capabilities()
            .and_then(|capabilities| capabilities.elicitation)
            .is_some_and(|elicitation| elicitation.url.is_some());
        let (input_responses, request_state) = (request.input_responses.clone(), request.request_state.clone());
        let mut extensions = context.extensions;
        // Over HTTP the edge has parsed the arguments and left rmcp an
        // empty object in their place (`arguments::EdgeArguments`).
        let edge_arguments = extensions
            .get_mut::<http::request::Parts>()
            .and_then(|parts| parts.extensions.remove::<arguments::EdgeArguments>())
            .map(arguments::EdgeArguments::into_map);
        let context = self.context(&extensions)?;
        let resolution = extensions.get::<ToolResolution>();
        let role = tools::role_of(&context.tenant, &request.name);
        if let Err(exceeded) = context.tenant.admit_request() {
            if let Some(resolution) = resolution
                && role.is_some()
            {
                resolution.found();
            }
            // A tenant quota is a bound reached before anything runs.
            return envelope(Err(operations::request_error(
                pilotage_protocol::request_error::RequestErrorKind::BoundsExceeded,
                exceeded.to_string(),
            )))
            .map(Into::into);
        }
        let Some(role) = role else {
            return Err(McpError::invalid_params(format!("Unknown tool: {}", request.name), None));
        };
        if let Some(resolution) = resolution {
            resolution.found();
        }
        if let Some(slot) = role.slot() {
            pilotage_telemetry::spans::record_language(&slot.entry.name);
        }
        if form_2025 && !matches!(role, ToolRole::Execute(_)) {
            // A 2025-11-25 task-augmented call of a tool whose taskSupport
            // is forbidden (it declares none).
            return Err(McpError::new(
                ErrorCode::METHOD_NOT_FOUND,
                format!("the tool {} does not run as a task; call it without params.task", request.name),
                None,
            ));
        }
        let args = Value::Object(edge_arguments.or(request.arguments).unwrap_or_default());
        // A violation of the tool's own inputSchema is structural: a
        // carrier error before anything runs (Part III §7.1, §4.6).
        let key = tools::input_schema_key(&role);
        if let Err(message) = arguments::check_keyed(&request.name, &key, || tools::input_schema(&role), &args) {
            return Err(McpError::invalid_params(message.to_string(), None));
        }
        let result = match role {
            ToolRole::Manifest => {
                let published = operations::discover::manifest(&context);
                return Ok(structured_with_text(published.value.clone(), published.text.clone()).into());
            }
            ToolRole::Guide => operations::learn::get_guide(&context, &args),
            ToolRole::Catalog => operations::lookup::catalog(&context, &args),
            ToolRole::Validate(slot) => {
                return match operations::validate::validate(&context, &slot, &args).await {
                    Ok(answer) => {
                        let (value, text) = answer.validated.rendered();
                        match answer.assertions {
                            None => Ok(structured_with_text(value.clone(), text.clone()).into()),
                            // Only a request with assertions pays for a copy
                            // of the kept answer.
                            Some(member) => {
                                let mut value = value.clone();
                                value[pilotage_protocol::assertions::MEMBER] = member;
                                let text = value.to_string();
                                Ok(structured_with_text(value, text).into())
                            }
                        }
                    }
                    Err(error) => envelope(Err(error)).map(Into::into),
                };
            }
            // A Run's result may be large: its text block becomes a summary
            // above a size (`content`), structuredContent stays whole.
            ToolRole::Execute(slot) if as_task => {
                return tasks::start(context, slot, request.name.to_string(), args, form_2025).await;
            }
            ToolRole::Execute(slot) => {
                let mut result = operations::execute::execute(&context, &slot, &args).await;
                if let Ok(response) = &result
                    && let Some(held) = approval_wait::held(response)
                    && shows_urls
                {
                    let waited = if !stateless {
                        approval_wait::wait(&context, &held, Some(&peer)).await
                    } else {
                        match approval_wait::answered(&held, input_responses.as_ref(), request_state.as_deref()) {
                            // The first round: ask the client to show the page.
                            None => return Ok(approval_wait::input_required(&held).into()),
                            Some(true) => approval_wait::wait(&context, &held, None).await,
                            Some(false) => approval_wait::Waited::Refused,
                        }
                    };
                    result = match waited {
                        approval_wait::Waited::Decided => operations::execute::execute(&context, &slot, &args).await,
                        other => {
                            result.map(|answer| approval_wait::after_wait(answer, other, self.platform.approval_wait()))
                        }
                    };
                }
                let result = result.map(|answer| answer.to_value());
                return run_envelope(result, slot.exposure.loop_tools.trace.as_deref());
            }
            ToolRole::Trace(slot) => {
                let result = operations::trace_fetch::trace(&context, &slot, &args)
                    .await
                    .map(|record| serde_json::to_value(record).unwrap_or(Value::Null));
                return run_envelope(result, slot.exposure.loop_tools.trace.as_deref());
            }
            ToolRole::Promote(slot) => operations::promote::promote(&context, &slot, &args).await,
        };
        envelope(result).map(Into::into)
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        let context = self.context(&context.extensions)?;
        tasks::get(&context, &request.task_id).await.map(GetTaskResult::new)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let context = self.context(&context.extensions)?;
        tasks::cancel(&context, &request.task_id).await
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, McpError> {
        if let Some(form) = Self::form_2025(&context.extensions) {
            let context = self.context(&context.extensions)?;
            let params = request.params.clone().unwrap_or(Value::Null);
            return tasks_2025::serve(&context, &request.method, &params, form).await.map(CustomResult);
        }
        // A tools/call whose params do not parse never reaches call_tool:
        // an invalid CallToolRequest envelope is -32602 (Part III §7.1).
        if request.method == "tools/call" {
            return Err(McpError::invalid_params("tools/call needs params {name, arguments?}", None));
        }
        Err(McpError::new(ErrorCode::METHOD_NOT_FOUND, request.method, None))
    }
}
