//! The command line OCM's ClusterManager operator gives its gRPC server's container
//! (`/server grpc --server-config=… [--kubeconfig=…] [--tls-min-version=…] …`), parsed as Go's
//! pflag does (`--name=value`, `--name value`, `-v=4`, a bare boolean), accepting every flag OCM's
//! server and the Go conductor accept. An unknown flag does not stop the server: it is named in
//! [`Flags::ignored`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::go;

/// Where OCM's operator mounts the server's configuration.
pub const DEFAULT_SERVER_CONFIG: &str = "/var/run/secrets/hub/grpc/config/config.yaml";

/// What the command line sets.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Flags {
    /// `--server-config`: OCM's or the Go conductor's configuration file.
    pub server_config: Option<PathBuf>,
    /// `--kubeconfig`: the hub's API server (hosted mode); unset: in-cluster.
    pub kubeconfig: Option<PathBuf>,
    /// `--listen`: the health and metrics endpoint (default `:8443`, HTTPS).
    pub listen: Option<SocketAddr>,
    /// `--tls-min-version`, `--tls-cipher-suites`: override the file's.
    pub tls_min_version: Option<go::TlsVersionValue>,
    pub tls_cipher_suites: Option<Vec<String>>,
    /// `--broker-heartbeat-disabled` (or OCM's `--broker-heartbeat-enabled=false`),
    /// `--broker-heartbeat-interval`.
    pub heartbeat_disabled: Option<bool>,
    pub heartbeat_interval: Option<Duration>,
    /// `-v`: klog's verbosity.
    pub verbosity: Option<u32>,
    /// `--print-config`: print the equivalent `conductor.toml` and exit.
    pub print_config: bool,
    /// Flags accepted that mean nothing to conductor, and flags not known at all: each with why
    /// it is ignored, for one log line.
    pub ignored: Vec<Ignored>,
}

/// A flag given and not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ignored {
    pub flag: String,
    pub why: &'static str,
}

/// A flag with a value conductor cannot use: the flag and the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--{flag}: {reason}")]
pub struct FlagError {
    pub flag: String,
    pub reason: String,
}

/// The flags that take a value and mean nothing to conductor, and why.
const IGNORED_WITH_VALUE: [(&str, &str); 10] = [
    (
        "namespace",
        "leader election's namespace: conductor's replicas are all active, with no leader",
    ),
    (
        "config",
        "the controller's operator configuration file: conductor's settings come from --server-config",
    ),
    (
        "terminate-on-files",
        "conductor reloads the serving certificate and the client CA when they change, without a restart",
    ),
    ("kube-api-qps", "conductor does not rate-limit its API server client"),
    ("kube-api-burst", "conductor does not rate-limit its API server client"),
    (
        "leader-election-lease-duration",
        "conductor's replicas are all active, with no leader",
    ),
    (
        "leader-election-renew-deadline",
        "conductor's replicas are all active, with no leader",
    ),
    (
        "leader-election-retry-period",
        "conductor's replicas are all active, with no leader",
    ),
    ("vmodule", "per-file log levels are klog's; conductor's level is -v's"),
    ("log-flush-frequency", "conductor writes each log line as it comes"),
];

/// The boolean flags that mean nothing to conductor, and why.
const IGNORED_SWITCHES: [(&str, &str); 1] = [(
    "disable-leader-election",
    "conductor's replicas are all active, with no leader",
)];

