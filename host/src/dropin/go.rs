//! Values as OCM's Go programs write them: durations (`1m30s`, `300ms`, or nanoseconds as an
//! integer), TLS versions (`771`, `VersionTLS12`), listen addresses (`:8443`) and cipher suite
//! names.

use std::net::SocketAddr;
use std::time::Duration;

/// A Go `time.Duration` in its text form (`"1h2m3.5s"`, `"300ms"`, `"0"`).
pub fn duration(text: &str) -> Result<Duration, String> {
    let bad = || format!("{text:?} is not a duration (Go's syntax: \"30s\", \"1m30s\", \"500ms\")");
    let text = text.trim();
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    if text.is_empty() || text.starts_with('-') {
        return Err(bad());
    }
    let mut rest = text.strip_prefix('+').unwrap_or(text);
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).ok_or_else(bad)?;
        let (number, after) = rest.split_at(number_len);
        let value: f64 = number.parse().map_err(|_| bad())?;
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_len);
        let nanos = match unit {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return Err(bad()),
        };
        total += value * nanos;
        rest = after;
    }
    Ok(Duration::from_nanos(total.round() as u64))
}

/// A TLS version as Go's `tls.Version*` constant (`771`) or its name (`VersionTLS12`), as
/// conductor names it (`"1.2"`), with a note when the version is older than conductor serves.
pub fn tls_version(value: &TlsVersionValue) -> Result<(&'static str, Option<String>), String> {
    let version = match value {
        TlsVersionValue::Number(n) => match n {
            0x0301 => "1.0",
            0x0302 => "1.1",
            0x0303 => "1.2",
            0x0304 => "1.3",
            _ => return Err(format!("{n} is not a TLS version (771 is TLS 1.2, 772 TLS 1.3)")),
        },
        TlsVersionValue::Name(name) => match name.as_str() {
            "VersionTLS10" => "1.0",
            "VersionTLS11" => "1.1",
            "VersionTLS12" => "1.2",
            "VersionTLS13" => "1.3",
            _ => {
                return Err(format!(
                    "{name:?} is not a TLS version: VersionTLS12 or VersionTLS13 (or 771, 772)"
                ));
            }
        },
    };
    Ok(match version {
        "1.0" | "1.1" => (
            "1.2",
            Some(format!(
                "TLS {version} is not served: TLS 1.2 is the oldest conductor speaks"
            )),
        ),
        v => (v, None),
    })
}

/// A TLS version as written: Go's constant or its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TlsVersionValue {
    Number(u64),
    Name(String),
}

/// A Go listen address: `:8443` (every interface), `0.0.0.0:8443`, `[::]:8443`, `host:port`
/// with an IP host.
pub fn listen_address(text: &str) -> Result<SocketAddr, String> {
    let text = text.trim();
    if let Some(port) = text.strip_prefix(':') {
        let port: u16 = port.parse().map_err(|_| format!("{text:?}: {port:?} is not a port"))?;
        return Ok(SocketAddr::from(([0, 0, 0, 0], port)));
    }
    text.parse()
        .map_err(|_| format!("{text:?} is not an address to listen on (\":8443\", \"0.0.0.0:8443\", \"[::]:8443\")"))
}

/// TLS 1.2 cipher suites as Go names them, as conductor names them (IANA's names): the suites
/// conductor serves, the TLS 1.3 suites (always on, as in Go) left out, and those it does not
/// serve named apart.
pub fn cipher_suites(names: &[String]) -> (Vec<String>, Vec<String>) {
    const SERVED: [&str; 6] = [
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
    ];
    const TLS13: [&str; 3] = [
        "TLS_AES_128_GCM_SHA256",
        "TLS_AES_256_GCM_SHA384",
        "TLS_CHACHA20_POLY1305_SHA256",
    ];
    let mut served = Vec::new();
    let mut not_served = Vec::new();
    for name in names.iter().map(|n| n.trim()).filter(|n| !n.is_empty()) {
        // Go's older names of the ChaCha20 suites have no `_SHA256`.
        let iana = match name {
            "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305" | "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305" => {
                format!("{name}_SHA256")
            }
            _ => name.to_owned(),
        };
        if TLS13.contains(&iana.as_str()) {
            continue;
        }
        if SERVED.contains(&iana.as_str()) {
            if !served.contains(&iana) {
                served.push(iana);
            }
        } else {
            not_served.push(name.to_owned());
        }
    }
    (served, not_served)
}

/// klog's `-v` level as a `tracing` level.
pub fn log_level(verbosity: u32) -> &'static str {
    match verbosity {
        0..=3 => "info",
        4 | 5 => "debug",
        _ => "trace",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_in_go_syntax() {
        assert_eq!(duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(duration("300ms"), Ok(Duration::from_millis(300)));
        assert_eq!(duration("2us"), Ok(Duration::from_micros(2)));
        assert_eq!(duration("0"), Ok(Duration::ZERO));
        for bad in ["", "10", "10x", "-1s", "s", "1m-3s"] {
            assert!(duration(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn tls_versions_as_numbers_and_names() {
        use TlsVersionValue::*;
        assert_eq!(tls_version(&Number(771)), Ok(("1.2", None)));
        assert_eq!(tls_version(&Number(772)), Ok(("1.3", None)));
        assert_eq!(tls_version(&Name("VersionTLS12".into())), Ok(("1.2", None)));
        assert_eq!(tls_version(&Name("VersionTLS13".into())), Ok(("1.3", None)));
        let (v, note) = tls_version(&Number(769)).unwrap();
        assert_eq!(v, "1.2");
        assert!(note.unwrap().contains("TLS 1.0 is not served"));
        assert!(tls_version(&Number(12)).is_err());
        assert!(
            tls_version(&Name("TLS1.2".into()))
                .unwrap_err()
                .contains("VersionTLS12")
        );
    }

    #[test]
    fn listen_addresses() {
        assert_eq!(listen_address(":8443"), Ok(SocketAddr::from(([0, 0, 0, 0], 8443))));
        assert_eq!(listen_address("127.0.0.1:9"), Ok(SocketAddr::from(([127, 0, 0, 1], 9))));
        assert_eq!(listen_address("[::]:8443").unwrap().port(), 8443);
        assert!(listen_address(":http").is_err());
        assert!(listen_address("localhost:8443").is_err());
    }

    #[test]
    fn cipher_suites_keep_what_is_served() {
        let names: Vec<String> = [
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
            "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
            "TLS_AES_128_GCM_SHA256",
            "TLS_RSA_WITH_AES_128_CBC_SHA",
        ]
        .map(String::from)
        .to_vec();
        let (served, not_served) = cipher_suites(&names);
        assert_eq!(
            served,
            [
                "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
                "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"
            ]
        );
        assert_eq!(not_served, ["TLS_RSA_WITH_AES_128_CBC_SHA"]);
    }

    #[test]
    fn klog_verbosity() {
        assert_eq!(log_level(0), "info");
        assert_eq!(log_level(2), "info");
        assert_eq!(log_level(4), "debug");
        assert_eq!(log_level(10), "trace");
    }
}
