//! `conductor agent status`: the status update a work agent publishes for a work
//! (`docs/protocol.md` §8.5). The work is found as the agent knows it: subscribed and resynced, it
//! is among the spec events the server sends for the cluster.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use conductor_client::connect::Connection;
use conductor_client::proto::{PublishRequest, SubscriptionRequest};
use conductor_client::{HEARTBEAT, events};
use conductor_plugin_sdk::CloudEvent;
use conductor_plugin_sdk::ocm::{DataType, OcmExtensions, SubResource, actions, data_types, extensions};
use serde_json::{Value, json};

use super::cli::StatusArgs;
use super::{Refused, connect, convert, print};

/// Once the resync request is answered its answers are already queued: the first quiet spell
/// after it ends them.
const QUIET: Duration = Duration::from_millis(500);
const AT_MOST: Duration = Duration::from_secs(10);

/// A work as the agent received it.
#[derive(Debug, Clone)]
struct Work {
    uid: String,
    name: Option<String>,
    version: i64,
    /// The source of its spec event, which the status echoes as `originalsource`.
    source: String,
    metadata: Option<String>,
}

pub async fn run(args: StatusArgs) -> Result<()> {
    let conditions = args
        .conditions
        .iter()
        .map(|c| condition(c))
        .collect::<Result<Vec<Value>>>()?;
    let data_type = data_types::MANIFEST_BUNDLES;
    let source = args
        .source
        .clone()
        .unwrap_or_else(|| super::default_source(&args.cluster, data_type));
    let target = connect::target(&args.server, data_type)?;
    let mut connection = connect::open(&target, &args.cluster).await?;
    let works = works(&mut connection, &args.cluster, &source).await?;
    let work = find(&works, &args.work, &args.cluster)?;
    let event = status_event(&args.cluster, &source, &work, &conditions)?;
    let request = connection.request(PublishRequest {
        event: Some(convert::to_wire(&event)?),
    });
    connection.client.publish(request).await.map_err(|s| {
        Refused::new(
            format!(
                "the status of work {} (uid {})",
                work.name.as_deref().unwrap_or("-"),
                work.uid
            ),
            &s,
        )
    })?;
    println!(
        "published the status of work {} (uid {}, version {}) to source {}: {}",
        work.name.as_deref().unwrap_or("-"),
        work.uid,
        work.version,
        work.source,
        summary(&conditions)
    );
    Ok(())
}

/// `Applied=True` → a condition as the work agent reports it.
fn condition(text: &str) -> Result<Value> {
    let Some((kind, status)) = text.split_once('=') else {
        bail!("--condition {text}: write TYPE=STATUS, as Applied=True");
    };
    let status = match status.to_ascii_lowercase().as_str() {
        "true" => "True",
        "false" => "False",
        "unknown" => "Unknown",
        _ => bail!("--condition {text}: the status is True, False or Unknown"),
    };
    if kind.is_empty() || !kind.bytes().all(|b| b.is_ascii_alphanumeric()) {
        bail!("--condition {text}: the type is a word, as Applied, Available or Deleted");
    }
    Ok(json!({
        "type": kind,
        "status": status,
        "reason": "ReportedByConductorAgent",
        "message": format!("{kind} is {status}, as reported by conductor agent status"),
        "lastTransitionTime": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    }))
}

fn summary(conditions: &[Value]) -> String {
    if conditions.is_empty() {
        return "no conditions".to_owned();
    }
    let each: Vec<String> = conditions
        .iter()
        .map(|c| {
            format!(
                "{}={}",
                c["type"].as_str().unwrap_or("?"),
                c["status"].as_str().unwrap_or("?")
            )
        })
        .collect();
    each.join(", ")
}

/// The works the server sends `cluster`'s work agent on a resync from nothing.
async fn works(connection: &mut Connection, cluster: &str, source: &str) -> Result<Vec<Work>> {
    let data_type = data_types::MANIFEST_BUNDLES;
    let request = connection.request(SubscriptionRequest {
        source: String::new(),
        cluster_name: cluster.to_owned(),
        data_type: data_type.to_owned(),
    });
    let mut stream = connection
        .client
        .subscribe(request)
        .await
        .map_err(|s| Refused::new(format!("subscribe to the works of cluster {cluster}"), &s))?
        .into_inner();
    let resync = connection.request(PublishRequest {
        event: Some(events::resync_request(data_type, cluster, source, &[])),
    });
    connection
        .client
        .publish(resync)
        .await
        .map_err(|s| Refused::new("the resync request", &s))?;
    let mut works: Vec<Work> = Vec::new();
    let deadline = Instant::now() + AT_MOST;
    while Instant::now() < deadline {
        let message = match tokio::time::timeout(QUIET, stream.message()).await {
            Err(_) => break,
            Ok(message) => message.map_err(|s| Refused::new("the stream", &s))?,
        };
        let Some(message) = message else { break };
        if message.r#type == HEARTBEAT {
            continue;
        }
        let Ok(event) = convert::from_wire(&message) else {
            continue;
        };
        let (Ok(uid), Ok(version)) = (event.resource_id(), event.resource_version()) else {
            continue;
        };
        let work = Work {
            uid: uid.to_owned(),
            name: print::name(&event),
            version,
            source: event.source.clone(),
            metadata: event.metadata_json().map(str::to_owned),
        };
        // A work being deleted is still the agent's, until it reports `Deleted=True`.
        works.retain(|w| w.uid != work.uid);
        works.push(work);
    }
    Ok(works)
}

