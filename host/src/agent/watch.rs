//! `conductor agent watch`: subscribe as an agent does, resync, print what arrives, and when the
//! stream ends or fails, wait, subscribe and resync again (`docs/protocol.md` §4.5).

use std::collections::BTreeMap;
use std::io::Write as _;
use std::time::Duration;

use anyhow::{Context, Result};
use conductor_client::connect::{Connection, Target};
use conductor_client::proto::{PublishRequest, SubscriptionRequest};
use conductor_client::{HEARTBEAT, events};
use conductor_plugin_sdk::ocm::{OcmExtensions, data_types};

use super::cli::{Output, WatchArgs};
use super::{Refused, connect, convert, json, print};

const FIRST_WAIT: Duration = Duration::from_secs(1);
const LONGEST_WAIT: Duration = Duration::from_secs(60);

/// What the agent holds: resource id → version, reported in each resync request.
type Held = BTreeMap<String, i64>;

pub async fn run(args: WatchArgs) -> Result<()> {
    let data_type = super::data_type(&args.data_type).map_err(|e| anyhow::anyhow!("--data-type {e}"))?;
    let source = args
        .source
        .clone()
        .unwrap_or_else(|| super::default_source(&args.cluster, &data_type));
    let target = connect::target(&args.server, &data_type)?;
    let mut held = Held::new();
    let mut wait = FIRST_WAIT;
    loop {
        let ended = session(&args, &target, &data_type, &source, &mut held, &mut wait).await;
        let why = match ended {
            Ok(()) => "the server ended the stream".to_owned(),
            Err(e) => format!("{e:#}"),
        };
        eprintln!(
            "agent: {why}; subscribing again in {}",
            humantime::format_duration(wait)
        );
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(LONGEST_WAIT);
    }
}

/// One connection: subscribe, resync, print until the stream ends (`Ok`) or fails.
async fn session(
    args: &WatchArgs,
    target: &Target,
    data_type: &str,
    source: &str,
    held: &mut Held,
    wait: &mut Duration,
) -> Result<()> {
    let mut connection = connect::open(target, &args.cluster).await?;
    let request = connection.request(SubscriptionRequest {
        source: String::new(),
        cluster_name: args.cluster.clone(),
        data_type: data_type.to_owned(),
    });
    let response = connection
        .client
        .subscribe(request)
        .await
        .map_err(|s| Refused::new(format!("subscribe to {data_type} of cluster {}", args.cluster), &s))?;
    let id = response
        .metadata()
        .get("subscription-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("none")
        .to_owned();
    let mut stream = response.into_inner();
    *wait = FIRST_WAIT;
    eprintln!(
        "agent: subscribed to {data_type} of cluster {} at {} (subscription-id {id})",
        args.cluster, target.server
    );
    // Agents resync every data type but events and token requests, which are not kept.
    if data_type != data_types::EVENTS && data_type != data_types::TOKEN_REQUESTS {
        resync(&mut connection, data_type, &args.cluster, source, held).await?;
    }
    let mut stdout = std::io::stdout();
    while let Some(message) = stream.message().await.map_err(|s| Refused::new("the stream", &s))? {
        if message.r#type == HEARTBEAT {
            continue;
        }
        let event = match convert::from_wire(&message) {
            Ok(event) => event,
            Err(e) => {
                eprintln!("agent: an event {} of type {} dropped: {e}", message.id, message.r#type);
                continue;
            }
        };
        if let (Ok(id), Ok(version)) = (event.resource_id(), event.resource_version()) {
            if event.deletion_timestamp().is_some() {
                held.remove(id);
            } else {
                held.insert(id.to_owned(), version);
            }
        }
        let text = match args.output {
            Output::Line => print::line(&event, chrono::Utc::now()),
            Output::Json => json::to_json(&event).to_string(),
        };
        writeln!(stdout, "{text}").context("stdout")?;
        stdout.flush().context("stdout")?;
    }
    Ok(())
}

/// Publishes the spec resync request with the versions of what the agent holds.
async fn resync(connection: &mut Connection, data_type: &str, cluster: &str, source: &str, held: &Held) -> Result<()> {
    let versions: Vec<(String, i64)> = held.iter().map(|(id, v)| (id.clone(), *v)).collect();
    let event = events::resync_request(data_type, cluster, source, &versions);
    let request = connection.request(PublishRequest { event: Some(event) });
    connection
        .client
        .publish(request)
        .await
        .map_err(|s| Refused::new("the resync request", &s))?;
    eprintln!("agent: resync requested ({} resources held)", versions.len());
    Ok(())
}
