//! MCP Apps (the official MCP extension `io.modelcontextprotocol/ui`,
//! SEP-1865, specification version 2026-01-26 as `@modelcontextprotocol/ext-apps`
//! 2.0 implements it): two views a host may render beside a tool's result,
//! the plan view (`ui://pilotage/plan-view`, declared by every Language's
//! validate tool) and the Run view (`ui://pilotage/run-view`, declared by
//! its execute and trace-fetch tools).
//!
//! A view is one `ui://` resource of MIME type `text/html;profile=mcp-app`
//! (SEP-1865 "UI Resource Format"): a self-contained HTML document made of
//! a small template, the shared renderer of the console
//! (`VIEW_JS`, `VIEW_CSS`, also served by the console) and the App glue
//! (`apps/app.js`, `apps/app.css`), every byte embedded in the binary. The
//! glue speaks the view side of the protocol over `postMessage` JSON-RPC:
//! `ui/initialize` and `ui/notifications/initialized`, then
//! `ui/notifications/tool-input` and `ui/notifications/tool-result` from
//! the host, `ui/notifications/size-changed` to it; the Run view asks the
//! host for the plan of the program it ran (`tools/call` of
//! `pilotage_manifest` for the Language's validate tool, then of that
//! tool), so a view never holds a credential and never reaches the
//! network.
//!
//! Invariant: a view is the same document for every caller and every
//! tenant; it carries no tenant data, and everything it shows arrives from
//! the host. Its resource metadata (`_meta.ui`) declares a CSP with no
//! domain of any kind (no connect, resource, frame or base-URI origin), so
//! a host that follows SEP-1865 "Content Security Policy" lets it load
//! nothing and connect nowhere.
//!
//! What it does not cover: `_meta.ui.visibility` (every tool stays visible
//! to the model and the app alike, the default), `ui/message`,
//! `ui/open-link`, `ui/update-model-context` and display modes (the views
//! are read-only and inline).

use std::sync::LazyLock;

use rmcp::model::{MetaObject, ReadResourceResult, Resource, ResourceContents};
use serde_json::{Value, json};

/// The MIME type of an MCP App's HTML resource (SEP-1865 "UI Resource
/// Format"; the SDK's `RESOURCE_MIME_TYPE`).
const MIME_TYPE: &str = "text/html;profile=mcp-app";

/// The key under a tool's `_meta` holding its UI metadata, whose
/// `resourceUri` names the view (SEP-1865 "Resource Discovery").
const UI_META_KEY: &str = "ui";

/// The deprecated flat key of a tool's view, `_meta["ui/resourceUri"]`,
/// which hosts still read when `_meta.ui.resourceUri` is absent (the SDK's
/// `RESOURCE_URI_META_KEY`); written beside the nested form, as the SDK's
/// own `registerAppTool` does, for hosts that only know the older drafts.
const LEGACY_RESOURCE_URI_KEY: &str = "ui/resourceUri";

/// The App glue: the view side of the MCP Apps protocol, hand-written, no
/// framework, no network.
const APP_JS: &str = include_str!("apps/app.js");
/// The shared plan and Run views (`globalThis.PilotageView`), which the
/// console's Run pages use too (`console::assets` serves them).
pub(crate) const VIEW_JS: &str = include_str!("apps/view.js");
/// Their style.
pub(crate) const VIEW_CSS: &str = include_str!("apps/view.css");

/// The template's own styles (layout of the page around the renderer).
const APP_CSS: &str = include_str!("apps/app.css");

/// One of the two views (SEP-1865 "UI Resource Format").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum View {
    /// The plan of a validated program: its steps with their risk and
    /// arms, or its diagnostics (a validate response, Part II §6.4).
    Plan,
    /// A Run: its outcome, output and trace, with the program's plan above
    /// the trace when the tool input carried the program (an execute
    /// response, Part II §6.5, or a trace-fetch response, §6.6).
    Run,
}

/// Occurs when a `ui://` resource is asked for that this server does not
/// offer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum ViewError {
    /// Occurs when `resources/read` names a `ui://` URI that is neither
    /// view.
    #[error("'{uri}' is no view of this server; its views are {PLAN_VIEW_URI} and {RUN_VIEW_URI}")]
    UnknownView {
        /// The URI asked for.
        uri: String,
    },
}

/// The plan view's URI (SEP-1865 "UI Resource Format": a `ui://` URI).
const PLAN_VIEW_URI: &str = "ui://pilotage/plan-view";

/// The Run view's URI (SEP-1865 "UI Resource Format": a `ui://` URI).
const RUN_VIEW_URI: &str = "ui://pilotage/run-view";

impl View {
    /// Both views, in listing order.
    const ALL: [View; 2] = [View::Plan, View::Run];

