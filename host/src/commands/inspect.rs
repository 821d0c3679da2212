//! `conductor inspect …`: what a running conductor's admin endpoint says of its subscribers,
//! plugins, routes and undelivered work, as tables for people or JSON for scripts.

use clap::{Subcommand, ValueEnum};

use super::{Admin, runtime};
use crate::admin::views;
use crate::admin_client::{client, table};

// What `conductor inspect` looks at; each variant's doc comment is its help.
#[derive(Subcommand, Clone)]
pub enum InspectWhat {
    /// Live Subscribe streams: cluster, data type, user, remote address, age, events sent, queue.
    Subscribers,
    /// Plugins: form, version, grants, sources, data types, instances, calls, errors, call
    /// latency, last error, when loaded; for one pulled from a registry, its `oci://…@sha256:…`
    /// reference and its component's digest.
    Plugins,
    /// One plugin: its row of `inspect plugins`, its waiting host events by lane (the deepest 20), then every key it keeps in `kv` with its value.
    Plugin {
        /// The plugin's name in `conductor.toml`.
        name: String,
    },
    /// Source → plugin routes, and the last reload's outcome.
    Routes,
    /// Work its agent did not answer with a status within `broker.undelivered_after` while
    /// connected: plugin, cluster, resource id and version, when sent, and when sent again (once).
    Undelivered,
}

// How `conductor inspect` prints what it read.
#[derive(Clone, Copy, ValueEnum)]
pub enum Output {
    Table,
    Json,
}

/// `conductor inspect WHAT`.
pub fn inspect(what: InspectWhat, admin: &Admin, output: Output) -> anyhow::Result<()> {
    let admin = admin.endpoint();
    let path = match &what {
        InspectWhat::Subscribers => "/inspect/subscribers".to_owned(),
        InspectWhat::Plugins => "/inspect/plugins".to_owned(),
        InspectWhat::Plugin { name } => format!("/inspect/plugins/{}", client::path_segment(name)),
        InspectWhat::Routes => "/inspect/routes".to_owned(),
        InspectWhat::Undelivered => "/inspect/undelivered".to_owned(),
    };
    let path = path.as_str();
    let body = runtime()?.block_on(client::request(&admin, hyper::Method::GET, path))?;
    let now = chrono::Utc::now();
    let bad = |e: serde_json::Error| anyhow::anyhow!("{}{path} answered something else than expected: {e}", admin.url);
    let text = match (output, what) {
        (Output::Json, _) => {
            let value: serde_json::Value = serde_json::from_str(&body).map_err(bad)?;
            serde_json::to_string_pretty(&value)? + "\n"
        }
        (Output::Table, InspectWhat::Subscribers) => {
            let subscribers: Vec<views::Subscriber> = serde_json::from_str(&body).map_err(bad)?;
            table::subscribers(&subscribers, now)
        }
        (Output::Table, InspectWhat::Plugins) => {
            let plugins: Vec<views::Plugin> = serde_json::from_str(&body).map_err(bad)?;
            table::plugins(&plugins, now)
        }
        (Output::Table, InspectWhat::Plugin { .. }) => {
            table::plugin_detail(&serde_json::from_str(&body).map_err(bad)?, now)
        }
        (Output::Table, InspectWhat::Routes) => table::routes(&serde_json::from_str(&body).map_err(bad)?, now),
        (Output::Table, InspectWhat::Undelivered) => {
            let works: Vec<views::Undelivered> = serde_json::from_str(&body).map_err(bad)?;
            table::undelivered(&works, now)
        }
    };
    print!("{text}");
    Ok(())
}
