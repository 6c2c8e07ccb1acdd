//! OpenTelemetry traces exported over OTLP/HTTP with protobuf bodies
//! (`POST {endpoint}/v1/traces`), when an endpoint is configured.
//!
//! The pipeline: the `tracing` spans of `super::spans` → the
//! `tracing-opentelemetry` layer (which sees only this crate's spans and
//! its warnings, [`span_filter`]) → the SDK's batch span processor (its
//! own thread; `OTEL_BSP_*` variables tune it) → the OTLP exporter, whose
//! requests the platform's own `reqwest` client sends on the server's
//! runtime ([`ReqwestExporterClient`]). The resource's `service.name` is
//! `OTEL_SERVICE_NAME`, else `pilotage`; the sampler follows
//! `OTEL_TRACES_SAMPLER` (default: parent-based, always on).
//!
//! [`OtlpPipeline::shutdown`] flushes the spans still queued; the server
//! calls it after it stopped serving.

use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_http::{HttpClient, HttpError};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use tracing::{Level, Metadata};

/// The path of the traces signal under an OTLP/HTTP base URL.
pub const TRACES_PATH: &str = "/v1/traces";

/// The `service.name` of exported spans unless `OTEL_SERVICE_NAME` is set.
pub const DEFAULT_SERVICE_NAME: &str = "pilotage";

/// How long one export request may take before it is abandoned (the
/// batch is then dropped, and the server goes on).
pub const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// The standard variables that turn export on when no endpoint setting is
/// given: the traces signal's own, then the base URL of all signals.
pub const ENDPOINT_VARIABLES: [&str; 2] = ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"];

/// Occurs when the OTLP pipeline cannot be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OtlpError {
    /// Occurs when the endpoint is not an `http://` or `https://` URL.
    #[error("otlp_endpoint '{endpoint}' is not an http:// or https:// URL")]
    Endpoint {
        /// The endpoint given.
        endpoint: String,
    },
    /// Occurs when the exporter refuses its configuration (for example a
    /// malformed `OTEL_EXPORTER_OTLP_*` variable).
    #[error("the OTLP exporter cannot be built: {0}")]
    Exporter(String),
    /// Occurs when the exporter's HTTP client cannot be built.
    #[error("the OTLP exporter's HTTP client cannot be built: {0}")]
    Client(String),
}

/// Where spans are sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExportTarget {
    /// This URL (the traces path already appended).
    Url(String),
    /// Wherever the standard `OTEL_EXPORTER_OTLP_*` variables say.
    FromEnvironment,
}

impl ExportTarget {
    /// The target for the `otlp_endpoint` setting, or, without it, for the
    /// standard variables (`lookup` reads one; pass `std::env::var`); `None`
    /// when neither is set: export is off.
    ///
    /// The setting is a base URL like `OTEL_EXPORTER_OTLP_ENDPOINT`:
    /// [`TRACES_PATH`] is appended unless it already ends with it.
    ///
    /// # Errors
    /// [`OtlpError::Endpoint`] when the setting is not an http(s) URL.
    pub fn resolve(
        setting: Option<&str>,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<ExportTarget>, OtlpError> {
        if let Some(endpoint) = setting.map(str::trim).filter(|value| !value.is_empty()) {
            return traces_url(endpoint).map(|url| Some(ExportTarget::Url(url)));
        }
        let from_environment = ENDPOINT_VARIABLES.iter().any(|name| lookup(name).is_some_and(|v| !v.trim().is_empty()));
        Ok(from_environment.then_some(ExportTarget::FromEnvironment))
    }
}

/// The traces URL of an OTLP/HTTP base URL.
///
/// # Errors
/// [`OtlpError::Endpoint`] when `endpoint` is not an http(s) URL.
pub fn traces_url(endpoint: &str) -> Result<String, OtlpError> {
    let invalid = || OtlpError::Endpoint { endpoint: endpoint.to_owned() };
    let url = reqwest::Url::parse(endpoint).map_err(|_| invalid())?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(invalid());
    }
    let base = endpoint.trim_end_matches('/');
    Ok(if base.ends_with(TRACES_PATH) { base.to_owned() } else { format!("{base}{TRACES_PATH}") })
}

