//! The connection the flags describe, made with conductor-load's connection code.

use std::sync::Arc;

use conductor_client::connect::{ConnectError, Connection, Credentials, PerCluster, Target, Tls, Token};

use super::cli::ServerArgs;

/// The server's URL: a bare HOST:PORT is `https://` with a CA to check it against, else `http://`.
fn url(args: &ServerArgs) -> String {
    if args.server.contains("://") {
        args.server.clone()
    } else if args.ca_file.is_some() {
        format!("https://{}", args.server)
    } else {
        format!("http://{}", args.server)
    }
}

fn file(path: &std::path::Path) -> PerCluster {
    PerCluster(path.display().to_string())
}

/// Where and how to connect, for the agent of `cluster` subscribing to `data_type`.
pub fn target(args: &ServerArgs, data_type: &str) -> Result<Target, ConnectError> {
    let tls = match &args.ca_file {
        Some(path) => Some(Tls {
            ca: Arc::new(std::fs::read(path).map_err(|source| ConnectError::Read {
                path: path.display().to_string(),
                source,
            })?),
            server_name: args.tls_server_name.clone(),
        }),
        None => None,
    };
    let agents = Credentials {
        client_cert: args
            .cert
            .as_deref()
            .zip(args.key.as_deref())
            .map(|(c, k)| (file(c), file(k))),
        token: args.token_file.as_deref().map(|t| Token::File(file(t))),
    };
    let target = Target {
        server: url(args),
        data_type: data_type.to_owned(),
        tls,
        source_addresses: Vec::new(),
        agents,
        hub: Credentials::default(),
    };
    target.validate()?;
    Ok(target)
}

/// One connection for the agent of `cluster`.
pub async fn open(target: &Target, cluster: &str) -> Result<Connection, ConnectError> {
    Connection::open(target, &target.agents, Some(cluster), 0).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(server: &str) -> ServerArgs {
        ServerArgs {
            server: server.into(),
            ca_file: None,
            tls_server_name: None,
            cert: None,
            key: None,
            token_file: None,
        }
    }

    #[test]
    fn a_bare_address_is_plaintext_without_a_ca() {
        assert_eq!(url(&args("127.0.0.1:8090")), "http://127.0.0.1:8090");
        assert_eq!(url(&args("https://hub:8090")), "https://hub:8090");
        let mut tls = args("hub:8090");
        tls.ca_file = Some("/nonexistent/ca.crt".into());
        assert_eq!(url(&tls), "https://hub:8090");
        let err = target(&tls, "a.v1.b").unwrap_err().to_string();
        assert!(err.contains("/nonexistent/ca.crt"), "{err}");
        assert!(target(&args("ftp://x"), "a.v1.b").is_err());
    }
}