    /// Its `ui://` URI.
    fn uri(self) -> &'static str {
        match self {
            View::Plan => PLAN_VIEW_URI,
            View::Run => RUN_VIEW_URI,
        }
    }

    /// The view `uri` names, if any (SEP-1865 "UI Resource Format").
    pub(crate) fn parse(uri: &str) -> Option<View> {
        View::ALL.into_iter().find(|view| view.uri() == uri)
    }

    /// The name it is listed under, the `data-view` of its document and the
    /// `appInfo.name` its glue sends in `ui/initialize`.
    fn name(self) -> &'static str {
        match self {
            View::Plan => "pilotage-plan-view",
            View::Run => "pilotage-run-view",
        }
    }

    fn title(self) -> &'static str {
        match self {
            View::Plan => "Pilotage plan",
            View::Run => "Pilotage Run",
        }
    }

    fn description(self) -> &'static str {
        match self {
            View::Plan => {
                "MCP App of the validate tools: the plan of a validated program (every step with its risk and \
                 branch arm) or its diagnostics"
            }
            View::Run => {
                "MCP App of the run and trace tools: a Run's outcome, output and trace (decisions with their \
                 reasons), with the program's plan above it when the call carried the program"
            }
        }
    }

    /// The heading of its document.
    fn heading(self) -> &'static str {
        match self {
            View::Plan => "Plan of the program",
            View::Run => "Run of the program",
        }
    }

    /// Its HTML document, built once.
    fn html(self) -> &'static str {
        static PLAN: LazyLock<String> = LazyLock::new(|| document(View::Plan));
        static RUN: LazyLock<String> = LazyLock::new(|| document(View::Run));
        match self {
            View::Plan => &PLAN,
            View::Run => &RUN,
        }
    }
}

/// `code` made safe to sit inside an HTML element whose content ends at
/// `</tag`: every `</` becomes `<\/`, which JavaScript and CSS read as the
/// same characters in a string or comment, and which can no longer close
/// the element early.
fn raw_text(code: &str) -> String {
    code.replace("</", "<\\/")
}

/// The view's document: the template around the renderer and the glue.
/// The renderer comes first, so `globalThis.PilotageView` exists when the
/// glue starts; `#pv-root` is where the glue renders (the Run view's plan
/// goes above its trace inside the renderer's own Run layout), `#pv-status`
/// says what the view is waiting for or what went wrong.
fn document(view: View) -> String {
    format!(
        r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>{view_css}</style>
<style>{app_css}</style>
</head>
<body data-view="{name}" data-version="{version}">
<main>
<h1 id="pv-title">{heading}</h1>
<p id="pv-status" class="pv-status-line" role="status" aria-live="polite">Waiting for the host to send the tool call.</p>
<div id="pv-root" class="pv-root"></div>
</main>
<script>{view_js}</script>
<script>{app_js}</script>
</body>
</html>
"#,
        title = view.title(),
        name = view.name(),
        version = env!("CARGO_PKG_VERSION"),
        heading = view.heading(),
        view_css = raw_text(VIEW_CSS),
        app_css = raw_text(APP_CSS),
        view_js = raw_text(VIEW_JS),
        app_js = raw_text(APP_JS),
    )
}

/// The resource metadata of a view (SEP-1865 "UI Resource Format",
/// `McpUiResourceMeta`): a CSP with no domain at all (`connectDomains`,
/// `resourceDomains`, `frameDomains` and `baseUriDomains` empty: no
/// network, nothing loaded, no nested frame), no permission, and a border
/// asked for (`prefersBorder`). Written on both the `resources/list` entry
/// and the `resources/read` content, as hosts read the content's first and
/// the listing's as a fallback.
fn resource_meta() -> MetaObject {
    let mut meta = MetaObject::new();
    meta.insert(
        UI_META_KEY.to_owned(),
        json!({
            "csp": {"connectDomains": [], "resourceDomains": [], "frameDomains": [], "baseUriDomains": []},
            "prefersBorder": true
        }),
    );
    meta
}

/// `meta` (a tool's `_meta`, such as its program declaration) with `view`
/// declared as the tool's UI (SEP-1865 "Resource Discovery"):
/// `_meta.ui.resourceUri`, merged into any `ui` object already there, and
/// the deprecated `_meta["ui/resourceUri"]`. Every other key is kept.
pub(crate) fn declare_view(mut meta: MetaObject, view: View) -> MetaObject {
    let ui = meta.0.entry(UI_META_KEY.to_owned()).or_insert_with(|| json!({}));
    if !ui.is_object() {
        *ui = json!({});
    }
    if let Value::Object(ui) = ui {
        ui.insert("resourceUri".to_owned(), json!(view.uri()));
    }
    meta.insert(LEGACY_RESOURCE_URI_KEY.to_owned(), json!(view.uri()));
    meta
}

