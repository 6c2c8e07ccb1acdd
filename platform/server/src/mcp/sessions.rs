//! Observing the end of MCP sessions: rmcp offers no callback, so its
//! session manager is wrapped and `close_session` watched. When a session
//! ends (DELETE, idle expiry, shutdown), the runs it retained under
//! `"session"` retention are deleted and it stops receiving notifications
//! (Part II §6.6, Part III §8.1).
//!
//! The wrapper also binds each new session to its principal: the
//! `initialize` request carries a [`PendingSession`] (put there by the
//! HTTP edge after the ceiling check), and the place it holds is bound to
//! the session id here, as the session is created and before its id is
//! ever sent, so no session is reachable or uncounted in between.

use std::sync::Arc;

use rmcp::model::{ClientJsonRpcMessage, GetExtensions, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::{EventStore, ServerSseMessage};
use rmcp::transport::streamable_http_server::{RestoreOutcome, SessionId, SessionManager};

use super::session_binding::{PendingSession, SessionBindings};

/// The reservation an `initialize` message carries, if any.
fn pending(message: &ClientJsonRpcMessage) -> Option<PendingSession> {
    let ClientJsonRpcMessage::Request(request) = message else { return None };
    request.request.extensions().get::<http::request::Parts>()?.extensions.get::<PendingSession>().cloned()
}

/// A session manager that reports each session's end once, and marks a
/// session in use while a request of it is in flight or a stream of it is
/// open (so it is never evicted at the ceiling then).
pub(crate) struct ObservedSessions<M> {
    inner: M,
    on_close: Arc<dyn Fn(&SessionId) + Send + Sync>,
    bindings: SessionBindings,
}

impl<M> ObservedSessions<M> {
    /// Wraps `inner`; `on_close` runs once per ended session (it must be
    /// quick: spawn async work).
    pub(crate) fn new(inner: M, on_close: Arc<dyn Fn(&SessionId) + Send + Sync>, bindings: SessionBindings) -> Self {
        ObservedSessions { inner, on_close, bindings }
    }

    /// `stream`, holding session `id` in use until it ends or is dropped.
    fn held<S>(
        &self,
        id: &SessionId,
        stream: S,
    ) -> impl futures::Stream<Item = ServerSseMessage> + Send + Sync + 'static
    where
        S: futures::Stream<Item = ServerSseMessage> + Send + Sync + 'static,
    {
        let guard = self.bindings.owner(id).and_then(|owner| self.bindings.in_use(id, &owner));
        futures::StreamExt::map(stream, move |message| {
            let _held = &guard;
            message
        })
    }
}

impl<M: SessionManager> SessionManager for ObservedSessions<M> {
    type Error = M::Error;
    type Transport = M::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        self.inner.create_session().await
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        // Bound before the first await: the session exists from
        // `create_session` on, and ends through `close_session`, which
        // releases the binding.
        if let Some(reservation) = pending(&message).and_then(|pending| pending.take()) {
            reservation.bind(id);
        }
        self.inner.initialize_session(id, message).await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.inner.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        // rmcp closes a deleted session twice and unknown ids too: report
        // only sessions that existed.
        let existed = self.inner.has_session(id).await.unwrap_or(false);
        let result = self.inner.close_session(id).await;
        if existed {
            (self.on_close)(id);
        }
        result
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl futures::Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let stream = self.inner.create_stream(id, message).await?;
        Ok(self.held(id, stream))
    }

    async fn accept_message(&self, id: &SessionId, message: ClientJsonRpcMessage) -> Result<(), Self::Error> {
        self.inner.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl futures::Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let stream = self.inner.create_standalone_stream(id).await?;
        Ok(self.held(id, stream))
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl futures::Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let stream = self.inner.resume(id, last_event_id).await?;
        Ok(self.held(id, stream))
    }

    async fn restore_session(&self, id: SessionId) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        self.inner.restore_session(id).await
    }

    fn event_store(&self) -> Option<Arc<dyn EventStore>> {
        self.inner.event_store()
    }
}
