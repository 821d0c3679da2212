//! `io.cloudevents.v1.CloudEventService`: Publish and Subscribe, with upstream's error codes
//! (`docs/protocol.md` §6.1) and metrics (§10). Every call is authenticated and authorized
//! (§9) before the broker sees it.

use std::{sync::Arc, time::Instant};

use conductor_plugin_sdk::ocm::{EventType, OcmExtensions};
use conductor_plugin_sdk::{CloudEvent, Identity};
use tonic::{Request, Response, Status};

use super::limits::{Held, SubscriptionSlots};
use crate::attributes::{self, Misspelling};
use crate::auth::{Access, Auth};
use crate::broker::{Broker, Peer, PublishError, Subscription};
use crate::net::{ConnectionInfo, StreamGuard};
use crate::proto::server::{self as proto, cloud_event_service_server};
use crate::telemetry::Metrics;
use crate::wire;

/// The label used when a Publish fails before its cluster or data type is known.
const UNKNOWN: &str = "unknown";

pub struct CloudEventService {
    broker: Arc<Broker>,
    metrics: Metrics,
    auth: Arc<Auth>,
    subscriptions: SubscriptionSlots,
}

/// What a call brings besides its message: its connection and its credentials.
struct Caller {
    connection: Option<ConnectionInfo>,
    authorization: Option<String>,
}

impl Caller {
    fn of<T>(request: &Request<T>) -> Self {
        Self {
            connection: request.extensions().get::<ConnectionInfo>().cloned(),
            authorization: request
                .metadata()
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
        }
    }
}

impl CloudEventService {
    pub fn new(broker: Arc<Broker>, metrics: Metrics, auth: Arc<Auth>, max_subscriptions_per_identity: usize) -> Self {
        Self {
            broker,
            metrics,
            auth,
            subscriptions: SubscriptionSlots::new(max_subscriptions_per_identity),
        }
    }

    /// Counts the call against its connection's stream limit.
    fn open_stream(&self, caller: &Caller) -> Option<StreamGuard> {
        let (guard, at_limit) = caller.connection.as_ref()?.open_stream();
        if at_limit {
            self.metrics.security.stream_limit_reached();
        }
        Some(guard)
    }

    /// Who is calling; an error is counted and returned as the call's status. A caller that is
    /// identified marks its connection authenticated (`server.unauthenticated_timeout`).
    async fn authenticate(&self, caller: &Caller, method: &str) -> Result<Identity, Status> {
        let identity = self
            .auth
            .authenticate(caller.authorization.as_deref(), caller.connection.as_ref())
            .await
            .map_err(|e| {
                let status = Status::from(e);
                self.metrics.security.auth_refused(method, status.code());
                status
            })?;
        if let Some(connection) = &caller.connection {
            connection.mark_authenticated();
        }
        Ok(identity)
    }

    async fn authorize(&self, identity: &Identity, access: &Access<'_>, method: &str) -> Result<(), Status> {
        self.auth.authorize(identity, access).await.inspect_err(|status| {
            self.metrics.security.auth_refused(method, status.code());
            tracing::info!(user = %identity.user, method, error = %status.message(), "call refused");
        })
    }
}

/// What the publish pipeline decoded from a request before handing it to the broker.
struct Decoded {
    event: CloudEvent,
    ty: EventType,
    cluster: String,
    /// Keys of the event that misspell an attribute (`clustername` for `ce-clustername`), named
    /// in the refusal if the event is refused.
    misspelled: Vec<Misspelling>,
}

fn decode(request: proto::PublishRequest) -> Result<Decoded, Status> {
    let msg = request
        .event
        .ok_or_else(|| Status::invalid_argument("publish request has no event"))?
        .into_message()
        .map_err(|e| Status::invalid_argument(format!("failed to decode event: {e}")))?;
    let misspelled = attributes::wire_misspellings(msg.attributes.keys());
    let hint = || attributes::hint(&misspelled);
    let event =
        wire::decode(&msg).map_err(|e| Status::unknown(format!("failed to convert to cloudevent: {e}{}", hint())))?;
    let cluster = match event.cluster_name() {
        Ok(cluster) => cluster.to_owned(),
        // Name the key it travels under, and what the event has instead.
        Err(e @ conductor_plugin_sdk::ExtensionError::Missing(_)) => {
            return Err(Status::unknown(format!(
                "failed to get clustername extension: {e}: its key is \"ce-clustername\"{}",
                hint()
            )));
        }
        Err(e) => return Err(Status::unknown(format!("failed to get clustername extension: {e}"))),
    };
    let ty = EventType::parse(&event.ty)
        .map_err(|e| Status::unknown(format!("failed to parse cloud event type {}: {e}", event.ty)))?;
    Ok(Decoded {
        event,
        ty,
        cluster,
        misspelled,
    })
}

/// The status of a failed Publish; `hint` (the event's misspelt keys, or `""`) is added to the
/// message, inside the `ErrStatus` of a source's refusal.
fn publish_status(error: PublishError, hint: &str) -> Status {
    let err_status = |e: conductor_plugin_sdk::Error| {
        let mut status = e.to_status();
        status.message.push_str(hint);
        serde_json::json!({ "ErrStatus": status.to_json() }).to_string()
    };
    match error {
        PublishError::Resync(e) => Status::failed_precondition(format!("{}{hint}", PublishError::Resync(e))),
        PublishError::Route(e) => Status::invalid_argument(format!("{e}{hint}")),
        // Agents parse the message as {"ErrStatus": <Kubernetes Status>}; a busy or unreachable
        // source is Unavailable, which agents retry.
        PublishError::Source(e @ conductor_plugin_sdk::Error::Unavailable(_)) => Status::unavailable(err_status(e)),
        PublishError::Source(e) => Status::failed_precondition(err_status(e)),
    }
}

