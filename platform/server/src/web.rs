//! What every server-rendered page shares (the console and the approval
//! page): HTML escaping, the security headers every page sends, sealed
//! values for session cookies and CSRF tokens, and reading a cookie.
//!
//! Sealed values are the platform's secret box (AES-GCM under the
//! platform key, `pilotage_store::sealing`) with a (tenant, name) no
//! tenant secret can have, so any replica opens them and none can be
//! passed off as another.

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;

use crate::tenancy::Platform;

/// HTML text, escaped for element content and quoted attributes.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `text` percent-encoded as one path segment or query value.
pub(crate) fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// An HTML document with the headers every page sends: `csp` as its
/// Content-Security-Policy, no framing, no sniffing, no caching, and a
/// referrer only to this server (`same-origin`: with `no-referrer` a
/// browser sends `Origin: null` on the pages' own form posts, which the
/// Origin check would refuse). `head` goes into `<head>` as is.
pub(crate) fn document(status: StatusCode, csp: &'static str, title: &str, head: &str, body: &str) -> Response {
    let page = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{}</title>{head}</head><body>{body}</body></html>",
        escape(title)
    );
    let mut response = (status, page).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(csp));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    response
}

/// A 303 to `location` (a path of this server, or an identity provider's
/// sign-in), setting `cookie` when given.
pub(crate) fn see_other(location: &str, cookie: Option<&str>) -> Response {
    let mut response = (StatusCode::SEE_OTHER, "").into_response();
    if let Ok(location) = HeaderValue::from_str(location) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    if let Some(Ok(cookie)) = cookie.map(HeaderValue::from_str) {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    response
}

/// Seals `value` under the box name (`purpose`, `name`), as URL-safe
/// base64 of nonce and ciphertext.
pub(crate) fn seal(platform: &Platform, purpose: &str, name: &str, value: &str) -> String {
    let (nonce, sealed) = platform.secrets().seal(purpose, name, value);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode([nonce, sealed].concat())
}

/// Opens what [`seal`] sealed under the same (`purpose`, `name`); `None`
/// for anything else (another name, a forged or truncated value).
pub(crate) fn open(platform: &Platform, purpose: &str, name: &str, text: &str) -> Option<String> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(text).ok()?;
    if bytes.len() < 12 {
        return None;
    }
    let (nonce, sealed) = bytes.split_at(12);
    platform.secrets().open(purpose, name, nonce, sealed).ok()
}

/// The value of cookie `name` in the request's `Cookie` headers.
pub(crate) fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|line| line.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_for_content_and_attributes() {
        assert_eq!(escape("<script>\"x\"&'y'</script>"), "&lt;script&gt;&quot;x&quot;&amp;&#39;y&#39;&lt;/script&gt;");
    }

    #[test]
    fn a_segment_cannot_climb_or_split() {
        assert_eq!(urlencode("apr_0a/..?"), "apr_0a%2F%2E%2E%3F");
        assert_eq!(urlencode(".."), "%2E%2E");
        assert_eq!(urlencode("workflow/v1"), "workflow%2Fv1");
    }
}
