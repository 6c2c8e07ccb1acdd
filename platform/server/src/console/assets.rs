//! The console's and the views' static assets, embedded in the binary (no
//! file is read and nothing is fetched from elsewhere at run time):
//!
//! - `view.js` / `view.css`: the plan view and the Run view, shared by the
//!   console's Run page and the MCP Apps views (`crate::mcp::apps`);
//! - `console.js` / `console.css`: the console's own (the live charts, the
//!   Run page's start-up, the layout).
//!
//! Served at `/console/assets/{name}` with their media type, `nosniff` and
//! a day's caching (an asset changes only with the binary).

use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

// The shared plan and Run views, which the MCP Apps views embed too.
use crate::mcp::apps::{VIEW_CSS, VIEW_JS};
/// The console's script.
const CONSOLE_JS: &str = include_str!("assets/console.js");
/// The console's style.
const CONSOLE_CSS: &str = include_str!("assets/console.css");

/// `GET /console/assets/{name}`; 404 for any other name.
pub(super) async fn asset(Path(name): Path<String>) -> Response {
    let (body, media) = match name.as_str() {
        "view.js" => (VIEW_JS, "text/javascript; charset=utf-8"),
        "view.css" => (VIEW_CSS, "text/css; charset=utf-8"),
        "console.js" => (CONSOLE_JS, "text/javascript; charset=utf-8"),
        "console.css" => (CONSOLE_CSS, "text/css; charset=utf-8"),
        _ => return StatusCode::NOT_FOUND.into_response(),
    };
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(media));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("private, max-age=86400"));
    response
}
