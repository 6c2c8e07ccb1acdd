//! An MCP connection to a Pilotage server (rmcp over Streamable HTTP, or
//! over stdio to a child process) that declares the extension and sorts
//! every reply into its channel (Part III §7): a result, a request error,
//! or a carrier error.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, ExtensionCapabilities, Implementation, JsonObject,
    ReadResourceRequestParams, ResourceContents, Skill, Tool,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::Value;

use pilotage_protocol::manifest::Manifest;
use pilotage_protocol::request_error::{RequestError, RequestErrorKind};
use pilotage_protocol::{EXTENSION_ID, META_KEY};

/// Why the client could not complete an interaction. Program findings and
/// failed Runs are never errors here (Part II §8).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// Occurs when the connection or transport fails.
    #[error("transport: {0}")]
    Transport(String),
    /// Occurs when the server answers with a JSON-RPC error.
    #[error("carrier error {code}: {message}")]
    Carrier {
        /// The JSON-RPC code.
        code: i32,
        /// Its message.
        message: String,
    },
    /// Occurs when the server is not a usable Pilotage server (no valid
    /// manifest, a higher major version, an inconsistent tool surface).
    #[error("not a usable Pilotage server: {0}")]
    NotPilotage(String),
    /// Occurs when an operation answers with a request error.
    #[error("request error {}: {}", .0.error.kind.as_str(), .0.error.message)]
    Request(RequestError),
    /// Occurs when a reply does not have the shape the operation defines.
    #[error("unexpected reply: {0}")]
    Shape(String),
    /// Occurs when the caller asks for something the manifest does not
    /// declare.
    #[error("{0}")]
    Usage(String),
}

/// How a tool call was answered.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// `isError: false`: the operation's result.
    Result(Value),
    /// `isError: true`: a request error.
    RequestError(RequestError),
}

/// Counts `notifications/tools/list_changed`, so the client knows to
/// rediscover (Part III §10.2 rule 3).
#[derive(Clone, Debug, Default)]
pub struct Handler {
    config: ClientConfig,
    list_changes: Arc<AtomicU64>,
}

impl Handler {
    /// A handler that declares the Pilotage extension, and its counter of
    /// tool-list changes.
    fn pilotage() -> (Handler, Arc<AtomicU64>) {
        let mut capabilities = ClientCapabilities::default();
        let mut extensions = ExtensionCapabilities::new();
        extensions.insert(EXTENSION_ID.to_owned(), JsonObject::new());
        capabilities.extensions = Some(extensions);
        let list_changes = Arc::new(AtomicU64::new(0));
        let handler = Handler {
            config: ClientConfig::new(capabilities, Implementation::new("pilotage-client", env!("CARGO_PKG_VERSION"))),
            list_changes: list_changes.clone(),
        };
        (handler, list_changes)
    }
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        self.config.clone()
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.list_changes.fetch_add(1, Ordering::SeqCst);
    }
}

/// An MCP connection to a Pilotage server.
pub struct Connection {
    service: RunningService<RoleClient, Handler>,
    endpoint: String,
    list_changes: Arc<AtomicU64>,
    /// The server process of a stdio connection; killed when dropped.
    child: Option<tokio::process::Child>,
    /// How long one request may wait for its answer.
    timeout: std::time::Duration,
}

/// How long one request waits for its answer by default: above the
/// platform's default request timeout, so a slow Run is not cut short, but
/// a server that vanished mid-request does not hang the client.
pub const CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// The prefix of an endpoint that names a command to run and speak MCP
/// with over its stdin and stdout, e.g. `stdio:pilotage serve --stdio --demo`.
pub const STDIO_PREFIX: &str = "stdio:";

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection").field("endpoint", &self.endpoint).finish_non_exhaustive()
    }
}

