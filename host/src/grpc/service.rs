//! `io.cloudevents.v1.CloudEventService`: Publish and Subscribe, with upstream's error codes
//! (`ocm-grpc-protocol.md` §6.1) and metrics (§10).

use std::{sync::Arc, time::Instant};

use conductor_plugin_sdk::ocm::{EventType, OcmExtensions};
use conductor_plugin_sdk::{CloudEvent, Identity};
use tonic::{Request, Response, Status};

use crate::broker::{Broker, PublishError, Subscription};
use crate::proto::server::{self as proto, cloud_event_service_server};
use crate::telemetry::Metrics;
use crate::wire;

/// The label used when a Publish fails before its cluster or data type is known.
const UNKNOWN: &str = "unknown";

pub struct CloudEventService {
    broker: Arc<Broker>,
    metrics: Metrics,
}

impl CloudEventService {
    pub fn new(broker: Arc<Broker>, metrics: Metrics) -> Self {
        Self { broker, metrics }
    }
}

/// The caller's identity, put into the request by the authentication layer; anonymous without one.
fn identity_of<T>(request: &Request<T>) -> Identity {
    request
        .extensions()
        .get::<Identity>()
        .cloned()
        .unwrap_or_else(Identity::anonymous)
}

/// What the publish pipeline decoded from a request before handing it to the broker.
struct Decoded {
    event: CloudEvent,
    ty: EventType,
    cluster: String,
}

fn decode(request: proto::PublishRequest) -> Result<Decoded, Status> {
    let msg = request
        .event
        .ok_or_else(|| Status::invalid_argument("publish request has no event"))?
        .into_message()
        .map_err(|e| Status::invalid_argument(format!("failed to decode event: {e}")))?;
    let event = wire::decode(&msg).map_err(|e| Status::unknown(format!("failed to convert to cloudevent: {e}")))?;
    let cluster = event
        .cluster_name()
        .map_err(|e| Status::unknown(format!("failed to get clustername extension: {e}")))?
        .to_owned();
    let ty = EventType::parse(&event.ty)
        .map_err(|e| Status::unknown(format!("failed to parse cloud event type {}: {e}", event.ty)))?;
    Ok(Decoded { event, ty, cluster })
}

fn publish_status(error: PublishError) -> Status {
    match error {
        PublishError::Resync(e) => Status::failed_precondition(PublishError::Resync(e).to_string()),
        PublishError::Route(e) => Status::invalid_argument(e.to_string()),
        // Agents parse the message as {"ErrStatus": <Kubernetes Status>}; a busy or unreachable
        // source is Unavailable, which agents retry.
        PublishError::Source(e @ conductor_plugin_sdk::Error::Unavailable(_)) => {
            Status::unavailable(e.to_err_status_json())
        }
        PublishError::Source(e) => Status::failed_precondition(e.to_err_status_json()),
    }
}

#[tonic::async_trait]
impl cloud_event_service_server::CloudEventService for CloudEventService {
    async fn publish(&self, request: Request<proto::PublishRequest>) -> Result<Response<()>, Status> {
        let started = Instant::now();
        let identity = identity_of(&request);
        let decoded = match decode(request.into_inner()) {
            Ok(d) => d,
            Err(status) => {
                self.metrics
                    .publish_processed(UNKNOWN, UNKNOWN, status.code(), started.elapsed().as_secs_f64());
                return Err(status);
            }
        };
        let data_type = decoded.ty.data_type.to_string();
        self.metrics.publish_received(&decoded.cluster, &data_type);
        let event_id = decoded.event.id.clone();
        let result = self.broker.publish(&identity, decoded.event, &decoded.ty).await;
        let result = match result {
            Ok(()) => {
                self.metrics.publish_sent(&decoded.cluster, &data_type);
                Ok(Response::new(()))
            }
            Err(e) => {
                tracing::info!(cluster = %decoded.cluster, event_type = %decoded.ty, id = %event_id, error = %e, "publish failed");
                Err(publish_status(e))
            }
        };
        let code = result.as_ref().map_or_else(Status::code, |_| tonic::Code::Ok);
        self.metrics
            .publish_processed(&decoded.cluster, &data_type, code, started.elapsed().as_secs_f64());
        result
    }

    type SubscribeStream = Subscription;

    async fn subscribe(
        &self,
        request: Request<proto::SubscriptionRequest>,
    ) -> Result<Response<Self::SubscribeStream>, Status> {
        let req = request.into_inner();
        let subscription = self.broker.subscribe(&req.cluster_name, &req.data_type).map_err(|e| {
            let status = Status::unknown(e.to_string());
            self.metrics
                .subscribe_processed(&req.cluster_name, &req.data_type, status.code());
            status
        })?;
        let id = subscription.id();
        tracing::debug!(cluster = %req.cluster_name, data_type = %req.data_type, subscription = %id, "subscribed");
        // Registered above; the header goes out as this returns (sdk-go >= 1.2 waits for it).
        let mut response = Response::new(subscription);
        let value = id
            .to_string()
            .parse()
            .map_err(|_| Status::internal("subscription id is not a valid header value"))?;
        response.metadata_mut().insert("subscription-id", value);
        Ok(response)
    }
}
