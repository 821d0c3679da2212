//! OpenTelemetry traces, off unless `[telemetry.otlp] endpoint` is set: spans of Publish calls,
//! spec resyncs, plugin calls and the API-server and database calls plugins make through the
//! host, exported over OTLP/gRPC. A Publish continues the agent's trace when its event carries
//! the CloudEvents distributed-tracing extension (`traceparent`, `tracestate`), and the events
//! conductor sends carry the trace they were sent in.
//!
//! The spans are `tracing` spans of the target [`TARGET`] at `TRACE` level, handed to
//! OpenTelemetry by `tracing-opentelemetry`: with tracing off no layer wants them, so creating one
//! costs a cached callsite check.

use std::borrow::Cow;
use std::sync::Arc;

use conductor_plugin_sdk::{CloudEvent, ExtensionValue};
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{Sampler, SdkTracer, SdkTracerProvider, SpanData, SpanExporter};
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::config::OtlpConfig;

/// The `tracing` target of the spans exported.
pub const TARGET: &str = "conductor::trace";

/// The extensions of the CloudEvents distributed-tracing extension.
const TRACEPARENT: &str = "traceparent";
const TRACESTATE: &str = "tracestate";

/// The exporting side: flushed and stopped by [`Traces::shutdown`].
pub struct Traces {
    provider: SdkTracerProvider,
}

impl Traces {
    /// Starts exporting to `config.endpoint`. Call it from within the runtime that will carry the
    /// exports.
    pub fn start(config: &OtlpConfig) -> Result<Self, String> {
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_endpoint(&config.endpoint)
            .with_timeout(config.timeout.0)
            .build()
            .map_err(|e| format!("telemetry.otlp.endpoint {:?}: {e}", config.endpoint))?;
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| "the OTLP exporter needs the async runtime it sends with".to_owned())?;
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(OnRuntime {
                exporter: Arc::new(exporter),
                runtime,
            })
            .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
                config.sample_ratio,
            ))))
            .with_resource(
                opentelemetry_sdk::Resource::builder()
                    .with_service_name(config.service_name.clone())
                    .build(),
            )
            .build();
        Ok(Self { provider })
    }

    /// The tracer the `tracing` layer hands spans to.
    pub fn tracer(&self) -> SdkTracer {
        self.provider.tracer("conductor")
    }

    /// Exports what is waiting and stops.
    pub fn shutdown(self) {
        if let Err(e) = self.provider.shutdown() {
            tracing::warn!(error = %e, "traces not all exported at shutdown");
        }
    }
}

/// The OTLP exporter run on conductor's runtime: the batch processor exports from a thread of its
/// own, where tonic finds no runtime.
#[derive(Debug)]
struct OnRuntime {
    exporter: Arc<opentelemetry_otlp::SpanExporter>,
    runtime: tokio::runtime::Handle,
}

impl SpanExporter for OnRuntime {
    async fn export(&self, batch: Vec<SpanData>) -> opentelemetry_sdk::error::OTelSdkResult {
        let exporter = Arc::clone(&self.exporter);
        match self.runtime.spawn(async move { exporter.export(batch).await }).await {
            Ok(result) => result,
            Err(e) => Err(opentelemetry_sdk::error::OTelSdkError::InternalFailure(e.to_string())),
        }
    }

    fn shutdown_with_timeout(&self, timeout: std::time::Duration) -> opentelemetry_sdk::error::OTelSdkResult {
        self.exporter.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
        // Called once, while the provider is built and before any export holds a clone.
        if let Some(exporter) = Arc::get_mut(&mut self.exporter) {
            exporter.set_resource(resource);
        }
    }
}

/// Makes `span` continue the trace `event` carries in its `traceparent` (and `tracestate`), if
/// any.
pub fn continue_from(span: &tracing::Span, event: &CloudEvent) {
    if span.is_disabled() || event.extension(TRACEPARENT).is_none() {
        return;
    }
    let parent = TraceContextPropagator::new().extract(&EventHeaders(event));
    if parent.span().span_context().is_valid() {
        let _ = span.set_parent(parent);
    }
}

/// `event` carrying the current span's trace (`traceparent`, `tracestate`): a copy when traces
/// are on and a span is current, else `event` itself.
pub fn stamped(event: &CloudEvent) -> Cow<'_, CloudEvent> {
    let context = tracing::Span::current().context();
    if !context.span().span_context().is_valid() {
        return Cow::Borrowed(event);
    }
    let mut copy = event.clone();
    TraceContextPropagator::new().inject_context(&context, &mut EventHeadersMut(&mut copy));
    Cow::Owned(copy)
}

struct EventHeaders<'a>(&'a CloudEvent);

impl Extractor for EventHeaders<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        match self.0.extension(key)? {
            ExtensionValue::String(s) | ExtensionValue::Uri(s) | ExtensionValue::UriRef(s) => Some(s),
            _ => None,
        }
    }

    fn keys(&self) -> Vec<&str> {
        [TRACEPARENT, TRACESTATE]
            .into_iter()
            .filter(|k| self.0.extension(k).is_some())
            .collect()
    }
}

struct EventHeadersMut<'a>(&'a mut CloudEvent);

impl Injector for EventHeadersMut<'_> {
    fn set(&mut self, key: &str, value: String) {
        if !value.is_empty() {
            self.0.set_extension(key, value);
        }
    }
}