/// The work named or identified by `wanted`.
fn find(works: &[Work], wanted: &str, cluster: &str) -> Result<Work> {
    if let Some(work) = works.iter().find(|w| w.uid == wanted) {
        return Ok(work.clone());
    }
    let named: Vec<&Work> = works.iter().filter(|w| w.name.as_deref() == Some(wanted)).collect();
    match named.as_slice() {
        [work] => Ok((*work).clone()),
        [] => {
            let known: Vec<String> = works
                .iter()
                .map(|w| format!("{} ({})", w.name.as_deref().unwrap_or("-"), w.uid))
                .collect();
            if known.is_empty() {
                bail!("cluster {cluster} has no work named or with the UID {wanted:?}: it is served no work");
            }
            bail!(
                "cluster {cluster} has no work named or with the UID {wanted:?}; it has {}",
                known.join(", ")
            )
        }
        several => {
            let uids: Vec<&str> = several.iter().map(|w| w.uid.as_str()).collect();
            bail!(
                "cluster {cluster} has {} works named {wanted:?} (from several sources): give one UID of {}",
                several.len(),
                uids.join(", ")
            )
        }
    }
}

/// The work agent's `status.update_request` for `work` (`docs/protocol.md` §2.7, §8.5).
fn status_event(cluster: &str, source: &str, work: &Work, conditions: &[Value]) -> Result<CloudEvent> {
    let data_type = DataType::parse(data_types::MANIFEST_BUNDLES).context("the works' data type")?;
    let mut event = CloudEvent::new(
        uuid::Uuid::new_v4().to_string(),
        source,
        data_type.event_type(SubResource::Status, actions::UPDATE_REQUEST),
    );
    event.time = Some(chrono::Utc::now());
    event.set_extension(extensions::CLUSTER_NAME, cluster);
    event.set_extension(extensions::ORIGINAL_SOURCE, work.source.as_str());
    event.set_extension(extensions::RESOURCE_ID, work.uid.as_str());
    event.set_resource_version(&data_type, work.version);
    event.set_extension(extensions::SEQUENCE_ID, sequence_id().to_string());
    let metadata = work.metadata.clone().unwrap_or_else(|| {
        json!({"name": work.name.as_deref().unwrap_or(&work.uid), "namespace": cluster, "uid": work.uid}).to_string()
    });
    event.set_extension(extensions::METADATA, metadata);
    event.set_extension(extensions::LOG_TRACING, "{}");
    let status = json!({ "conditions": conditions, "resourceStatus": [] });
    event.set_extension(extensions::STATUS_HASH, status_hash(&status));
    event.set_json_data(&status).context("the status")?;
    Ok(event)
}

/// The hex SHA-256 of the status, as the work agent's `statushash`.
fn status_hash(status: &Value) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, status.to_string().as_bytes());
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// A snowflake id, as the work agent numbers its status updates: milliseconds since the
/// snowflake epoch, then 22 random bits (node and sequence).
fn sequence_id() -> i64 {
    const EPOCH_MS: i64 = 1_288_834_974_657;
    let millis = chrono::Utc::now().timestamp_millis() - EPOCH_MS;
    let random = (uuid::Uuid::new_v4().as_u128() & 0x3f_ffff) as i64;
    (millis << 22) | random
}

#[cfg(test)]
mod tests {
    use super::*;

    fn work(uid: &str, name: &str) -> Work {
        Work {
            uid: uid.into(),
            name: Some(name.into()),
            version: 2,
            source: "memory".into(),
            metadata: None,
        }
    }

    #[test]
    fn a_work_is_found_by_name_or_uid() {
        let works = [work("u1", "hello"), work("u2", "other")];
        assert_eq!(find(&works, "hello", "c1").unwrap().uid, "u1");
        assert_eq!(find(&works, "u2", "c1").unwrap().uid, "u2");
        let err = find(&works, "nope", "c1").unwrap_err().to_string();
        assert!(err.contains("hello (u1)"), "{err}");
    }

    #[test]
    fn the_status_carries_what_a_work_agent_sets() {
        let conditions = vec![condition("Applied=true").unwrap()];
        let e = status_event("c1", "c1-work-agent", &work("u1", "hello"), &conditions).unwrap();
        assert_eq!(
            e.ty,
            "io.open-cluster-management.works.v1alpha1.manifestbundles.status.update_request"
        );
        assert_eq!(e.original_source(), Some("memory"));
        assert_eq!(e.resource_id(), Ok("u1"));
        assert_eq!(
            e.extension("resourceversion"),
            Some(&conductor_plugin_sdk::ExtensionValue::Integer(2))
        );
        assert!(e.extension_i64("sequenceid").unwrap() > 0);
        assert_eq!(e.extension_str("statushash").unwrap().len(), 64);
        assert_eq!(e.data_json::<Value>().unwrap()["conditions"][0]["status"], "True");
        assert!(condition("Applied").is_err() && condition("Applied=yes").is_err());
        assert!(sequence_id() > 0);
    }
}