/// The exporter's HTTP client: the platform's `reqwest` client, each
/// request sent on the server's tokio runtime (the batch processor's
/// thread has none, and only waits for the answer).
#[derive(Debug)]
pub struct ReqwestExporterClient {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

impl ReqwestExporterClient {
    /// A client with [`EXPORT_TIMEOUT`] that sends on `runtime`.
    ///
    /// # Errors
    /// [`OtlpError::Client`] when reqwest cannot build it.
    pub fn new(runtime: tokio::runtime::Handle) -> Result<ReqwestExporterClient, OtlpError> {
        crate::install_crypto_provider();
        let client = reqwest::Client::builder()
            .user_agent(concat!("pilotage/", env!("CARGO_PKG_VERSION")))
            .timeout(EXPORT_TIMEOUT)
            .build()
            .map_err(|error| OtlpError::Client(error.to_string()))?;
        Ok(ReqwestExporterClient { client, runtime })
    }
}

#[async_trait::async_trait]
impl HttpClient for ReqwestExporterClient {
    async fn send_bytes(
        &self,
        request: http::Request<bytes::Bytes>,
    ) -> Result<http::Response<bytes::Bytes>, HttpError> {
        let request = reqwest::Request::try_from(request)?;
        let client = self.client.clone();
        let sending = self.runtime.spawn(async move {
            let response = client.execute(request).await?;
            let mut answer = http::Response::builder().status(response.status());
            if let Some(headers) = answer.headers_mut() {
                *headers = response.headers().clone();
            }
            let body = response.bytes().await?;
            Ok::<_, HttpError>(answer.body(body)?)
        });
        sending.await?
    }
}

/// Which `tracing` metadata the OpenTelemetry layer sees: this crate's
/// spans (the ones of `super::spans`, all at `DEBUG`) and its warnings
/// and errors, which become events of the span they happen in. Nothing of
/// rmcp's, hyper's or sqlx's own instrumentation is exported.
pub fn span_filter(metadata: &Metadata<'_>) -> bool {
    metadata.target().starts_with("pilotage_") && (metadata.is_span() || *metadata.level() <= Level::WARN)
}

/// A running export pipeline.
#[derive(Debug)]
pub struct OtlpPipeline {
    provider: SdkTracerProvider,
}

impl OtlpPipeline {
    /// Builds the exporter and the batch processor for `target`; requests
    /// are sent on `runtime`.
    ///
    /// # Errors
    /// [`OtlpError`] when the exporter or its client cannot be built.
    pub fn start(target: &ExportTarget, runtime: tokio::runtime::Handle) -> Result<OtlpPipeline, OtlpError> {
        let client = ReqwestExporterClient::new(runtime)?;
        let mut builder = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(client)
            .with_timeout(EXPORT_TIMEOUT);
        if let ExportTarget::Url(url) = target {
            builder = builder.with_endpoint(url.clone());
        }
        let exporter = builder.build().map_err(|error| OtlpError::Exporter(error.to_string()))?;
        let mut resource = Resource::builder();
        if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
            resource = resource.with_service_name(DEFAULT_SERVICE_NAME);
        }
        let resource =
            resource.with_attribute(opentelemetry::KeyValue::new("service.version", env!("CARGO_PKG_VERSION"))).build();
        let provider = SdkTracerProvider::builder().with_resource(resource).with_batch_exporter(exporter).build();
        Ok(OtlpPipeline { provider })
    }

    /// The tracer the `tracing` layer reports to.
    pub fn tracer(&self) -> SdkTracer {
        self.provider.tracer("pilotage-platform")
    }

    /// Exports the spans still queued and stops the processor (waiting at
    /// most [`EXPORT_TIMEOUT`] per batch). Runs on a blocking thread: the
    /// export itself needs the runtime's workers.
    pub async fn shutdown(self) {
        use std::io::Write as _;
        let provider = self.provider;
        let stopped = tokio::task::spawn_blocking(move || provider.shutdown()).await;
        match stopped {
            Ok(Ok(())) => {}
            // Never `eprintln!`: it panics when stderr is a closed pipe.
            Ok(Err(error)) => {
                let _ = writeln!(std::io::stderr(), "warning: the OTLP exporter did not shut down cleanly: {error}");
            }
            Err(error) => {
                let _ = writeln!(std::io::stderr(), "warning: the OTLP exporter's shutdown stopped: {error}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_setting_is_a_base_url_and_variables_turn_export_on() {
        let none = |_: &str| None;
        assert_eq!(ExportTarget::resolve(None, none).unwrap(), None);
        assert_eq!(
            ExportTarget::resolve(Some("http://127.0.0.1:4318"), none).unwrap(),
            Some(ExportTarget::Url("http://127.0.0.1:4318/v1/traces".into()))
        );
        assert_eq!(
            ExportTarget::resolve(Some("https://collector:4318/v1/traces/"), none).unwrap(),
            Some(ExportTarget::Url("https://collector:4318/v1/traces".into()))
        );
        let variable = |name: &str| (name == "OTEL_EXPORTER_OTLP_ENDPOINT").then(|| "http://c:4318".to_owned());
        assert_eq!(ExportTarget::resolve(None, variable).unwrap(), Some(ExportTarget::FromEnvironment));
        for bad in ["127.0.0.1:4318", "grpc://c:4317", "not a url"] {
            assert!(matches!(ExportTarget::resolve(Some(bad), none), Err(OtlpError::Endpoint { .. })), "{bad}");
        }
    }
}
