//! The accept loop of every HTTP listener of the platform (`/mcp` with the
//! admin API and probes, and the demo capability service): connection
//! limits, socket options and graceful shutdown.
//!
//! - At most [`ConnectionLimits::max_connections`] connections are open
//!   at once: a place is taken before `accept`, so past the cap the
//!   listener accepts nothing and new connections wait in the kernel's
//!   listen backlog until a connection closes.
//! - A connection has [`ConnectionLimits::header_read_timeout`] to send a
//!   complete request head, and an idle keep-alive connection the same
//!   time to start its next request; then it is closed (hyper's
//!   `header_read_timeout`). The body's own deadline is applied where
//!   bodies are read (`compat` for `/mcp`, [`body_deadline`] for the
//!   admin API), since only the handler knows when it reads one.
//! - Every accepted socket has `TCP_NODELAY`: a reply written in pieces
//!   (headers, then event-stream data) must not wait for the client's
//!   delayed acknowledgement under Nagle's algorithm (about 40 ms a
//!   reply on Linux).
//! - On shutdown the listener stops accepting, every connection finishes
//!   the request in flight and closes (an idle one at once), and [`serve`]
//!   returns when the last one has closed: what `axum::serve`'s graceful
//!   shutdown does.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

/// The bounds of one listener's connections.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ConnectionLimits {
    /// Time to send a complete request head; also the idle time of a
    /// keep-alive connection between requests.
    pub header_read_timeout: Duration,
    /// Most connections open at once (at least 1).
    pub max_connections: usize,
}

impl Default for ConnectionLimits {
    /// The defaults of `Settings` (`header_read_timeout_ms` 10 000,
    /// `max_connections` 1024).
    fn default() -> Self {
        ConnectionLimits { header_read_timeout: Duration::from_secs(10), max_connections: 1024 }
    }
}

impl ConnectionLimits {
    /// From the server settings.
    pub(crate) fn from_settings(settings: &crate::settings::Settings) -> ConnectionLimits {
        ConnectionLimits {
            header_read_timeout: Duration::from_millis(settings.header_read_timeout_ms),
            max_connections: settings.max_connections,
        }
    }
}

/// Accepts one connection and sets the options every accepted socket gets
/// (`TCP_NODELAY`; a socket that refuses it is served all the same);
/// returns it with the peer's address.
///
/// # Errors
/// The error of `accept`.
pub(crate) async fn accept(listener: &TcpListener) -> std::io::Result<(TcpStream, SocketAddr)> {
    let (stream, peer) = listener.accept().await?;
    if let Err(error) = stream.set_nodelay(true) {
        tracing::debug!(%error, "cannot set TCP_NODELAY on an accepted connection");
    }
    Ok((stream, peer))
}

/// Errors of `accept` that concern one connection only (the peer gave up
/// before it was accepted); any other (out of file descriptors) is worth
/// a pause before trying again.
fn is_connection_error(error: &std::io::Error) -> bool {
    matches!(
        error.kind(),
        std::io::ErrorKind::ConnectionRefused
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::ConnectionReset
    )
}