impl Flags {
    /// Parses the arguments after `grpc`.
    pub fn parse<I: IntoIterator<Item = String>>(args: I) -> Result<Self, FlagError> {
        let mut flags = Self::default();
        let mut args = args.into_iter().peekable();
        while let Some(arg) = args.next() {
            let Some(body) = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-')) else {
                flags.ignored.push(Ignored {
                    flag: arg,
                    why: "not a flag: `grpc` takes no arguments",
                });
                continue;
            };
            let (name, inline) = match body.split_once('=') {
                Some((name, value)) => (name.to_owned(), Some(value.to_owned())),
                None => (body.to_owned(), None),
            };
            let fail = |reason: String| FlagError {
                flag: name.clone(),
                reason,
            };
            if let Some(default) = flags.switch(&name) {
                let on = match inline.as_deref() {
                    None => default,
                    Some(v) => go_bool(v).ok_or_else(|| fail(format!("{v:?} is not true or false")))?,
                };
                flags.set_switch(&name, on);
                continue;
            }
            // Every other flag takes a value: after `=`, else the next argument unless it is a
            // flag itself.
            let value = match inline {
                Some(v) => Some(v),
                None => args.next_if(|next| !next.starts_with('-')),
            };
            flags.set(&name, value).map_err(fail)?;
        }
        Ok(flags)
    }

    /// A boolean flag's value when given bare, or `None` when `name` is not one.
    fn switch(&self, name: &str) -> Option<bool> {
        match name {
            "print-config" | "broker-heartbeat-disabled" | "broker-heartbeat-enabled" => Some(true),
            _ if IGNORED_SWITCHES.iter().any(|(n, _)| *n == name) => Some(true),
            _ => None,
        }
    }

    fn set_switch(&mut self, name: &str, on: bool) {
        match name {
            "print-config" => self.print_config = on,
            "broker-heartbeat-disabled" => self.heartbeat_disabled = Some(on),
            // OCM's own spelling of the same switch.
            "broker-heartbeat-enabled" => self.heartbeat_disabled = Some(!on),
            _ => {
                let why = IGNORED_SWITCHES
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map_or("unknown", |(_, why)| *why);
                self.ignore(name, why);
            }
        }
    }

    fn set(&mut self, name: &str, value: Option<String>) -> Result<(), String> {
        let known = matches!(
            name,
            "server-config"
                | "kubeconfig"
                | "listen"
                | "tls-min-version"
                | "tls-cipher-suites"
                | "broker-heartbeat-interval"
                | "v"
        ) || IGNORED_WITH_VALUE.iter().any(|(n, _)| *n == name);
        if !known {
            self.ignore(name, "not a flag of OCM's gRPC server or the Go conductor");
            return Ok(());
        }
        let value = value.ok_or("needs a value")?;
        match name {
            "server-config" => self.server_config = Some(PathBuf::from(value)),
            "kubeconfig" => self.kubeconfig = (!value.is_empty()).then(|| PathBuf::from(value)),
            "listen" => self.listen = Some(go::listen_address(&value)?),
            "tls-min-version" => {
                let version = go::TlsVersionValue::Name(value);
                go::tls_version(&version)?;
                self.tls_min_version = Some(version);
            }
            "tls-cipher-suites" => {
                self.tls_cipher_suites = Some(value.split(',').map(|s| s.trim().to_owned()).collect())
            }
            "broker-heartbeat-interval" => self.heartbeat_interval = Some(go::duration(&value)?),
            "v" => self.verbosity = Some(value.parse().map_err(|_| format!("{value:?} is not a number"))?),
            _ => {
                let why = IGNORED_WITH_VALUE
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map_or("unknown", |(_, why)| *why);
                self.ignore(name, why);
            }
        }
        Ok(())
    }

    fn ignore(&mut self, name: &str, why: &'static str) {
        let flag = format!("--{name}");
        if !self.ignored.iter().any(|i| i.flag == flag) {
            self.ignored.push(Ignored { flag, why });
        }
    }
}

