//! `conductor agent publish FILE`: send the CloudEvent a JSON file holds.

use anyhow::{Context, Result};
use conductor_client::proto::PublishRequest;
use conductor_plugin_sdk::ocm::OcmExtensions;

use super::cli::PublishArgs;
use super::{Refused, connect, convert, json};

pub async fn run(args: PublishArgs) -> Result<()> {
    let path = args.file.display().to_string();
    let text = std::fs::read_to_string(&args.file).with_context(|| format!("cannot read {path}"))?;
    let value: serde_json::Value = serde_json::from_str(&text).with_context(|| format!("{path} is not JSON"))?;
    let event = json::from_json(&value).with_context(|| format!("{path}: not an OCM CloudEvent, nothing sent"))?;
    let cluster = event.cluster_name().unwrap_or_default().to_owned();
    let target = connect::target(&args.server, "")?;
    let mut connection = connect::open(&target, &cluster).await?;
    let request = connection.request(PublishRequest {
        event: Some(convert::to_wire(&event)?),
    });
    connection
        .client
        .publish(request)
        .await
        .map_err(|s| Refused::new(format!("publishing {path}"), &s))?;
    println!("published {} ({}) for cluster {cluster}", event.id, event.ty);
    Ok(())
}
