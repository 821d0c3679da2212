//! The file `--server-config` names, in either of its two formats, told apart by their keys:
//!
//! - OCM's (sdk-go's `GRPCServerOptions`): flat, `tls_cert_file: …`, `server_bind_port: …`;
//! - the Go conductor's: `grpc_config:` holding the same keys, and `db_config:` holding Maestro's
//!   database settings (the lower-cased names of Maestro's `DatabaseConfig` fields).
//!
//! Values are read as Go's YAML decoder reads them (a duration as `"30s"` or as nanoseconds, a TLS
//! version as `771` or `"VersionTLS12"`); a value of the wrong kind is an error naming the file
//! and the key. Keys conductor has no use for are listed in [`ServerConfigFile::ignored`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

use super::go::{self, TlsVersionValue};
use crate::config::ConfigError;

/// What the file says. Every field is `None` where the file is silent (OCM's default applies).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GrpcOptions {
    pub tls_cert_file: Option<PathBuf>,
    pub tls_key_file: Option<PathBuf>,
    pub client_ca_file: Option<PathBuf>,
    pub tls_min_version: Option<TlsVersionValue>,
    pub tls_max_version: Option<TlsVersionValue>,
    pub cipher_suites: Option<Vec<String>>,
    pub cert_watch_interval: Option<Duration>,
    pub server_bind_port: Option<u16>,
    pub max_concurrent_streams: Option<u32>,
    pub max_receive_message_size: Option<u64>,
    pub max_send_message_size: Option<u64>,
    pub connection_timeout: Option<Duration>,
    pub client_min_ping_interval: Option<Duration>,
    pub server_ping_interval: Option<Duration>,
    pub server_ping_timeout: Option<Duration>,
}

/// Maestro's database, as the Go conductor's `db_config` gives it.
#[derive(Debug, Clone, PartialEq)]
pub struct DbOptions {
    pub host: String,
    pub port: u16,
    pub name: String,
    pub username: String,
    pub password: String,
    /// libpq's `sslmode`.
    pub sslmode: String,
    pub root_cert_file: Option<PathBuf>,
    pub max_open_connections: Option<u32>,
}

/// The file's two formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// OCM's: the gRPC keys at the top.
    Flat,
    /// The Go conductor's: `grpc_config` and `db_config`.
    Nested,
}

/// The file, read.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfigFile {
    pub format: Format,
    pub grpc: GrpcOptions,
    pub db: Option<DbOptions>,
    /// Keys given that conductor does not use: the dotted key and why.
    pub ignored: Vec<(String, &'static str)>,
}

/// The gRPC keys conductor reads no value from, and why.
const IGNORED_GRPC_KEYS: [(&str, &str); 4] = [
    (
        "write_buffer_size",
        "conductor sizes its connection buffers itself, small while idle",
    ),
    (
        "read_buffer_size",
        "conductor sizes its connection buffers itself, small while idle",
    ),
    (
        "max_connection_age",
        "conductor keeps an agent's connection as long as it is alive; agents resync whenever they reconnect",
    ),
    (
        "permit_ping_without_stream",
        "conductor allows a ping without an open stream once in two hours, as grpc-go does when this is false; agents always hold a stream",
    ),
];

/// The `db_config` keys conductor reads no value from, and why.
const IGNORED_DB_KEYS: [(&str, &str); 2] = [
    ("debug", "conductor logs its statements at log level debug"),
    ("tokenrequestscope", "conductor connects with a password"),
];