impl Connection {
    /// Connects over Streamable HTTP, declaring the Pilotage extension;
    /// `token` is sent as a bearer token.
    ///
    /// # Errors
    /// [`ClientError::Transport`] when the server cannot be reached or the
    /// handshake fails.
    pub async fn http(url: &str, token: Option<&str>) -> Result<Connection, ClientError> {
        crate::install_crypto_provider();
        let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_owned());
        if let Some(token) = token {
            config = config.auth_header(token.to_owned());
        }
        let transport = StreamableHttpClientTransport::from_config(config);
        let (handler, list_changes) = Handler::pilotage();
        let service = handler.serve(transport).await.map_err(|e| ClientError::Transport(handshake_failure(url, &e)))?;
        Ok(Connection { service, endpoint: url.to_owned(), list_changes, child: None, timeout: CALL_TIMEOUT })
    }

    /// Starts `program` with `args` and speaks MCP over its stdin and
    /// stdout (the stdio transport); its stderr passes through. The
    /// process is killed when the connection is dropped.
    ///
    /// # Errors
    /// [`ClientError::Transport`] when the program cannot be started or the
    /// handshake fails.
    pub async fn stdio(program: &str, args: &[String]) -> Result<Connection, ClientError> {
        let mut child = tokio::process::Command::new(program)
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| ClientError::Transport(format!("cannot start {program}: {e}")))?;
        let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
            return Err(ClientError::Transport(format!("{program} has no stdio pipes")));
        };
        let (handler, list_changes) = Handler::pilotage();
        let service = handler.serve((stdout, stdin)).await.map_err(|e| ClientError::Transport(e.to_string()))?;
        let endpoint = format!("{STDIO_PREFIX}{program} {}", args.join(" "));
        Ok(Connection { service, endpoint, list_changes, child: Some(child), timeout: CALL_TIMEOUT })
    }

    /// Connects to `endpoint`: an `http(s)://` URL, or `stdio:` followed by
    /// a command line, split on whitespace. `token`
    /// applies to HTTP only.
    ///
    /// # Errors
    /// As [`Connection::http`] and [`Connection::stdio`];
    /// [`ClientError::Usage`] for an empty command.
    pub async fn open(endpoint: &str, token: Option<&str>) -> Result<Connection, ClientError> {
        let Some(command) = endpoint.strip_prefix(STDIO_PREFIX) else {
            return Connection::http(endpoint, token).await;
        };
        let mut words = command.split_whitespace().map(str::to_owned);
        let program = words.next().ok_or_else(|| ClientError::Usage("stdio: needs a command".into()))?;
        Connection::stdio(&program, &words.collect::<Vec<_>>()).await
    }

    /// The endpoint this connection talks to (the server part of the guide
    /// cache key).
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The manifest carried inline by the initialize result, if any
    /// (Part III §3.2).
    pub fn inline_manifest(&self) -> Option<Manifest> {
        let info = self.service.peer_info()?;
        let value = info.meta.as_ref()?.get(META_KEY)?.get("manifest")?.clone();
        serde_json::from_value(value).ok()
    }

    /// The server's welcome text.
    pub fn instructions(&self) -> Option<String> {
        self.service.peer_info()?.instructions.clone()
    }

    /// Whether the server declared the extension at initialize.
    pub fn declares_extension(&self) -> bool {
        self.service
            .peer_info()
            .is_some_and(|info| info.capabilities.extensions.as_ref().is_some_and(|e| e.contains_key(EXTENSION_ID)))
    }

    /// How many tool-list changes were announced so far.
    pub fn list_changes(&self) -> u64 {
        self.list_changes.load(Ordering::SeqCst)
    }

    /// Every tool.
    ///
    /// # Errors
    /// [`ClientError`] when the listing fails.
    pub async fn tools(&self) -> Result<Vec<Tool>, ClientError> {
        self.bounded("tools/list", self.service.list_all_tools()).await?.map_err(service_error)
    }

    /// Every skill the server lists (the MCP Skills extension, SEP-2640),
    /// each with its complete list of files; none when the server does not
    /// declare the extension.
    ///
    /// # Errors
    /// [`ClientError`] when the listing fails.
    pub async fn skills(&self) -> Result<Vec<Skill>, ClientError> {
        if !self.service.peer_info().is_some_and(|info| info.capabilities.supports_skills()) {
            return Ok(Vec::new());
        }
        self.bounded("skills/list", self.service.list_all_skills()).await?.map_err(service_error)
    }

    /// The text of the resource `uri` (its first content; a binary one
    /// reads as empty).
    ///
    /// # Errors
    /// [`ClientError::Carrier`] when the server refuses the read (an
    /// unknown resource), and transport failures.
    pub async fn read_text(&self, uri: &str) -> Result<String, ClientError> {
        let read = self.service.read_resource(ReadResourceRequestParams::new(uri));
        let result = self.bounded("resources/read", read).await?.map_err(service_error)?;
        Ok(match result.contents.into_iter().next() {
            Some(ResourceContents::TextResourceContents { text, .. }) => text,
            _ => String::new(),
        })
    }

    /// Sets how long one request may wait for its answer (default
    /// the call timeout, 120 s).
    pub fn with_timeout(mut self, timeout: std::time::Duration) -> Connection {
        self.timeout = timeout;
        self
    }

    /// Waits for `request` at most this connection's timeout: a server
    /// that went away mid-request is an error, not a hang.
    async fn bounded<T>(&self, what: &str, request: impl Future<Output = T>) -> Result<T, ClientError> {
        tokio::time::timeout(self.timeout, request)
            .await
            .map_err(|_| ClientError::Transport(format!("{what}: no answer within {} s", self.timeout.as_secs_f64())))
    }

    /// Calls a tool and sorts the reply by channel: a result, a request
    /// error, or (as `Err`) a carrier error or transport failure.
    ///
    /// # Errors
    /// [`ClientError::Carrier`] for JSON-RPC errors, [`ClientError::Shape`]
    /// when `structuredContent` is missing.
    pub async fn call(&self, name: &str, arguments: Value) -> Result<Reply, ClientError> {
        let arguments = match arguments {
            Value::Object(map) => map,
            _ => JsonObject::new(),
        };
        let request = self.service.call_tool(CallToolRequestParams::new(name.to_owned()).with_arguments(arguments));
        let result = self.bounded(name, request).await?.map_err(service_error)?;
        let Some(structured) = result.structured_content else {
            return Err(ClientError::Shape(format!("{name} returned no structuredContent")));
        };
        if result.is_error == Some(true) {
            let error: RequestError = serde_json::from_value(structured.clone()).unwrap_or_else(|_| {
                RequestError::new(RequestErrorKind::Internal, format!("an unreadable request error: {structured}"))
            });
            return Ok(Reply::RequestError(error));
        }
        Ok(Reply::Result(structured))
    }

    /// Ends the session; a stdio server is given a moment to exit on its
    /// own (closing its stdin ends it) before it is killed.
    pub async fn close(self) {
        let _ = self.service.cancel().await;
        if let Some(mut child) = self.child {
            let exited = tokio::time::timeout(std::time::Duration::from_secs(5), child.wait()).await;
            if exited.is_err() {
                let _ = child.kill().await;
            }
        }
    }
}

