//! The tonic server: server options (§9.3), the CloudEvent service, `grpc.health.v1` and
//! reflection (v1 and v1alpha, so both current and older `grpcurl` can `list`), on connections
//! accepted by [`super::connection`].

use std::sync::Arc;

use tokio::net::TcpListener;
use tonic::transport::Server;
use tonic_health::pb::health_server::{Health, HealthServer};

use super::CloudEventService;
use super::connection::{AcceptOptions, incoming};
use crate::auth::Auth;
use crate::broker::Broker;
use crate::config::ServerConfig;
use crate::proto::{self, server::cloud_event_service_server::CloudEventServiceServer};
use crate::telemetry::Metrics;
use crate::tls::ReloadingTls;

/// What the server needs besides its configuration.
pub struct ServerParts<H> {
    pub broker: Arc<Broker>,
    pub metrics: Metrics,
    pub health: HealthServer<H>,
    pub auth: Arc<Auth>,
    /// The TLS configuration (none when serving plaintext).
    pub tls: Option<Arc<ReloadingTls>>,
}

/// Serves on `listener` until `shutdown` resolves, then drains the open streams.
pub async fn serve<H: Health>(
    listener: TcpListener,
    config: &ServerConfig,
    parts: ServerParts<H>,
    shutdown: impl Future<Output = ()> + Send,
) -> anyhow::Result<()> {
    let service = CloudEventService::new(
        parts.broker,
        parts.metrics.clone(),
        parts.auth,
        config.max_subscriptions_per_identity,
    );
    let service = CloudEventServiceServer::new(service)
        .max_decoding_message_size(config.max_receive_message_size.as_usize())
        .max_encoding_message_size(config.max_send_message_size.as_usize());
    let reflection_v1 = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    let reflection_v1alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1alpha()?;
    let options = AcceptOptions {
        tls: parts.tls,
        max_connections: config.max_connections,
        handshake_timeout: config.tls_handshake_timeout.0,
        client_min_ping_interval: config.client_min_ping_interval.0,
        max_streams_per_connection: config.max_concurrent_streams,
        unauthenticated_timeout: config.unauthenticated_timeout.0,
    };
    Server::builder()
        .http2_keepalive_interval(Some(config.keepalive_interval.0))
        .http2_keepalive_timeout(Some(config.keepalive_timeout.0))
        .max_concurrent_streams(config.max_concurrent_streams)
        .add_service(service)
        .add_service(parts.health)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .serve_with_incoming_shutdown(incoming(listener, options, parts.metrics.security.clone()), shutdown)
        .await?;
    Ok(())
}
