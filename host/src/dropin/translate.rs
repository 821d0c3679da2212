//! OCM's server configuration and command line → the equivalent `conductor.toml`: the same
//! listener, certificates, TLS settings, keepalive and limits; authentication by TokenReview then
//! client certificate and authorization by SubjectAccessReview, as OCM's server does; health and
//! metrics on `--listen` (HTTPS, `:8443`); the kube source for every OCM data type, and with a
//! `db_config` the maestro source and the consumer controller, routed as the Go conductor routes
//! (source `maestro` → Maestro's database, the rest → Kubernetes).

use std::path::{Path, PathBuf};
use std::time::Duration;

use toml::{Table, Value};

use super::flags::Flags;
use super::go;
use super::server_config::{DbOptions, GrpcOptions, ServerConfigFile};

/// Where OCM's operator mounts the serving certificate and the client CA bundle.
pub const DEFAULT_TLS_CERT_FILE: &str = "/var/run/secrets/hub/grpc/serving-cert/tls.crt";
pub const DEFAULT_TLS_KEY_FILE: &str = "/var/run/secrets/hub/grpc/serving-cert/tls.key";
pub const DEFAULT_CLIENT_CA_FILE: &str = "/var/run/secrets/hub/grpc/ca/ca-bundle.crt";
/// OCM's gRPC port and health endpoint.
const DEFAULT_PORT: u16 = 8090;
const DEFAULT_HEALTH_LISTEN: &str = "0.0.0.0:8443";

/// The plugins of the hub configuration conductor ships (kube, maestro, consumer controller):
/// the drop-in runs the same ones with the same grants.
const HUB_CONFIGURATION: &str = include_str!("../../../deploy/overlays/kube-maestro/conductor.toml");

/// What the translation needs from the machine it runs on.
#[derive(Debug, Clone)]
pub struct Environment {
    /// The bundled plugins.
    pub plugin_folder: PathBuf,
    /// The writable folder (`/tmp`, an emptyDir under a read-only root): compiled components, the
    /// OCI cache, the health endpoint's certificate.
    pub scratch: PathBuf,
    /// The health endpoint's self-signed certificate and key.
    pub health_cert: (PathBuf, PathBuf),
    /// Relative paths in the file and flags are relative to this folder, as in Go.
    pub working_dir: PathBuf,
}

/// The configuration made, and what the operator should know about it.
#[derive(Debug, Clone)]
pub struct Translation {
    pub table: Table,
    /// Values changed or left out on the way (a TLS version conductor does not serve, a cipher
    /// suite it does not offer), one sentence each.
    pub notes: Vec<String>,
}

/// Makes the configuration.
pub fn translate(file: Option<&ServerConfigFile>, flags: &Flags, env: &Environment) -> Translation {
    let default_grpc = GrpcOptions::default();
    let grpc = file.map_or(&default_grpc, |f| &f.grpc);
    let mut notes = Vec::new();
    let mut root = Table::new();
    root.insert("plugin_folder".into(), path(&env.plugin_folder));
    root.insert("compile_cache".into(), path(&env.scratch.join("compiled")));
    root.insert("server".into(), server(grpc, flags, env, &mut notes).into());
    root.insert("auth".into(), table([("authorization", "sar".into())]).into());
    root.insert("broker".into(), broker(flags).into());
    root.insert(
        "admin".into(),
        table([
            (
                "listen",
                flags
                    .listen
                    .map_or_else(|| DEFAULT_HEALTH_LISTEN.to_owned(), |a| a.to_string())
                    .into(),
            ),
            ("authorization", "sar".into()),
            (
                "tls",
                table([
                    ("cert_file", path(&env.health_cert.0)),
                    ("key_file", path(&env.health_cert.1)),
                ])
                .into(),
            ),
        ])
        .into(),
    );
    root.insert("oci".into(), table([("cache", path(&env.scratch.join("oci")))]).into());
    root.insert(
        "log".into(),
        table([
            ("format", "json".into()),
            ("level", go::log_level(flags.verbosity.unwrap_or(0)).into()),
        ])
        .into(),
    );
    let mut kubernetes = Table::new();
    if let Some(kubeconfig) = &flags.kubeconfig {
        kubernetes.insert("kubeconfig".into(), path(&env.working_dir.join(kubeconfig)));
    }
    root.insert("kubernetes".into(), kubernetes.into());
    let db = file.and_then(|f| f.db.as_ref());
    let (plugins, databases) = plugins(db, env, &mut notes);
    root.insert("plugins".into(), plugins.into());
    if let Some(databases) = databases {
        root.insert("databases".into(), databases.into());
    }
    Translation { table: root, notes }
}