#[tonic::async_trait]
impl cloud_event_service_server::CloudEventService for CloudEventService {
    async fn publish(&self, request: Request<proto::PublishRequest>) -> Result<Response<()>, Status> {
        let started = Instant::now();
        let caller = Caller::of(&request);
        let _stream = self.open_stream(&caller);
        let refused = |status: Status, cluster: &str, data_type: &str| {
            self.metrics
                .publish_processed(cluster, data_type, status.code(), started.elapsed().as_secs_f64());
            status
        };
        let decoded = decode(request.into_inner()).map_err(|status| refused(status, UNKNOWN, UNKNOWN))?;
        // With traces on: a span of the call, continuing the agent's trace if its event has one.
        let span = tracing::span!(
            target: "conductor::trace",
            tracing::Level::TRACE,
            "Publish",
            otel.kind = "server",
            cluster = %decoded.cluster,
            event_type = %decoded.ty,
        );
        crate::telemetry::traces::continue_from(&span, &decoded.event);
        tracing::Instrument::instrument(self.publish_decoded(caller, decoded, started), span).await
    }

    type SubscribeStream = Held<Subscription>;

    async fn subscribe(
        &self,
        request: Request<proto::SubscriptionRequest>,
    ) -> Result<Response<Self::SubscribeStream>, Status> {
        self.subscribe_call(request).await
    }
}

impl CloudEventService {
    /// The rest of a Publish, once its event is decoded.
    async fn publish_decoded(
        &self,
        caller: Caller,
        decoded: Decoded,
        started: Instant,
    ) -> Result<Response<()>, Status> {
        let refused = |status: Status, cluster: &str, data_type: &str| {
            self.metrics
                .publish_processed(cluster, data_type, status.code(), started.elapsed().as_secs_f64());
            status
        };
        // Nothing about the call is labelled with what an unidentified caller claims.
        let identity = self
            .authenticate(&caller, "Publish")
            .await
            .map_err(|status| refused(status, UNKNOWN, UNKNOWN))?;
        let data_type = decoded.ty.data_type.to_string();
        let access = Access::Publish {
            cluster: &decoded.cluster,
            ty: &decoded.ty,
            data: decoded.event.data.as_deref(),
        };
        // Refused callers are not labelled with the cluster and data type they claim: the series
        // stay bounded by what the hub allows.
        self.authorize(&identity, &access, "Publish")
            .await
            .map_err(|status| refused(status, UNKNOWN, UNKNOWN))?;
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
                Err(publish_status(e, &attributes::hint(&decoded.misspelled)))
            }
        };
        let code = result.as_ref().map_or_else(Status::code, |_| tonic::Code::Ok);
        self.metrics
            .publish_processed(&decoded.cluster, &data_type, code, started.elapsed().as_secs_f64());
        result
    }

    async fn subscribe_call(
        &self,
        request: Request<proto::SubscriptionRequest>,
    ) -> Result<Response<Held<Subscription>>, Status> {
        let caller = Caller::of(&request);
        let stream = self.open_stream(&caller);
        let req = request.into_inner();
        let refused = |status: Status, cluster: &str, data_type: &str| {
            self.metrics.subscribe_processed(cluster, data_type, status.code());
            status
        };
        let identity = self
            .authenticate(&caller, "Subscribe")
            .await
            .map_err(|status| refused(status, UNKNOWN, UNKNOWN))?;
        let access = Access::Subscribe {
            cluster: &req.cluster_name,
            data_type: &req.data_type,
        };
        self.authorize(&identity, &access, "Subscribe")
            .await
            .map_err(|status| refused(status, UNKNOWN, UNKNOWN))?;
        // Anonymous callers (no authenticator configured) share one identity: only the
        // per-connection stream limit applies to them.
        let slot = if self.auth.identifies() {
            let slot = self.subscriptions.take(&identity.user);
            if slot.is_none() {
                self.metrics.security.subscription_refused();
                let status = Status::resource_exhausted(format!(
                    "{:?} already holds {} subscriptions (server.max_subscriptions_per_identity)",
                    identity.user,
                    self.subscriptions.limit()
                ));
                return Err(refused(status, &req.cluster_name, &req.data_type));
            }
            slot
        } else {
            None
        };
        let subscription = self
            .broker
            .subscribe(
                &req.cluster_name,
                &req.data_type,
                Peer {
                    user: identity.user.clone(),
                    remote: caller.connection.as_ref().map(|c| c.remote),
                },
            )
            .map_err(|e| refused(Status::unknown(e.to_string()), UNKNOWN, UNKNOWN))?;
        let id = subscription.id();
        tracing::debug!(cluster = %req.cluster_name, data_type = %req.data_type, subscription = %id, user = %identity.user, "subscribed");
        // Registered above; the header goes out as this returns (sdk-go >= 1.2 waits for it).
        let mut response = Response::new(Held::new(subscription, slot, stream));
        let value = id
            .to_string()
            .parse()
            .map_err(|_| Status::internal("subscription id is not a valid header value"))?;
        response.metadata_mut().insert("subscription-id", value);
        Ok(response)
    }
}
