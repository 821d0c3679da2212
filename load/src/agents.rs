//! Simulated agents: each on its own TCP connection and HTTP/2 session (as every klusterlet
//! has), subscribed for its cluster, recording every spec event it receives.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use anyhow::{Context, Result};
use futures::StreamExt;
use tokio::task::JoinSet;

use crate::connect::{Connection, Target};
use crate::proto::SubscriptionRequest;
use crate::receipts::Receipts;
use crate::{HEARTBEAT, wire};

/// The connected agents; dropping them closes every stream.
pub struct Agents {
    tasks: JoinSet<()>,
    /// Streams that ended with an error.
    pub stream_errors: Arc<AtomicU64>,
}

impl Agents {
    /// Connects an agent for each of `clusters`, `concurrency` connections at a time, each
    /// subscribed once its stream's response header has arrived;
    /// `first` is the number of the first agent among all (it picks the source address).
    pub async fn connect(
        target: &Target,
        clusters: &[String],
        first: usize,
        concurrency: usize,
        receipts: &Arc<Receipts>,
        connected: &AtomicU64,
    ) -> Result<Self> {
        let stream_errors = Arc::new(AtomicU64::new(0));
        let mut tasks = JoinSet::new();
        let mut subscribing = futures::stream::iter(clusters.iter().enumerate())
            .map(|(index, cluster)| async move {
                let mut connection = Connection::open(target, &target.agents, Some(cluster), first + index).await?;
                let subscription = SubscriptionRequest {
                    source: String::new(),
                    cluster_name: cluster.clone(),
                    data_type: target.data_type.clone(),
                };
                let request = connection.request(subscription);
                let stream = connection
                    .client
                    .subscribe(request)
                    .await
                    .with_context(|| format!("subscribe for cluster {cluster}"))?
                    .into_inner();
                anyhow::Ok((connection, stream))
            })
            .buffer_unordered(concurrency.max(1));
        while let Some(subscribed) = subscribing.next().await {
            let (connection, mut stream) = subscribed?;
            connected.fetch_add(1, Ordering::Relaxed);
            let receipts = Arc::clone(receipts);
            let errors = Arc::clone(&stream_errors);
            tasks.spawn(async move {
                let _connection = connection;
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