fn server(grpc: &GrpcOptions, flags: &Flags, env: &Environment, notes: &mut Vec<String>) -> Table {
    let mut server = Table::new();
    let port = grpc.server_bind_port.unwrap_or(DEFAULT_PORT);
    server.insert("listen".into(), format!("0.0.0.0:{port}").into());
    if let Some(n) = grpc.max_concurrent_streams.filter(|n| *n > 0 && *n < u32::MAX) {
        server.insert("max_concurrent_streams".into(), i64::from(n).into());
    }
    for (key, size) in [
        ("max_receive_message_size", grpc.max_receive_message_size),
        ("max_send_message_size", grpc.max_send_message_size),
    ] {
        if let Some(size) = size {
            server.insert(key.into(), format!("{size}B").into());
        }
    }
    for (key, from, d) in [
        ("tls_handshake_timeout", "connection_timeout", grpc.connection_timeout),
        (
            "client_min_ping_interval",
            "client_min_ping_interval",
            grpc.client_min_ping_interval,
        ),
        ("keepalive_interval", "server_ping_interval", grpc.server_ping_interval),
        ("keepalive_timeout", "server_ping_timeout", grpc.server_ping_timeout),
    ] {
        match d {
            Some(d) if d.is_zero() => notes.push(format!("{from} is 0: conductor's default applies")),
            Some(d) => {
                server.insert(key.into(), duration(d));
            }
            None => {}
        }
    }
    let file = |given: &Option<PathBuf>, default: &str| {
        path(&env.working_dir.join(given.as_deref().unwrap_or(Path::new(default))))
    };
    let mut tls = table([
        ("cert_file", file(&grpc.tls_cert_file, DEFAULT_TLS_CERT_FILE)),
        ("key_file", file(&grpc.tls_key_file, DEFAULT_TLS_KEY_FILE)),
        ("client_ca_file", file(&grpc.client_ca_file, DEFAULT_CLIENT_CA_FILE)),
    ]);
    // The command line's TLS settings win over the file's, as in OCM.
    let min = flags.tls_min_version.as_ref().or(grpc.tls_min_version.as_ref());
    let min = match min.map(go::tls_version) {
        Some(Ok((version, note))) => {
            notes.extend(note);
            version
        }
        // OCM's default; a bad value was refused when it was read.
        _ => "1.2",
    };
    tls.insert("min_version".into(), min.into());
    if let Some(Ok((max, _))) = grpc.tls_max_version.as_ref().map(go::tls_version) {
        if max < min {
            notes.push(format!(
                "tls_max_version {max} is older than the oldest version served ({min}): TLS {min} is served"
            ));
        } else if max == "1.2" {
            tls.insert("max_version".into(), max.into());
        }
    }
    if let Some(suites) = flags.tls_cipher_suites.as_ref().or(grpc.cipher_suites.as_ref()) {
        let (served, not_served) = go::cipher_suites(suites);
        if !not_served.is_empty() {
            notes.push(format!(
                "cipher suites {not_served:?} are not offered: conductor serves only ECDHE suites with AES-GCM or ChaCha20-Poly1305"
            ));
        }
        if served.is_empty() {
            if !not_served.is_empty() {
                notes.push("no TLS 1.2 cipher suite named is offered: every ECDHE AEAD suite is".to_owned());
            }
        } else {
            tls.insert(
                "cipher_suites".into(),
                served.into_iter().map(Value::from).collect::<Vec<_>>().into(),
            );
        }
    }
    if let Some(d) = grpc.cert_watch_interval {
        tls.insert("reload_interval".into(), duration(d));
    }
    server.insert("tls".into(), tls.into());
    server
}