/// Go's `strconv.ParseBool`.
fn go_bool(text: &str) -> Option<bool> {
    match text {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Flags, FlagError> {
        Flags::parse(args.iter().map(|a| a.to_string()))
    }

    fn ignored(flags: &Flags) -> Vec<&str> {
        flags.ignored.iter().map(|i| i.flag.as_str()).collect()
    }

    #[test]
    fn the_operators_command_line() {
        let f = parse(&["--server-config=/var/run/secrets/hub/grpc/config/config.yaml"]).unwrap();
        assert_eq!(f.server_config, Some(PathBuf::from(DEFAULT_SERVER_CONFIG)));
        assert!(f.ignored.is_empty());
        let f = parse(&[
            "--server-config=/c.yaml",
            "--kubeconfig=/var/run/secrets/hub/kubeconfig",
            "--tls-min-version=VersionTLS13",
            "--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        ])
        .unwrap();
        assert_eq!(f.kubeconfig, Some(PathBuf::from("/var/run/secrets/hub/kubeconfig")));
        assert_eq!(
            f.tls_min_version,
            Some(go::TlsVersionValue::Name("VersionTLS13".into()))
        );
        assert_eq!(f.tls_cipher_suites.unwrap().len(), 2);
    }

    #[test]
    fn values_after_equals_or_in_the_next_argument() {
        let f = parse(&["--server-config", "/c.yaml", "-v", "4", "--listen", ":9443"]).unwrap();
        assert_eq!(f.server_config, Some(PathBuf::from("/c.yaml")));
        assert_eq!(f.verbosity, Some(4));
        assert_eq!(f.listen, Some(SocketAddr::from(([0, 0, 0, 0], 9443))));
        let f = parse(&["-v=2", "--listen=127.0.0.1:8443"]).unwrap();
        assert_eq!(f.verbosity, Some(2));
        assert_eq!(f.listen, Some(SocketAddr::from(([127, 0, 0, 1], 8443))));
    }

    #[test]
    fn broker_heartbeat_flags() {
        let f = parse(&["--broker-heartbeat-disabled", "--broker-heartbeat-interval=5s"]).unwrap();
        assert_eq!(f.heartbeat_disabled, Some(true));
        assert_eq!(f.heartbeat_interval, Some(Duration::from_secs(5)));
        let f = parse(&["--broker-heartbeat-disabled=false"]).unwrap();
        assert_eq!(f.heartbeat_disabled, Some(false));
        let f = parse(&["--broker-heartbeat-enabled=false"]).unwrap();
        assert_eq!(f.heartbeat_disabled, Some(true));
        let f = parse(&["--broker-heartbeat-enabled"]).unwrap();
        assert_eq!(f.heartbeat_disabled, Some(false));
        assert_eq!(
            parse(&["--broker-heartbeat-interval=5"]).unwrap_err().flag,
            "broker-heartbeat-interval"
        );
    }

    #[test]
    fn library_flags_are_accepted_and_ignored_with_a_reason() {
        let f = parse(&[
            "--kube-api-qps=50",
            "--kube-api-burst",
            "100",
            "--disable-leader-election",
            "--leader-election-lease-duration=137s",
            "--leader-election-renew-deadline=107s",
            "--leader-election-retry-period=26s",
            "--namespace=open-cluster-management-hub",
            "--config=/var/run/configmaps/config/config.yaml",
            "--terminate-on-files=/var/run/secrets/serving-cert/tls.crt",
            "--terminate-on-files=/var/run/secrets/serving-cert/tls.key",
            "--vmodule=server=4",
        ])
        .unwrap();
        assert_eq!(
            ignored(&f),
            [
                "--kube-api-qps",
                "--kube-api-burst",
                "--disable-leader-election",
                "--leader-election-lease-duration",
                "--leader-election-renew-deadline",
                "--leader-election-retry-period",
                "--namespace",
                "--config",
                "--terminate-on-files",
                "--vmodule"
            ],
            "each once"
        );
        assert!(f.ignored.iter().all(|i| !i.why.is_empty() && i.why != "unknown"));
        assert_eq!(
            f,
            Flags {
                ignored: f.ignored.clone(),
                ..Flags::default()
            },
            "nothing else set"
        );
    }

    #[test]
    fn unknown_flags_do_not_stop_the_server() {
        let f = parse(&[
            "--alsologtostderr",
            "--feature-gates",
            "A=true",
            "--server-config=/c.yaml",
            "stray",
        ])
        .unwrap();
        assert_eq!(ignored(&f), ["--alsologtostderr", "--feature-gates", "stray"]);
        assert_eq!(
            f.server_config,
            Some(PathBuf::from("/c.yaml")),
            "the value after an unknown flag is its own"
        );
    }

    #[test]
    fn bad_values_name_the_flag() {
        assert_eq!(parse(&["--tls-min-version=TLS12"]).unwrap_err().flag, "tls-min-version");
        assert_eq!(parse(&["--listen=nowhere"]).unwrap_err().flag, "listen");
        assert_eq!(parse(&["-v=high"]).unwrap_err().flag, "v");
        assert_eq!(parse(&["--server-config"]).unwrap_err().reason, "needs a value");
        assert_eq!(parse(&["--print-config=maybe"]).unwrap_err().flag, "print-config");
        assert!(parse(&["--print-config"]).unwrap().print_config);
    }
}