/// Serves `router` on `listener` within `limits` until `shutdown`
/// completes, then closes gracefully and returns when every connection
/// has closed.
///
/// # Errors
/// None today (accept errors are logged and retried); the `Result` keeps
/// the shape of `axum::serve`.
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let max_connections = limits.max_connections.clamp(1, crate::settings::MAX_CONNECTIONS_LIMIT);
    let places = Arc::new(Semaphore::new(max_connections));
    let closing = CancellationToken::new();
    let mut http1 = hyper::server::conn::http1::Builder::new();
    http1.timer(TokioTimer::new()).header_read_timeout(limits.header_read_timeout).keep_alive(true);
    tokio::pin!(shutdown);
    loop {
        let place = tokio::select! {
            () = &mut shutdown => break,
            place = places.clone().acquire_owned() => match place {
                Ok(place) => place,
                Err(_) => break,
            },
        };
        let (stream, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = accept(&listener) => match accepted {
                Ok(accepted) => accepted,
                Err(error) if is_connection_error(&error) => continue,
                Err(error) => {
                    tracing::error!(%error, "accept failed; retrying in 1 s");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            },
        };
        // Each request knows its peer's address (`ConnectInfo`): an
        // approval records where its decision came from.
        let service = TowerToHyperService::new(router.clone().map_request(
            move |mut request: axum::http::Request<hyper::body::Incoming>| {
                request.extensions_mut().insert(ConnectInfo(peer));
                request
            },
        ));
        let connection_closing = closing.clone();
        let http1 = http1.clone();
        tokio::spawn(async move {
            let _place = place;
            let connection = http1.serve_connection(TokioIo::new(stream), service);
            tokio::pin!(connection);
            let result = tokio::select! {
                result = connection.as_mut() => result,
                () = connection_closing.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(error) = result {
                tracing::debug!(%error, "connection ended with an error");
            }
        });
    }
    drop(listener);
    closing.cancel();
    // Every place back means every connection closed.
    let _all = places.acquire_many(max_connections as u32).await;
    Ok(())
}

/// The deadline of a request body (setting `body_read_timeout_ms`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct BodyDeadline(pub Duration);

/// An error a body yields when its deadline passes.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within {0} ms")]
pub(crate) struct BodyTooSlow(u128);

/// A middleware bounding the time a request's body may take to arrive,
/// counted from when the request reaches it (its head read). The body is
/// wrapped, not read here, so handlers that refuse a request before
/// reading its body still do. When the deadline passes the body yields an
/// error, and whatever the handler answered is replaced by 408 with
/// `Connection: close` (the admin API's error body).
pub(crate) async fn body_deadline(State(deadline): State<BodyDeadline>, request: Request, next: Next) -> Response {
    let limit = deadline.0;
    let until = tokio::time::Instant::now() + limit;
    let expired = Arc::new(AtomicBool::new(false));
    let flag = expired.clone();
    let (parts, body) = request.into_parts();
    let data = body.into_data_stream();
    let bounded = futures::stream::unfold(Some(data), move |state| {
        let flag = flag.clone();
        async move {
            let mut data = state?;
            match tokio::time::timeout_at(until, data.next()).await {
                Ok(Some(Ok(chunk))) => Some((Ok(chunk), Some(data))),
                Ok(Some(Err(error))) => Some((Err(axum::BoxError::from(error)), None)),
                Ok(None) => None,
                Err(_) => {
                    flag.store(true, Ordering::SeqCst);
                    Some((Err(axum::BoxError::from(BodyTooSlow(limit.as_millis()))), None))
                }
            }
        }
    });
    let response = next.run(Request::from_parts(parts, Body::from_stream(bounded))).await;
    if !expired.load(Ordering::SeqCst) {
        return response;
    }
    let message = BodyTooSlow(limit.as_millis()).to_string();
    let body = serde_json::json!({"error": {"code": "request_timeout", "message": message}});
    let mut response = (StatusCode::REQUEST_TIMEOUT, body.to_string()).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every socket the accept loop takes gets TCP_NODELAY (checked with
    /// getsockopt through `TcpStream::nodelay`), where a plain accept
    /// leaves Nagle's algorithm on.
    #[tokio::test]
    async fn accepted_sockets_get_tcp_nodelay() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let first = TcpStream::connect(address).await.unwrap();
        let (plain, _) = listener.accept().await.unwrap();
        assert!(!plain.nodelay().unwrap(), "a plainly accepted socket has Nagle's algorithm on");
        let second = TcpStream::connect(address).await.unwrap();
        let (served, _) = accept(&listener).await.unwrap();
        assert!(served.nodelay().unwrap(), "the accept loop's socket has TCP_NODELAY");
        drop((first, second));
    }
}
