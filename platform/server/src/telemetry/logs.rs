//! The process's `tracing` subscriber: human-readable or JSON log lines on
//! stderr, filtered by `PILOTAGE_LOG`, and, when OTLP export is on, the
//! OpenTelemetry layer beside them. While a span of an exported trace is
//! current, each log line carries its trace id (`trace_id=…` first on a
//! text line, a `"trace_id"` member of a JSON line), so logs and traces
//! join on it. One event of the MCP library is kept off the lines
//! ([`ClosedStreams`]): a client closing its stream is not an error.

use std::fmt;

use serde::{Deserialize, Serialize};
use tracing::{Event, Level, Subscriber};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::filter::FilterExt;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::{EnvFilter, Layer, Registry};

use super::otlp::{OtlpPipeline, span_filter};

/// The format of log lines (setting `log_format`, `PILOTAGE_LOG_FORMAT`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// One human-readable line per event (the default).
    #[default]
    Text,
    /// One JSON object per line (`timestamp`, `level`, `fields`, `target`,
    /// the current span, and `trace_id` in an exported trace).
    Json,
}

/// The trace id of the current span, when it belongs to an exported trace.
fn current_trace_id() -> Option<opentelemetry::trace::TraceId> {
    use opentelemetry::trace::TraceContextExt;
    let span = tracing::Span::current();
    if span.is_none() {
        return None;
    }
    let context = span.context();
    let span_context = context.span().span_context().clone();
    span_context.is_valid().then(|| span_context.trace_id())
}

/// An event format that puts the current trace id in front of (text) or
/// inside (JSON) what `inner` writes.
#[derive(Debug)]
pub struct WithTraceId<F> {
    inner: F,
    json: bool,
}

impl<S, N, F> FormatEvent<S, N> for WithTraceId<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(&self, ctx: &FmtContext<'_, S, N>, mut writer: Writer<'_>, event: &Event<'_>) -> fmt::Result {
        let Some(trace_id) = current_trace_id() else {
            return self.inner.format_event(ctx, writer, event);
        };
        if !self.json {
            write!(writer, "trace_id={trace_id} ")?;
            return self.inner.format_event(ctx, writer, event);
        }
        let mut line = String::new();
        self.inner.format_event(ctx, Writer::new(&mut line), event)?;
        match line.strip_prefix('{') {
            Some(rest) => write!(writer, "{{\"trace_id\":\"{trace_id}\",{rest}"),
            None => writer.write_str(&line),
        }
    }
}

/// Drops the MCP library's ERROR that a response could not be sent because
/// its stream was already closed (`rmcp::service`, "fail to response
/// message" or "failed to send pending response during drain", with
/// `channel closed`; which of the two depends on whether the answer came
/// before or after the request was drained): a 2026-07-28 client ends
/// `subscriptions/listen` by closing the stream, after which there is
/// nobody to answer, so every normal end of a subscription printed an
/// ERROR line. Any other error of those events (or of the library) still
/// passes.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ClosedStreams;

impl ClosedStreams {
    /// The library's two lines for a response whose stream is gone: sent
    /// from its main loop, or while it drains a closed request.
    const MESSAGES: [&'static str; 2] = ["fail to response message", "failed to send pending response during drain"];

    fn is_closed_stream(event: &Event<'_>) -> bool {
        /// The event's message and `error` field, as text.
        #[derive(Default)]
        struct Fields {
            message: String,
            error: String,
        }
        impl tracing::field::Visit for Fields {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn fmt::Debug) {
                match field.name() {
                    "message" => self.message = format!("{value:?}"),
                    "error" => self.error = format!("{value:?}"),
                    _ => {}
                }
            }
        }
        let metadata = event.metadata();
        if *metadata.level() != Level::ERROR || metadata.target() != "rmcp::service" {
            return false;
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        Self::MESSAGES.contains(&fields.message.as_str()) && fields.error == "channel closed"
    }
}

impl<S> tracing_subscriber::layer::Filter<S> for ClosedStreams {
    fn enabled(&self, _: &tracing::Metadata<'_>, _: &tracing_subscriber::layer::Context<'_, S>) -> bool {
        true
    }

    fn event_enabled(&self, event: &Event<'_>, _: &tracing_subscriber::layer::Context<'_, S>) -> bool {
        !Self::is_closed_stream(event)
    }
}

/// The subscriber: log lines in `format` filtered by `filter`, and the
/// OpenTelemetry layer of `otlp` when given.
pub fn subscriber(
    filter: EnvFilter,
    format: LogFormat,
    otlp: Option<&OtlpPipeline>,
) -> impl Subscriber + Send + Sync + 'static {
    let lines: Box<dyn Layer<Registry> + Send + Sync> = match format {
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            // Colour codes only for a person at a terminal: piped into a
            // file, a pager or another program they are noise.
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .event_format(WithTraceId { inner: tracing_subscriber::fmt::format(), json: false })
            .with_filter(filter.and(ClosedStreams))
            .boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .event_format(WithTraceId { inner: tracing_subscriber::fmt::format().json(), json: true })
            .fmt_fields(tracing_subscriber::fmt::format::JsonFields::new())
            .with_filter(filter.and(ClosedStreams))
            .boxed(),
    };
    let traces: Option<Box<dyn Layer<Registry> + Send + Sync>> = otlp.map(|pipeline| {
        tracing_opentelemetry::layer()
            .with_tracer(pipeline.tracer())
            .with_location(false)
            .with_threads(false)
            .with_target(false)
            .with_level(false)
            .with_tracked_inactivity(false)
            // The hint keeps the process's maximum level at DEBUG (the
            // level of the exported spans): without one, `log` records
            // of every crate down to TRACE (Cranelift's, thousands per
            // compile) are built and filtered one by one, which made a
            // Language's compilation about 7 times slower with export on.
            .with_filter(tracing_subscriber::filter::filter_fn(span_filter).with_max_level_hint(Level::DEBUG))
            .boxed()
    });
    let layers: Vec<Box<dyn Layer<Registry> + Send + Sync>> = std::iter::once(lines).chain(traces).collect();
    Registry::default().with(layers)
}

/// Installs [`subscriber`] as the process's global subscriber (and
/// `log` records as its events).
///
/// # Errors
/// [`tracing_subscriber::util::TryInitError`] when a global subscriber is
/// already installed.
pub fn init(
    filter: EnvFilter,
    format: LogFormat,
    otlp: Option<&OtlpPipeline>,
) -> Result<(), tracing_subscriber::util::TryInitError> {
    use tracing_subscriber::util::SubscriberInitExt;
    subscriber(filter, format, otlp).try_init()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_parse_as_settings_and_flags() {
        #[derive(Deserialize)]
        struct Holder {
            format: LogFormat,
        }
        let holder: Holder = toml::from_str("format = \"json\"").unwrap();
        assert_eq!(holder.format, LogFormat::Json);
        let holder: Holder = toml::from_str("format = \"text\"").unwrap();
        assert_eq!(holder.format, LogFormat::Text);
        assert!(toml::from_str::<Holder>("format = \"xml\"").is_err());
    }
}
