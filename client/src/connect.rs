//! How agents and a hub-side client reach the server: plaintext (`http://`) or TLS (`https://`,
//! trusting a given CA), each connection with the client certificate and the bearer token of
//! whoever it is for, from one of several source addresses (on loopback one source address
//! reaches one server port from ~28,000 ephemeral ports only).

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tonic::metadata::{Ascii, MetadataValue};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

use crate::proto::cloud_event_service_client::CloudEventServiceClient;

/// Why a connection could not be set up or made.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("{0} names a file per cluster, and this connection has none")]
    NoCluster(String),
    #[error("cannot read {path}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the token file is not UTF-8")]
    TokenNotUtf8,
    #[error("the token is not valid gRPC metadata (a bearer token is printable ASCII)")]
    TokenNotMetadata,
    #[error("{0}")]
    Settings(String),
    #[error("bad server address {0:?}")]
    Address(String, #[source] tonic::transport::Error),
    #[error("the TLS settings")]
    Tls(#[source] tonic::transport::Error),
    #[error("cannot connect to {0}")]
    Connect(String, #[source] tonic::transport::Error),
}

type Result<T> = std::result::Result<T, ConnectError>;

/// What `{cluster}` stands for in a [`PerCluster`] path.
pub const CLUSTER: &str = "{cluster}";

/// A file for everyone, or one per agent: `{cluster}` in it is replaced by the agent's cluster
/// name (`certs/{cluster}.crt`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PerCluster(pub String);

impl PerCluster {
    /// Whether each agent has a file of its own.
    pub fn per_agent(&self) -> bool {
        self.0.contains(CLUSTER)
    }

    /// The file for `cluster`; a per-agent path needs one.
    fn path(&self, cluster: Option<&str>) -> Result<PathBuf> {
        match (self.per_agent(), cluster) {
            (false, _) => Ok(PathBuf::from(&self.0)),
            (true, Some(cluster)) => Ok(PathBuf::from(self.0.replace(CLUSTER, cluster))),
            (true, None) => Err(ConnectError::NoCluster(self.0.clone())),
        }
    }

    fn read(&self, cluster: Option<&str>) -> Result<Vec<u8>> {
        let path = self.path(cluster)?;
        std::fs::read(&path).map_err(|source| ConnectError::Read {
            path: path.display().to_string(),
            source,
        })
    }
}

/// A bearer token, given or read from a file (one per agent with `{cluster}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Token {
    Value(String),
    File(PerCluster),
}

/// Who a connection is: its client certificate and key, its bearer token.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Credentials {
    pub client_cert: Option<(PerCluster, PerCluster)>,
    pub token: Option<Token>,
}

impl Credentials {
    /// Whether any of them names a file per agent (then another connection than an agent's, the
    /// hub's, cannot use them).
    pub fn per_agent(&self) -> bool {
        let cert = self
            .client_cert
            .as_ref()
            .is_some_and(|(c, k)| c.per_agent() || k.per_agent());
        let token = matches!(&self.token, Some(Token::File(f)) if f.per_agent());
        cert || token
    }

    fn bearer(&self, cluster: Option<&str>) -> Result<Option<MetadataValue<Ascii>>> {
        let token = match &self.token {
            None => return Ok(None),
            Some(Token::Value(token)) => token.clone(),
            Some(Token::File(file)) => String::from_utf8(file.read(cluster)?)
                .map_err(|_| ConnectError::TokenNotUtf8)?
                .trim()
                .to_owned(),
        };
        let value = format!("Bearer {token}")
            .parse()
            .map_err(|_| ConnectError::TokenNotMetadata)?;
        Ok(Some(value))
    }
}

/// TLS towards the server.
#[derive(Debug, Clone)]
pub struct Tls {
    /// The CA certificates (PEM) the server's certificate is checked against.
    pub ca: Arc<Vec<u8>>,
    /// The name the server's certificate is checked for (default: the URL's host).
    pub server_name: Option<String>,
}

/// How agents reach the server.
#[derive(Debug, Clone)]
pub struct Target {
    /// `http://host:port` or `https://host:port`.
    pub server: String,
    pub data_type: String,
    /// Required for an `https://` server, refused for an `http://` one.
    pub tls: Option<Tls>,
    /// Connection `i` leaves from `source_addresses[i % len]` (none: the system chooses).
    pub source_addresses: Vec<IpAddr>,
    /// The agents' credentials.
    pub agents: Credentials,
    /// The memory hub's.
    pub hub: Credentials,
}

impl Target {
    /// Checks that the scheme and the TLS settings agree, and that the hub's credentials are
    /// its own.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(ConnectError::Settings(m));
        let https = self.server.starts_with("https://");
        if !https && !self.server.starts_with("http://") {
            return bad(format!("--server {}: must start with http:// or https://", self.server));
        }
        match (https, &self.tls) {
            (true, None) => return bad(format!("--server {} is https: --ca-file is needed", self.server)),
            (false, Some(_)) => {
                return bad(format!(
                    "--ca-file, --tls-server-name or a client certificate given for {}, which is not https",
                    self.server
                ));
            }
            _ => {}
        }
        if !https && self.agents.client_cert.is_some() {
            return bad("a client certificate needs an https:// server".to_owned());
        }
        if self.hub.per_agent() {
            return bad("the hub's credentials cannot name a file per cluster".to_owned());
        }
        Ok(())
    }
}

/// A connection of its own to the server, and the bearer token its calls carry.
pub struct Connection {
    pub client: CloudEventServiceClient<Channel>,
    bearer: Option<MetadataValue<Ascii>>,
}

impl Connection {
    /// Connects for the agent of `cluster` (or the hub, with none) with `credentials`, the
    /// `index`-th connection (which picks its source address).
    pub async fn open(target: &Target, credentials: &Credentials, cluster: Option<&str>, index: usize) -> Result<Self> {
        let mut endpoint = Endpoint::from_shared(target.server.clone())
            .map_err(|e| ConnectError::Address(target.server.clone(), e))?
            .tcp_nodelay(true)
            .connect_timeout(Duration::from_secs(30));
        if let Some(tls) = &target.tls {
            let mut config = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(tls.ca.as_slice()));
            if let Some(name) = &tls.server_name {
                config = config.domain_name(name);
            }
            if let Some((cert, key)) = &credentials.client_cert {
                config = config.identity(Identity::from_pem(cert.read(cluster)?, key.read(cluster)?));
            }
            endpoint = endpoint.tls_config(config).map_err(ConnectError::Tls)?;
        }
        if !target.source_addresses.is_empty() {
            let from = target.source_addresses[index % target.source_addresses.len()];
            endpoint = endpoint.local_address(Some(from));
        }
        let bearer = credentials.bearer(cluster)?;
        let channel = endpoint
            .connect()
            .await
            .map_err(|e| ConnectError::Connect(target.server.clone(), e))?;
        Ok(Self {
            client: CloudEventServiceClient::new(channel).max_decoding_message_size(64 << 20),
            bearer,
        })
    }

    /// `message` with the connection's bearer token, if any.
    pub fn request<T>(&self, message: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        if let Some(bearer) = &self.bearer {
            request.metadata_mut().insert("authorization", bearer.clone());
        }
        request
    }
}