impl ServerConfigFile {
    /// Reads `path`; `None` when there is no such file (OCM then runs on its defaults).
    pub fn read(path: &Path) -> Result<Option<Self>, ConfigError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Self::parse(path, &text).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(error(path, "", format!("cannot read: {e}"))),
        }
    }

    /// Parses the text of the file at `path`.
    pub fn parse(path: &Path, text: &str) -> Result<Self, ConfigError> {
        let top = if text.trim().is_empty() {
            Map::new()
        } else {
            // Booleans only as YAML 1.2 spells them: a host or a database named `n` or `on` is
            // a string, as Go reads it into a string field.
            let options = serde_saphyr::options! { strict_booleans: true };
            match serde_saphyr::from_str_with_options::<Value>(text, options) {
                Ok(Value::Object(map)) => map,
                Ok(Value::Null) => Map::new(),
                Ok(other) => return Err(error(path, "", format!("not a YAML mapping: {other}"))),
                Err(e) => return Err(error(path, "", format!("not YAML: {e}"))),
            }
        };
        let mut file = Self {
            format: Format::Flat,
            grpc: GrpcOptions::default(),
            db: None,
            ignored: Vec::new(),
        };
        let reader = Reader { path };
        if top.contains_key("grpc_config") || top.contains_key("db_config") {
            file.format = Format::Nested;
            for (key, value) in &top {
                match key.as_str() {
                    "grpc_config" => {
                        let grpc = reader.mapping(key, value)?;
                        file.grpc = reader.grpc(&grpc, "grpc_config.", &mut file.ignored)?;
                    }
                    "db_config" => {
                        let db = reader.mapping(key, value)?;
                        file.db = Some(reader.db(&db, &mut file.ignored)?);
                    }
                    _ => file
                        .ignored
                        .push((key.clone(), "not a key of the Go conductor's configuration")),
                }
            }
        } else {
            file.grpc = reader.grpc(&top, "", &mut file.ignored)?;
        }
        Ok(file)
    }
}

fn error(path: &Path, key: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError {
        file: path.to_owned(),
        key: key.to_owned(),
        reason: reason.into(),
    }
}

/// Reads values as Go's YAML decoder would, each error naming the file and the key.
struct Reader<'a> {
    path: &'a Path,
}