fn broker(flags: &Flags) -> Table {
    let mut broker = Table::new();
    if let Some(interval) = flags.heartbeat_interval.filter(|d| !d.is_zero()) {
        broker.insert("heartbeat_interval".into(), duration(interval));
    }
    if let Some(disabled) = flags.heartbeat_disabled {
        broker.insert("heartbeat_disabled".into(), disabled.into());
    }
    broker
}

/// The bundled plugins' tables as the hub configuration has them, and Maestro's database when
/// the file names one.
fn plugins(db: Option<&DbOptions>, env: &Environment, notes: &mut Vec<String>) -> (Table, Option<Table>) {
    let hub: Table = HUB_CONFIGURATION
        .parse()
        .unwrap_or_else(|e| panic!("deploy/overlays/kube-maestro/conductor.toml is valid TOML: {e}"));
    let mut plugins = match hub.get("plugins") {
        Some(Value::Table(plugins)) => plugins.clone(),
        _ => Table::new(),
    };
    let Some(db) = db else {
        plugins.retain(|name, _| name == "kube");
        return (plugins, None);
    };
    let mut maestro = Table::new();
    maestro.insert("url".into(), database_url(db).into());
    let (mode, note) = tls_mode(db);
    notes.extend(note);
    maestro.insert("tls".into(), mode.into());
    if let Some(ca) = db.root_cert_file.as_ref().filter(|_| mode.starts_with("verify")) {
        maestro.insert("ca_file".into(), path(&env.working_dir.join(ca)));
    }
    if let Some(n) = db.max_open_connections {
        maestro.insert("pool_size".into(), i64::from(n).into());
    }
    (plugins, Some(table([("maestro", maestro.into())])))
}

/// `postgres://user:password@host:port/name`, each part escaped.
fn database_url(db: &DbOptions) -> String {
    use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
    let escape = |s: &str| utf8_percent_encode(s, NON_ALPHANUMERIC).to_string();
    let host = if db.host.contains(':') && !db.host.starts_with('[') {
        format!("[{}]", db.host)
    } else {
        db.host.clone()
    };
    let credentials = match db.password.is_empty() {
        true => escape(&db.username),
        false => format!("{}:{}", escape(&db.username), escape(&db.password)),
    };
    format!("postgres://{credentials}@{host}:{}/{}", db.port, escape(&db.name))
}

/// libpq's `sslmode` as conductor's `tls`: `require` with a root certificate verifies the CA, as
/// libpq does; `allow` (plain first) is served as `prefer` (TLS first).
fn tls_mode(db: &DbOptions) -> (&'static str, Option<String>) {
    match db.sslmode.as_str() {
        "disable" => ("disable", None),
        "allow" => (
            "prefer",
            Some("db_config.sslmode \"allow\" is served as \"prefer\": TLS is tried first".to_owned()),
        ),
        "require" if db.root_cert_file.is_some() => ("verify-ca", None),
        "require" => ("require", None),
        "verify-ca" => ("verify-ca", None),
        "verify-full" => ("verify-full", None),
        _ => ("prefer", None),
    }
}