/// Both views as `resources/list` entries (SEP-1865 "UI Resource
/// Format"), the same for every caller.
pub(crate) fn list() -> Vec<Resource> {
    View::ALL
        .into_iter()
        .map(|view| {
            Resource::new(view.uri(), view.name())
                .with_title(view.title())
                .with_description(view.description())
                .with_mime_type(MIME_TYPE)
                .with_size(view.html().len() as u64)
                .with_meta(resource_meta())
        })
        .collect()
}

/// Reads the view `uri` names: its document as one text content of
/// [`MIME_TYPE`], with its [`resource_meta`].
///
/// # Errors
/// [`ViewError::UnknownView`] when `uri` names neither view.
pub(crate) fn read(uri: &str) -> Result<ReadResourceResult, ViewError> {
    let view = View::parse(uri).ok_or_else(|| ViewError::UnknownView { uri: uri.to_owned() })?;
    Ok(ReadResourceResult::new(vec![ResourceContents::TextResourceContents {
        uri: view.uri().to_owned(),
        mime_type: Some(MIME_TYPE.to_owned()),
        text: view.html().to_owned(),
        meta: Some(resource_meta()),
    }]))
}

/// Whether `uri` is in the `ui://` scheme of MCP Apps resources (SEP-1865
/// "UI Resource Format"), a view or not: such a URI is answered by this
/// module, never by the Pilotage resource surface (Part III §8.3).
pub(crate) fn is_ui(uri: &str) -> bool {
    uri.starts_with("ui://")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both views read as their listed URI, type and metadata; another
    /// `ui://` URI is an error value.
    #[test]
    fn the_views_read_as_listed_and_nothing_else_does() {
        let listed = list();
        assert_eq!(listed.len(), 2);
        for resource in listed {
            let read = read(&resource.uri).unwrap();
            let [ResourceContents::TextResourceContents { uri, mime_type, text, meta }] = &read.contents[..] else {
                panic!("one text content: {:?}", read.contents);
            };
            assert_eq!(uri, &resource.uri);
            assert_eq!(mime_type.as_deref(), Some(MIME_TYPE));
            assert_eq!(resource.mime_type.as_deref(), Some(MIME_TYPE));
            assert_eq!(meta.as_ref(), resource.meta.as_ref());
            assert_eq!(resource.size, Some(text.len() as u64));
            let ui = &meta.as_ref().unwrap().0[UI_META_KEY];
            for key in ["connectDomains", "resourceDomains", "frameDomains", "baseUriDomains"] {
                assert_eq!(ui["csp"][key], json!([]), "{key}");
            }
            assert!(text.starts_with("<!doctype html>") && text.contains("globalThis.PilotageView"));
        }
        for bad in ["ui://pilotage/other", "ui://", "pilotage://manifest"] {
            assert!(matches!(read(bad), Err(ViewError::UnknownView { .. })), "{bad}");
        }
    }

    /// Declaring a view keeps the program declaration and any other `ui`
    /// member, and writes both the nested and the deprecated key.
    #[test]
    fn declaring_a_view_merges_into_the_tool_meta() {
        let mut meta = MetaObject::new();
        meta.insert(pilotage_protocol::META_KEY.to_owned(), json!({"argument": "workflow", "language": "workflow/v1"}));
        meta.insert(UI_META_KEY.to_owned(), json!({"visibility": ["model", "app"]}));
        let declared = declare_view(meta, View::Run);
        assert_eq!(declared.0[pilotage_protocol::META_KEY]["argument"], "workflow");
        assert_eq!(declared.0[UI_META_KEY], json!({"visibility": ["model", "app"], "resourceUri": RUN_VIEW_URI}));
        assert_eq!(declared.0[LEGACY_RESOURCE_URI_KEY], RUN_VIEW_URI);
        let mut odd = MetaObject::new();
        odd.insert(UI_META_KEY.to_owned(), json!("not an object"));
        assert_eq!(declare_view(odd, View::Plan).0[UI_META_KEY], json!({"resourceUri": PLAN_VIEW_URI}));
    }

    /// No asset can close its element early: a `</script>` in the code is
    /// written `<\/script>`.
    #[test]
    fn embedded_code_cannot_close_its_element() {
        assert_eq!(raw_text("a = '</script>';"), "a = '<\\/script>';");
        for view in View::ALL {
            let html = view.html();
            assert_eq!(html.matches("</script>").count(), 2, "{view:?}");
            assert_eq!(html.matches("</style>").count(), 2, "{view:?}");
        }
    }
}
