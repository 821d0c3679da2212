//! `conductor agent`: an OCM agent in a terminal, on the client conductor-load uses
//! (`conductor-client`). It subscribes as a managed cluster's agent does and prints what it gets
//! (`watch`), publishes the status update a work agent would (`status`), and sends a CloudEvent
//! written as JSON (`publish`).
//!
//! - [`cli`]: the command line;
//! - `connect`: the connection its flags describe (plaintext, TLS, client certificate, token);
//! - [`json`]: the CloudEvents JSON format, read (with the attributes' spelling checked) and
//!   written;
//! - `convert`: events to and from the client's wire messages, through the host's codec;
//! - `print`: one line per event; `refusal`: a refused call, as its code and message;
//! - `watch`, `status`, `publish`: the commands.

pub mod cli;
mod connect;
mod convert;
pub mod json;
mod print;
mod publish;
mod refusal;
mod status;
mod watch;

use conductor_plugin_sdk::ocm::data_types;

pub use refusal::Refused;

/// Runs an agent command until it is done (`watch`: until interrupted).
pub fn run(command: cli::AgentCommand) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        match command {
            cli::AgentCommand::Watch(args) => watch::run(args).await,
            cli::AgentCommand::Status(args) => status::run(args).await,
            cli::AgentCommand::Publish(args) => publish::run(args).await,
        }
    })
}

/// The data types `--data-type` takes by a short name, as the agents subscribe to them.
pub const SHORT_NAMES: [(&str, &str); 8] = [
    ("works", data_types::MANIFEST_BUNDLES),
    ("clusters", data_types::MANAGED_CLUSTERS),
    ("csrs", data_types::CSRS),
    ("leases", data_types::LEASES),
    ("addons", data_types::ADDONS_V1ALPHA1),
    ("addons-v1beta1", data_types::ADDONS_V1BETA1),
    ("events", data_types::EVENTS),
    ("tokenrequests", data_types::TOKEN_REQUESTS),
];

/// The data type `name` stands for: a short name, or a whole data type
/// (`<group>.<version>.<resource>`).
pub fn data_type(name: &str) -> Result<String, String> {
    if let Some((_, dt)) = SHORT_NAMES.iter().find(|(short, _)| *short == name) {
        return Ok((*dt).to_owned());
    }
    match conductor_plugin_sdk::ocm::DataType::parse(name) {
        Ok(_) => Ok(name.to_owned()),
        Err(e) => {
            let short: Vec<&str> = SHORT_NAMES.iter().map(|(s, _)| *s).collect();
            Err(format!(
                "{name:?} is neither a data type ({e}) nor one of {}",
                short.join(", ")
            ))
        }
    }
}

/// The client id an agent of `cluster` publishes as (`docs/protocol.md` §4.1): the work agent's
/// for works, the registration agent's (the cluster's name) for the others.
pub fn default_source(cluster: &str, data_type: &str) -> String {
    if data_type == data_types::MANIFEST_BUNDLES {
        format!("{cluster}-work-agent")
    } else {
        cluster.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_types_by_short_or_whole_name() {
        assert_eq!(data_type("works").unwrap(), data_types::MANIFEST_BUNDLES);
        assert_eq!(data_type(data_types::LEASES).unwrap(), data_types::LEASES);
        assert!(data_type("work").unwrap_err().contains("works, clusters"));
        assert_eq!(default_source("c1", data_types::MANIFEST_BUNDLES), "c1-work-agent");
        assert_eq!(default_source("c1", data_types::LEASES), "c1");
    }
}
