//! The tonic server: server options (§9.3), the CloudEvent service, `grpc.health.v1` and
//! reflection (v1 and v1alpha, so both current and older `grpcurl` can `list`).

use std::sync::Arc;

use tokio::net::TcpListener;
use tonic::transport::{Server, server::TcpIncoming};
use tonic_health::pb::health_server::{Health, HealthServer};

use super::CloudEventService;
use crate::broker::Broker;
use crate::config::ServerConfig;
use crate::proto::{self, server::cloud_event_service_server::CloudEventServiceServer};
use crate::telemetry::Metrics;

/// Serves on `listener` until `shutdown` resolves, then drains the open streams.
pub async fn serve(
    listener: TcpListener,
    config: &ServerConfig,
    broker: Arc<Broker>,
    metrics: Metrics,
    health: HealthServer<impl Health>,
    shutdown: impl Future<Output = ()> + Send,
) -> anyhow::Result<()> {
    let service = CloudEventServiceServer::new(CloudEventService::new(broker, metrics))
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
    // Small events must not wait for Nagle's algorithm: set on every accepted connection.
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
    Server::builder()
        .http2_keepalive_interval(Some(config.keepalive_interval.0))
        .http2_keepalive_timeout(Some(config.keepalive_timeout.0))
        .max_concurrent_streams(config.max_concurrent_streams)
        .add_service(service)
        .add_service(health)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await?;
    Ok(())
}
