//! Simulated agents: each on its own TCP connection and HTTP/2 session (as every klusterlet
//! has), subscribed for its cluster, recording every spec event it receives.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use futures::StreamExt;
use tokio::task::JoinSet;
use tonic::transport::{Channel, Endpoint};

use crate::proto::{SubscriptionRequest, cloud_event_service_client::CloudEventServiceClient};
use crate::receipts::Receipts;
use crate::{HEARTBEAT, wire};

/// How agents reach the server.
#[derive(Debug, Clone)]
pub struct Target {
    /// `http://host:port`.
    pub server: String,
    pub data_type: String,
    /// A bearer token every agent sends (`authorization` metadata).
    pub token: Option<String>,
}

/// A gRPC client on a connection of its own.
pub async fn connect(target: &Target) -> Result<CloudEventServiceClient<Channel>> {
    let channel = Endpoint::from_shared(target.server.clone())
        .with_context(|| format!("bad server address {:?}", target.server))?
        .tcp_nodelay(true)
        .connect_timeout(Duration::from_secs(30))
        .connect()
        .await
        .with_context(|| format!("cannot connect to {}", target.server))?;
    Ok(CloudEventServiceClient::new(channel).max_decoding_message_size(64 << 20))
}

/// Adds the bearer token, if any.
pub fn request<T>(target: &Target, message: T) -> Result<tonic::Request<T>> {
    let mut request = tonic::Request::new(message);
    if let Some(token) = &target.token {
        let value = format!("Bearer {token}")
            .parse()
            .context("the token is not valid metadata")?;
        request.metadata_mut().insert("authorization", value);
    }
    Ok(request)
}

/// The connected agents; dropping them closes every stream.
pub struct Agents {
    tasks: JoinSet<()>,
    /// Streams that ended with an error.
    pub stream_errors: Arc<AtomicU64>,
}

impl Agents {
    /// Connects an agent for each of `clusters`, `concurrency` connections at a time, each
    /// subscribed once its stream's response header has arrived.
    pub async fn connect(
        target: &Target,
        clusters: &[String],
        concurrency: usize,
        receipts: &Arc<Receipts>,
        connected: &AtomicU64,
    ) -> Result<Self> {
        let stream_errors = Arc::new(AtomicU64::new(0));
        let mut tasks = JoinSet::new();
        let mut subscribing = futures::stream::iter(clusters)
            .map(|cluster| async move {
                let mut client = connect(target).await?;
                let subscription = SubscriptionRequest {
                    source: String::new(),
                    cluster_name: cluster.clone(),
                    data_type: target.data_type.clone(),
                };
                let stream = client
                    .subscribe(request(target, subscription)?)
                    .await
                    .with_context(|| format!("subscribe for cluster {cluster}"))?
                    .into_inner();
                anyhow::Ok((client, stream))
            })
            .buffer_unordered(concurrency.max(1));
        while let Some(subscribed) = subscribing.next().await {
            let (client, mut stream) = subscribed?;
            connected.fetch_add(1, Ordering::Relaxed);
            let receipts = Arc::clone(receipts);
            let errors = Arc::clone(&stream_errors);
            tasks.spawn(async move {
                let _connection = client;
                loop {
                    match stream.message().await {
                        Ok(Some(e)) if e.r#type == HEARTBEAT => {}
                        Ok(Some(e)) => {
                            if let Some((id, version)) = wire::resource_key(&e) {
                                receipts.received(id, version, Instant::now());
                            }
                        }
                        Ok(None) => break,
                        Err(_) => {
                            errors.fetch_add(1, Ordering::Relaxed);
                            break;
                        }
                    }
                }
            });
        }
        Ok(Self { tasks, stream_errors })
    }

    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }
}