fn service_error(error: rmcp::ServiceError) -> ClientError {
    match error {
        rmcp::ServiceError::McpError(error) => {
            ClientError::Carrier { code: error.code.0, message: error.message.to_string() }
        }
        other => ClientError::Transport(other.to_string()),
    }
}

/// `value` as `T`, or [`ClientError::Shape`] naming `what`.
pub(crate) fn parse<T: serde::de::DeserializeOwned>(what: &str, value: Value) -> Result<T, ClientError> {
    serde_json::from_value(value).map_err(|e| ClientError::Shape(format!("{what}: {e}")))
}

/// A reply's result as `T`; a request error becomes [`ClientError::Request`].
pub(crate) fn result<T: serde::de::DeserializeOwned>(what: &str, reply: Reply) -> Result<T, ClientError> {
    match reply {
        Reply::Result(value) => parse(what, value),
        Reply::RequestError(error) => Err(ClientError::Request(error)),
    }
}

/// Why the handshake with `url` failed, in one sentence a person can act
/// on. rmcp's own message names its transport's Rust type and hides a
/// refused credential behind "Auth required"; the HTTP transport's error
/// inside it says what happened.
fn handshake_failure(url: &str, error: &rmcp::service::ClientInitializeError) -> String {
    use rmcp::transport::streamable_http_client::StreamableHttpError;
    // rmcp's handshake error does not name the transport's error as its
    // source: reach it through the variant that carries it.
    let mut source: Option<&(dyn std::error::Error + 'static)> = match error {
        rmcp::service::ClientInitializeError::TransportError { error, .. } => Some(error.error.as_ref()),
        other => Some(other),
    };
    while let Some(current) = source {
        if let Some(http) = current.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
            return match http {
                StreamableHttpError::AuthRequired(refused) => format!(
                    "{url} refused the request (401): it needs a valid bearer token (--token or PILOTAGE_TOKEN), \
                     and the one given, if any, is missing, expired or not for this server{}",
                    described(&refused.www_authenticate_header)
                ),
                StreamableHttpError::InsufficientScope(refused) => format!(
                    "{url} refused the token (403): it lacks the scope {}{}",
                    refused.required_scope.as_deref().unwrap_or("this server asks for"),
                    described(&refused.www_authenticate_header)
                ),
                StreamableHttpError::Client(error) => format!("cannot reach {url}: {}", root_cause(error)),
                other => format!("{url}: {other}"),
            };
        }
        source = current.source();
    }
    format!("{url}: {}", root_cause(error))
}

/// `: <error_description>` of a `WWW-Authenticate` challenge, when it has one.
fn described(challenge: &str) -> String {
    challenge
        .split("error_description=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .filter(|text| !text.is_empty())
        .map(|text| format!(" (the server says: {text})"))
        .unwrap_or_default()
}

/// The innermost cause of `error` (a refused connection, a name that does
/// not resolve), which says more than the layers wrapping it.
fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut current = error;
    while let Some(inner) = current.source() {
        current = inner;
    }
    current.to_string()
}