fn table<const N: usize>(entries: [(&str, Value); N]) -> Table {
    entries.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

fn path(p: &Path) -> Value {
    p.display().to_string().into()
}

/// A duration as conductor writes it (humantime's syntax).
fn duration(d: Duration) -> Value {
    conductor_plugin_sdk::duration::format(d).into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Authenticator, Authorization, Config};
    use crate::dropin::server_config::ServerConfigFile;

    fn env() -> Environment {
        Environment {
            plugin_folder: PathBuf::from("/usr/lib/conductor/plugins"),
            scratch: PathBuf::from("/tmp/conductor"),
            health_cert: (
                "/tmp/conductor/health/tls.crt".into(),
                "/tmp/conductor/health/tls.key".into(),
            ),
            working_dir: PathBuf::from("/"),
        }
    }

    fn config(file: Option<&str>, args: &[&str]) -> (Config, Vec<String>) {
        let file = file.map(|text| ServerConfigFile::parse(Path::new("/c/config.yaml"), text).unwrap());
        let flags = Flags::parse(args.iter().map(|a| a.to_string())).unwrap();
        let t = translate(file.as_ref(), &flags, &env());
        let text = toml::to_string(&t.table).unwrap();
        let config = Config::parse(&text).unwrap_or_else(|e| panic!("{e:?}\n{text}"));
        config.validate().unwrap_or_else(|e| panic!("{e:?}\n{text}"));
        (config, t.notes)
    }

    #[test]
    fn no_file_serves_as_ocm_does_by_default() {
        let (c, notes) = config(None, &[]);
        assert!(notes.is_empty());
        assert_eq!(c.server.listen.to_string(), "0.0.0.0:8090");
        let tls = c.server.tls.as_ref().unwrap();
        assert_eq!(tls.cert_file, PathBuf::from(DEFAULT_TLS_CERT_FILE));
        assert_eq!(tls.key_file, PathBuf::from(DEFAULT_TLS_KEY_FILE));
        assert_eq!(tls.client_ca_file, Some(PathBuf::from(DEFAULT_CLIENT_CA_FILE)));
        assert_eq!((tls.min_version.as_str(), tls.max_version.as_deref()), ("1.2", None));
        assert_eq!(
            c.auth.authenticators(&c.server),
            [Authenticator::Token, Authenticator::Mtls]
        );
        assert_eq!(c.auth.authorization, Authorization::Sar);
        assert_eq!(c.admin.listen.to_string(), "0.0.0.0:8443");
        assert_eq!(c.admin.authorization, crate::config::AdminAuthorization::Sar);
        assert!(c.admin.tls.is_some(), "health over HTTPS, as the operator's probes ask");
        assert_eq!(c.plugins.keys().collect::<Vec<_>>(), ["kube"]);
        assert!(c.databases.is_empty());
        assert!(
            !c.dynamic.source_plugins,
            "the operator's ClusterRole grants no SourcePlugin"
        );
        assert_eq!(c.plugin_folder, Some(PathBuf::from("/usr/lib/conductor/plugins")));
        assert_eq!(c.compile_cache, Some(PathBuf::from("/tmp/conductor/compiled")));
        assert_eq!(c.log.level, "info");
        assert!(c.kubernetes.kubeconfig.is_none(), "in-cluster");
    }

    #[test]
    fn every_grpc_key_is_mapped() {
        let (c, notes) = config(
            Some(
                "tls_cert_file: certs/tls.crt\ntls_key_file: /k/tls.key\nclient_ca_file: /ca/ca.crt\ntls_min_version: 771\ntls_max_version: 771\ncipher_suites: TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_RSA_WITH_AES_128_CBC_SHA\ncert_watch_interval: 45s\nserver_bind_port: \"9091\"\nmax_concurrent_streams: 200\nmax_receive_message_size: 8388608\nmax_send_message_size: 1048576\nconnection_timeout: 2m\nclient_min_ping_interval: 7s\nserver_ping_interval: 20s\nserver_ping_timeout: 4s\n",
            ),
            &[],
        );
        let s = &c.server;
        assert_eq!(s.listen.port(), 9091);
        assert_eq!(s.max_concurrent_streams, Some(200));
        assert_eq!(
            (s.max_receive_message_size.0, s.max_send_message_size.0),
            (8 << 20, 1 << 20)
        );
        assert_eq!(s.tls_handshake_timeout.0, Duration::from_secs(120));
        assert_eq!(s.client_min_ping_interval.0, Duration::from_secs(7));
        assert_eq!(s.keepalive_interval.0, Duration::from_secs(20));
        assert_eq!(s.keepalive_timeout.0, Duration::from_secs(4));
        let tls = s.tls.as_ref().unwrap();
        assert_eq!(
            tls.cert_file,
            PathBuf::from("/certs/tls.crt"),
            "relative to the working folder"
        );
        assert_eq!(tls.key_file, PathBuf::from("/k/tls.key"));
        assert_eq!(tls.client_ca_file, Some(PathBuf::from("/ca/ca.crt")));
        assert_eq!(
            (tls.min_version.as_str(), tls.max_version.as_deref()),
            ("1.2", Some("1.2"))
        );
        assert_eq!(tls.cipher_suites, ["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"]);
        assert_eq!(tls.reload_interval.0, Duration::from_secs(45));
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("TLS_RSA_WITH_AES_128_CBC_SHA"), "{notes:?}");
    }

    #[test]
    fn flags_win_over_the_file() {
        let (c, _) = config(
            Some("tls_min_version: VersionTLS12\ncipher_suites: TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256\n"),
            &[
                "--tls-min-version=VersionTLS13",
                "--tls-cipher-suites=TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
                "--listen=127.0.0.1:9443",
                "--kubeconfig=/var/run/secrets/hub/kubeconfig",
                "-v=4",
                "--broker-heartbeat-interval=20s",
            ],
        );
        let tls = c.server.tls.as_ref().unwrap();
        assert_eq!(tls.min_version, "1.3");
        assert_eq!(tls.cipher_suites, ["TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"]);
        assert_eq!(c.admin.listen.to_string(), "127.0.0.1:9443");
        assert_eq!(
            c.kubernetes.kubeconfig,
            Some(PathBuf::from("/var/run/secrets/hub/kubeconfig"))
        );
        assert_eq!(c.log.level, "debug");
        assert_eq!(c.broker.heartbeat(), Some(Duration::from_secs(20)));
        let (c, _) = config(None, &["--broker-heartbeat-disabled"]);
        assert_eq!(c.broker.heartbeat(), None);
    }

    #[test]
    fn old_tls_versions_are_raised_to_1_2_with_a_note() {
        let (c, notes) = config(Some("tls_min_version: 769\n"), &[]);
        assert_eq!(c.server.tls.unwrap().min_version, "1.2");
        assert!(notes[0].contains("TLS 1.0"), "{notes:?}");
    }

    #[test]
    fn db_config_adds_maestro_and_the_consumer_controller() {
        let (c, notes) = config(
            Some(
                "grpc_config:\n  server_bind_port: \"8090\"\ndb_config:\n  host: maestro-db.maestro\n  port: 5432\n  name: maestro\n  username: maestro\n  password: \"p@ss/word\"\n  sslmode: require\n  rootcertfile: /db/ca.crt\n  maxopenconnections: 30\n",
            ),
            &[],
        );
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(
            c.plugins.keys().collect::<Vec<_>>(),
            ["consumer-controller", "kube", "maestro"]
        );
        let db = &c.databases["maestro"];
        assert_eq!(
            db.url.as_deref(),
            Some("postgres://maestro:p%40ss%2Fword@maestro-db.maestro:5432/maestro")
        );
        assert_eq!(
            db.tls,
            Some(crate::config::TlsMode::VerifyCa),
            "require with a root certificate, as libpq"
        );
        assert_eq!(db.ca_file, Some(PathBuf::from("/db/ca.crt")));
        assert_eq!(db.pool_size, 30);
        assert_eq!(c.plugins["maestro"].databases, ["maestro"]);
        let (c, _) = config(Some("db_config:\n  host: h\n  name: n\n  username: u\n"), &[]);
        let db = &c.databases["maestro"];
        assert_eq!(db.url.as_deref(), Some("postgres://u@h:5432/n"));
        assert_eq!(
            (db.tls, db.ca_file.as_ref()),
            (Some(crate::config::TlsMode::Disable), None),
            "Maestro's default"
        );
    }

    #[test]
    fn the_plugins_are_the_shipped_hub_configurations() {
        let hub = Config::parse(HUB_CONFIGURATION).unwrap();
        let (c, _) = config(Some("db_config:\n  host: h\n  name: n\n  username: u\n"), &[]);
        for name in ["kube", "maestro", "consumer-controller"] {
            assert_eq!(
                format!("{:?}", c.plugins[name]),
                format!("{:?}", hub.plugins[name]),
                "{name}"
            );
        }
    }
}