impl Reader<'_> {
    fn fail<T>(&self, key: &str, reason: impl Into<String>) -> Result<T, ConfigError> {
        Err(error(self.path, key, reason))
    }

    fn mapping(&self, key: &str, value: &Value) -> Result<Map<String, Value>, ConfigError> {
        match value {
            Value::Object(map) => Ok(map.clone()),
            Value::Null => Ok(Map::new()),
            other => self.fail(key, format!("must be a mapping, not {other}")),
        }
    }

    fn string(&self, key: &str, value: &Value) -> Result<String, ConfigError> {
        match value {
            Value::String(s) => Ok(s.clone()),
            Value::Number(n) => Ok(n.to_string()),
            Value::Bool(b) => Ok(b.to_string()),
            other => self.fail(key, format!("must be a string, not {other}")),
        }
    }

    /// A non-negative integer, written as a number or a string of digits.
    fn integer(&self, key: &str, value: &Value) -> Result<u64, ConfigError> {
        let parsed = match value {
            Value::Number(n) => n.as_u64(),
            Value::String(s) => s.trim().parse().ok(),
            _ => None,
        };
        match parsed {
            Some(n) => Ok(n),
            None => self.fail(key, format!("must be a non-negative integer, not {value}")),
        }
    }

    /// A boolean, in YAML 1.1's spellings too (`yes`, `off`), as Go's YAML decoder reads one.
    fn bool(&self, key: &str, value: &Value) -> Result<bool, ConfigError> {
        let parsed = match value {
            Value::Bool(b) => Some(*b),
            Value::String(s) => match s.to_ascii_lowercase().as_str() {
                "y" | "yes" | "on" => Some(true),
                "n" | "no" | "off" => Some(false),
                _ => None,
            },
            _ => None,
        };
        match parsed {
            Some(b) => Ok(b),
            None => self.fail(key, format!("must be true or false, not {value}")),
        }
    }

    /// A Go `time.Duration`: a string in Go's syntax, or an integer of nanoseconds.
    fn duration(&self, key: &str, value: &Value) -> Result<Duration, ConfigError> {
        match value {
            Value::Number(n) => match n.as_u64() {
                Some(nanos) => Ok(Duration::from_nanos(nanos)),
                None => self.fail(key, format!("{n} is not a duration")),
            },
            Value::String(s) => go::duration(s).or_else(|reason| self.fail(key, reason)),
            other => self.fail(key, format!("must be a duration such as \"30s\", not {other}")),
        }
    }

    fn tls_version(&self, key: &str, value: &Value) -> Result<TlsVersionValue, ConfigError> {
        let version = match value {
            Value::Number(n) => match n.as_u64() {
                Some(n) => TlsVersionValue::Number(n),
                None => return self.fail(key, format!("{n} is not a TLS version")),
            },
            // sdk-go's newer spelling ("TLSv1.2") too.
            Value::String(s) => TlsVersionValue::Name(match s.trim() {
                "TLSv1.0" => "VersionTLS10".to_owned(),
                "TLSv1.1" => "VersionTLS11".to_owned(),
                "TLSv1.2" | "" => "VersionTLS12".to_owned(),
                "TLSv1.3" => "VersionTLS13".to_owned(),
                other => other.to_owned(),
            }),
            other => {
                return self.fail(
                    key,
                    format!("must be a TLS version such as \"VersionTLS12\", not {other}"),
                );
            }
        };
        go::tls_version(&version).or_else(|reason| self.fail(key, reason))?;
        Ok(version)
    }

    fn narrow<T: TryFrom<u64>>(&self, key: &str, n: u64) -> Result<T, ConfigError> {
        T::try_from(n).or_else(|_| self.fail(key, format!("{n} is too large")))
    }

    fn grpc(
        &self,
        map: &Map<String, Value>,
        prefix: &str,
        ignored: &mut Vec<(String, &'static str)>,
    ) -> Result<GrpcOptions, ConfigError> {
        let mut o = GrpcOptions::default();
        for (name, value) in map {
            let key = format!("{prefix}{name}");
            let key = key.as_str();
            if value.is_null() {
                continue;
            }
            match name.as_str() {
                "tls_cert_file" => o.tls_cert_file = Some(self.string(key, value)?.into()),
                "tls_key_file" => o.tls_key_file = Some(self.string(key, value)?.into()),
                "client_ca_file" => o.client_ca_file = Some(self.string(key, value)?.into()),
                "tls_min_version" => o.tls_min_version = Some(self.tls_version(key, value)?),
                "tls_max_version" => o.tls_max_version = Some(self.tls_version(key, value)?),
                "cipher_suites" => {
                    o.cipher_suites = Some(match value {
                        Value::Array(items) => items
                            .iter()
                            .map(|item| self.string(key, item))
                            .collect::<Result<_, _>>()?,
                        other => self
                            .string(key, other)?
                            .split(',')
                            .map(|s| s.trim().to_owned())
                            .collect(),
                    })
                }
                "cert_watch_interval" => {
                    let d = self.duration(key, value)?;
                    if d < Duration::from_millis(100) {
                        return self.fail(key, "must be at least 100ms");
                    }
                    o.cert_watch_interval = Some(d);
                }
                "server_bind_port" => {
                    let port = self.integer(key, value)?;
                    o.server_bind_port = Some(self.narrow(key, port)?);
                }
                "max_concurrent_streams" => {
                    let n = self.integer(key, value)?;
                    o.max_concurrent_streams = Some(self.narrow(key, n)?);
                }
                "max_receive_message_size" => o.max_receive_message_size = Some(self.integer(key, value)?),
                "max_send_message_size" => o.max_send_message_size = Some(self.integer(key, value)?),
                "connection_timeout" => o.connection_timeout = Some(self.duration(key, value)?),
                "client_min_ping_interval" => o.client_min_ping_interval = Some(self.duration(key, value)?),
                "server_ping_interval" => o.server_ping_interval = Some(self.duration(key, value)?),
                "server_ping_timeout" => o.server_ping_timeout = Some(self.duration(key, value)?),
                "write_buffer_size" | "read_buffer_size" => {
                    self.integer(key, value)?;
                    ignored.push((key.to_owned(), why(&IGNORED_GRPC_KEYS, name)));
                }
                "max_connection_age" => {
                    self.duration(key, value)?;
                    ignored.push((key.to_owned(), why(&IGNORED_GRPC_KEYS, name)));
                }
                "permit_ping_without_stream" => {
                    self.bool(key, value)?;
                    ignored.push((key.to_owned(), why(&IGNORED_GRPC_KEYS, name)));
                }
                _ => ignored.push((key.to_owned(), "not a key of OCM's gRPC server configuration")),
            }
        }
        Ok(o)
    }

    fn db(
        &self,
        map: &Map<String, Value>,
        ignored: &mut Vec<(String, &'static str)>,
    ) -> Result<DbOptions, ConfigError> {
        let mut db = DbOptions {
            host: String::new(),
            port: 5432,
            name: String::new(),
            username: String::new(),
            password: String::new(),
            sslmode: "disable".to_owned(),
            root_cert_file: None,
            max_open_connections: None,
        };
        for (name, value) in map {
            let key = format!("db_config.{name}");
            let key = key.as_str();
            if value.is_null() {
                continue;
            }
            match name.as_str() {
                "host" => db.host = self.string(key, value)?,
                "port" => {
                    let port = self.integer(key, value)?;
                    db.port = self.narrow(key, port)?;
                }
                "name" => db.name = self.string(key, value)?,
                "username" => db.username = self.string(key, value)?,
                "password" => db.password = self.string(key, value)?,
                // Maestro reads these from mounted files.
                "hostfile" => db.host = self.file_value(key, value)?,
                "portfile" => {
                    let text = self.file_value(key, value)?;
                    db.port = text
                        .parse()
                        .or_else(|_| self.fail(key, format!("the file holds {text:?}, not a port")))?;
                }
                "namefile" => db.name = self.file_value(key, value)?,
                "usernamefile" => db.username = self.file_value(key, value)?,
                "passwordfile" => db.password = self.file_value(key, value)?,
                "sslmode" => {
                    let mode = self.string(key, value)?;
                    if !matches!(
                        mode.as_str(),
                        "disable" | "allow" | "prefer" | "require" | "verify-ca" | "verify-full"
                    ) {
                        return self.fail(key, format!("{mode:?} is not a PostgreSQL sslmode"));
                    }
                    db.sslmode = mode;
                }
                "rootcertfile" => {
                    let file = self.string(key, value)?;
                    db.root_cert_file = (!file.is_empty()).then(|| PathBuf::from(file));
                }
                "maxopenconnections" => {
                    let n = self.integer(key, value)?;
                    if n == 0 {
                        return self.fail(key, "must be at least 1");
                    }
                    db.max_open_connections = Some(self.narrow(key, n)?);
                }
                "dialect" => {
                    let dialect = self.string(key, value)?;
                    if !matches!(dialect.as_str(), "postgres" | "postgresql" | "") {
                        return self.fail(key, format!("{dialect:?}: conductor speaks to PostgreSQL only"));
                    }
                }
                "authmethod" => {
                    let method = self.string(key, value)?;
                    if !matches!(method.as_str(), "password" | "") {
                        return self.fail(
                            key,
                            format!("{method:?}: conductor connects to Maestro's database with a password"),
                        );
                    }
                }
                "debug" | "tokenrequestscope" => ignored.push((key.to_owned(), why(&IGNORED_DB_KEYS, name))),
                _ => ignored.push((key.to_owned(), "not a key of Maestro's database configuration")),
            }
        }
        for (field, value) in [("host", &db.host), ("name", &db.name), ("username", &db.username)] {
            if value.is_empty() {
                return self.fail(&format!("db_config.{field}"), "missing: Maestro's database needs it");
            }
        }
        Ok(db)
    }

    /// The contents of the file a `…file` key names, trimmed.
    fn file_value(&self, key: &str, value: &Value) -> Result<String, ConfigError> {
        let file = self.string(key, value)?;
        match std::fs::read_to_string(&file) {
            Ok(text) => Ok(text.trim().to_owned()),
            Err(e) => self.fail(key, format!("cannot read {file}: {e}")),
        }
    }
}

fn why(table: &[(&str, &'static str)], name: &str) -> &'static str {
    table
        .iter()
        .find(|(n, _)| *n == name)
        .map_or("not used", |(_, why)| *why)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ServerConfigFile, ConfigError> {
        ServerConfigFile::parse(Path::new("/cfg/config.yaml"), text)
    }

    const FLAT: &str = r#"
tls_cert_file: /certs/tls.crt
tls_key_file: /certs/tls.key
client_ca_file: /ca/ca-bundle.crt
tls_min_version: 771
tls_max_version: 772
cipher_suites: TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384
cert_watch_interval: 45s
server_bind_port: "9090"
max_concurrent_streams: 200
max_receive_message_size: 8388608
max_send_message_size: 2147483647
write_buffer_size: 32768
read_buffer_size: 32768
connection_timeout: 2m
max_connection_age: 1h
client_min_ping_interval: 5s
server_ping_interval: 30000000000
server_ping_timeout: 10s
permit_ping_without_stream: true
"#;

    #[test]
    fn every_key_of_ocms_format() {
        let f = parse(FLAT).unwrap();
        assert_eq!(f.format, Format::Flat);
        assert_eq!(f.db, None);
        let g = &f.grpc;
        assert_eq!(g.tls_cert_file, Some(PathBuf::from("/certs/tls.crt")));
        assert_eq!(g.tls_key_file, Some(PathBuf::from("/certs/tls.key")));
        assert_eq!(g.client_ca_file, Some(PathBuf::from("/ca/ca-bundle.crt")));
        assert_eq!(g.tls_min_version, Some(TlsVersionValue::Number(771)));
        assert_eq!(g.tls_max_version, Some(TlsVersionValue::Number(772)));
        assert_eq!(g.cipher_suites.as_ref().unwrap().len(), 2);
        assert_eq!(g.cert_watch_interval, Some(Duration::from_secs(45)));
        assert_eq!(g.server_bind_port, Some(9090));
        assert_eq!(g.max_concurrent_streams, Some(200));
        assert_eq!(g.max_receive_message_size, Some(8 << 20));
        assert_eq!(g.max_send_message_size, Some(2_147_483_647));
        assert_eq!(g.connection_timeout, Some(Duration::from_secs(120)));
        assert_eq!(g.client_min_ping_interval, Some(Duration::from_secs(5)));
        assert_eq!(
            g.server_ping_interval,
            Some(Duration::from_secs(30)),
            "nanoseconds, as yaml.v2 reads an integer"
        );
        assert_eq!(g.server_ping_timeout, Some(Duration::from_secs(10)));
        let ignored: Vec<&str> = f.ignored.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            ignored,
            [
                "max_connection_age",
                "permit_ping_without_stream",
                "read_buffer_size",
                "write_buffer_size"
            ],
            "in key order"
        );
    }

    #[test]
    fn newer_sdk_spellings() {
        let f = parse("tls_min_version: VersionTLS13\ntls_max_version: TLSv1.3\ncipher_suites: [TLS_AES_128_GCM_SHA256]\nserver_bind_port: 8090\n").unwrap();
        assert_eq!(
            f.grpc.tls_min_version,
            Some(TlsVersionValue::Name("VersionTLS13".into()))
        );
        assert_eq!(
            f.grpc.tls_max_version,
            Some(TlsVersionValue::Name("VersionTLS13".into()))
        );
        assert_eq!(f.grpc.cipher_suites, Some(vec!["TLS_AES_128_GCM_SHA256".to_owned()]));
        assert_eq!(f.grpc.server_bind_port, Some(8090));
    }

    #[test]
    fn empty_file_is_all_defaults() {
        for text in ["", "\n", "# nothing\n", "~\n"] {
            let f = parse(text).unwrap();
            assert_eq!((f.format, f.grpc, f.db), (Format::Flat, GrpcOptions::default(), None));
        }
    }

    #[test]
    fn the_go_conductors_nested_format() {
        let f = parse(
            "grpc_config:\n  tls_cert_file: /c/server.crt\n  server_bind_port: \"8091\"\n  surprise: 1\ndb_config:\n  host: maestro-db.maestro\n  port: 5432\n  name: maestro\n  username: maestro\n  password: p@ss word\n  sslmode: \"disable\"\n  maxopenconnections: 30\n  debug: false\n  dialect: postgres\nother: x\n",
        )
        .unwrap();
        assert_eq!(f.format, Format::Nested);
        assert_eq!(f.grpc.tls_cert_file, Some(PathBuf::from("/c/server.crt")));
        assert_eq!(f.grpc.server_bind_port, Some(8091));
        let db = f.db.unwrap();
        assert_eq!(
            (
                db.host.as_str(),
                db.port,
                db.name.as_str(),
                db.username.as_str(),
                db.password.as_str()
            ),
            ("maestro-db.maestro", 5432, "maestro", "maestro", "p@ss word")
        );
        assert_eq!((db.sslmode.as_str(), db.max_open_connections), ("disable", Some(30)));
        let ignored: Vec<&str> = f.ignored.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(ignored, ["db_config.debug", "grpc_config.surprise", "other"]);
        // YAML 1.1's booleans are strings where Go reads a string, and booleans where it reads
        // a boolean.
        let f = parse(
            "db_config:
  host: n
  name: on
  username: y
grpc_config:
  permit_ping_without_stream: yes
",
        )
        .unwrap();
        let db = f.db.unwrap();
        assert_eq!(
            (db.host.as_str(), db.name.as_str(), db.username.as_str()),
            ("n", "on", "y")
        );
    }

    #[test]
    fn db_values_from_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("db.password"), "s3cret\n").unwrap();
        std::fs::write(dir.path().join("db.port"), "6543").unwrap();
        let text = format!(
            "db_config:\n  host: h\n  name: n\n  username: u\n  passwordfile: {0}/db.password\n  portfile: {0}/db.port\n  rootcertfile: /ca.crt\n  sslmode: verify-full\n",
            dir.path().display()
        );
        let db = parse(&text).unwrap().db.unwrap();
        assert_eq!((db.password.as_str(), db.port), ("s3cret", 6543));
        assert_eq!(db.root_cert_file, Some(PathBuf::from("/ca.crt")));
        let err =
            parse("db_config:\n  host: h\n  name: n\n  username: u\n  passwordfile: /nonexistent/p\n").unwrap_err();
        assert_eq!(err.key, "db_config.passwordfile");
    }

    #[test]
    fn wrong_values_name_the_file_and_the_key() {
        let cases = [
            ("server_bind_port: http\n", "server_bind_port"),
            ("server_bind_port: 70000\n", "server_bind_port"),
            ("connection_timeout: soon\n", "connection_timeout"),
            ("tls_min_version: 12\n", "tls_min_version"),
            ("tls_min_version: TLS12\n", "tls_min_version"),
            ("tls_cert_file: [a, b]\n", "tls_cert_file"),
            ("permit_ping_without_stream: sometimes\n", "permit_ping_without_stream"),
            ("write_buffer_size: big\n", "write_buffer_size"),
            ("cert_watch_interval: 0s\n", "cert_watch_interval"),
            ("grpc_config: 3\n", "grpc_config"),
            (
                "grpc_config:\n  max_concurrent_streams: -1\n",
                "grpc_config.max_concurrent_streams",
            ),
            ("db_config:\n  host: h\n  name: n\n", "db_config.username"),
            (
                "db_config:\n  host: h\n  name: n\n  username: u\n  sslmode: maybe\n",
                "db_config.sslmode",
            ),
            (
                "db_config:\n  host: h\n  name: n\n  username: u\n  dialect: mysql\n",
                "db_config.dialect",
            ),
            (
                "db_config:\n  host: h\n  name: n\n  username: u\n  authmethod: az-entra\n",
                "db_config.authmethod",
            ),
            (
                "db_config:\n  host: h\n  name: n\n  username: u\n  maxopenconnections: 0\n",
                "db_config.maxopenconnections",
            ),
        ];
        for (text, key) in cases {
            let err = parse(text).unwrap_err();
            assert_eq!(
                (err.file.as_path(), err.key.as_str()),
                (Path::new("/cfg/config.yaml"), key),
                "{text}: {err}"
            );
        }
        assert_eq!(parse("- a\n- b\n").unwrap_err().key, "");
        assert!(parse("a: [\n").unwrap_err().reason.starts_with("not YAML"));
    }

    #[test]
    fn a_missing_file_is_none() {
        assert_eq!(
            ServerConfigFile::read(Path::new("/nonexistent/config.yaml")).unwrap(),
            None
        );
    }
}
