//! Whether a `SourcePlugin`'s spec may run, and as what: the spec becomes a `[plugins.<name>]`
//! table (always a component) within the operator's `[dynamic] max_grants`, and its sources
//! become routes — refused, with the reason, when it asks for more than allowed, names what it may
//! not, or claims a source or name already taken.

use std::collections::BTreeSet;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::config::{Config, DynamicConfig, KubeResourceGrant, MaxGrants, PluginConfig, PluginLimits};

/// The spec of a `SourcePlugin`: the keys of a `[plugins.<name>]` table a resource may set.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Spec {
    file: String,
    sources: Vec<String>,
    #[serde(default)]
    grants: Vec<String>,
    #[serde(default)]
    kube_resources: Vec<Value>,
    #[serde(default)]
    databases: Vec<String>,
    #[serde(default)]
    config: Option<Value>,
    #[serde(default)]
    pool_size: Option<Value>,
    #[serde(default)]
    limits: Option<Value>,
}

/// A spec admitted: the plugin's table and the sources it serves.
#[derive(Debug, Clone, PartialEq)]
pub struct Admitted {
    pub plugin: PluginConfig,
    pub sources: Vec<String>,
}

/// Why a spec is not admitted: the key of the spec at fault, and the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub reason: &'static str,
    pub message: String,
}

fn refused(reason: &'static str, message: impl Into<String>) -> Refusal {
    Refusal {
        reason,
        message: message.into(),
    }
}

/// Admits the spec of the `SourcePlugin` `name` against `config` (conductor.toml, plus the
/// resources admitted before this one, whose routes it may not take).
pub fn admit(name: &str, spec: &Value, config: &Config) -> Result<Admitted, Refusal> {
    let policy: &DynamicConfig = &config.dynamic;
    let spec: Spec = serde_path_to_error::deserialize(spec)
        .map_err(|e| refused("InvalidSpec", format!("spec.{}: {}", e.path(), e.inner())))?;
    if config.plugins.contains_key(name) {
        return Err(refused(
            "NameTaken",
            format!("a plugin named {name:?} is configured in conductor.toml; a SourcePlugin cannot replace it"),
        ));
    }
    if crate::oci::is_oci(&spec.file) {
        let reference = crate::oci::ArtifactReference::parse_pinned(&spec.file)
            .map_err(|e| refused("InvalidSpec", format!("spec.file: {e}")))?;
        if let Some(why) = config.oci.refusal(&reference) {
            return Err(refused("RegistryNotAllowed", format!("spec.file: {why}")));
        }
        if policy.require_signature && policy.verify.is_none() {
            return Err(refused(
                "SignatureRequired",
                "spec.file: conductor.toml accepts only signed artifacts ([dynamic] require_signature) and names no key to verify them with ([dynamic] verify)",
            ));
        }
    } else if !policy.allow_plugin_folder {
        return Err(refused(
            "FileNotAllowed",
            "spec.file must be an artifact in a registry (oci://…@sha256:…): files of the host are not allowed ([dynamic] allow_plugin_folder)",
        ));
    } else if spec.file.contains('/') || spec.file.is_empty() || spec.file.starts_with('.') {
        return Err(refused(
            "FileNotAllowed",
            format!(
                "spec.file {:?}: name a file of the plugin folder by its bare name",
                spec.file
            ),
        ));
    }
    if spec.sources.is_empty() {
        return Err(refused(
            "InvalidSpec",
            "spec.sources: a SourcePlugin serves at least one source",
        ));
    }
    for (i, source) in spec.sources.iter().enumerate() {
        if let Some(plugin) = config.routes.get(source) {
            return Err(refused(
                "SourceTaken",
                format!("spec.sources[{i}]: source {source:?} is already served by plugin {plugin:?}"),
            ));
        }
    }
    let max = &policy.max_grants;
    for (i, grant) in spec.grants.iter().enumerate() {
        if conductor_plugin_sdk::Capability::parse(grant).is_none() {
            return Err(refused(
                "InvalidSpec",
                format!("spec.grants[{i}]: {grant:?} is not a capability"),
            ));
        }
    }
    let allowed: BTreeSet<&str> = max.grants.iter().map(String::as_str).collect();
    let over: Vec<&str> = spec
        .grants
        .iter()
        .map(String::as_str)
        .filter(|g| !allowed.contains(g) || *g == "blob")
        .collect();
    if !over.is_empty() {
        return Err(refused(
            "GrantsExceeded",
            format!(
                "spec.grants: {over:?} exceed what conductor.toml allows a SourcePlugin ([dynamic.max_grants] grants = {:?})",
                max.grants
            ),
        ));
    }
    for (i, db) in spec.databases.iter().enumerate() {
        if !max.databases.contains(db) {
            return Err(refused(
                "GrantsExceeded",
                format!(
                    "spec.databases[{i}]: {db:?} is not among the databases a SourcePlugin may use ({:?})",
                    max.databases
                ),
            ));
        }
    }
    // The table as conductor.toml would hold it; its own checks run on the whole configuration.
    let mut table = json!({
        "kind": "component",
        "file": spec.file,
        "grants": spec.grants,
        "kube_resources": spec.kube_resources,
        "databases": spec.databases,
    });
    for (key, value) in [
        ("config", spec.config),
        ("pool_size", spec.pool_size),
        ("limits", spec.limits),
    ] {
        if let Some(v) = value {
            table[key] = v;
        }
    }
    if let Some(verify) = &policy.verify {
        table["verify"] = json!({ "public_key_file": verify.public_key_file });
    }
    let plugin: PluginConfig = serde_path_to_error::deserialize(&table)
        .map_err(|e| refused("InvalidSpec", format!("spec.{}: {}", e.path(), e.inner())))?;
    for (i, grant) in plugin.kube_resources.iter().enumerate() {
        if !within(grant, &max.kube_resources) {
            return Err(refused(
                "GrantsExceeded",
                format!(
                    "spec.kube_resources[{i}]: {} with verbs {:?} exceeds what conductor.toml allows a SourcePlugin ([dynamic.max_grants] kube_resources)",
                    grant.resource,
                    grant.verbs()
                ),
            ));
        }
    }
    if plugin.pool_size > max.pool_size {
        return Err(refused(
            "GrantsExceeded",
            format!(
                "spec.pool_size: {} is more than the {} allowed",
                plugin.pool_size, max.pool_size
            ),
        ));
    }
    if let Some(over) = limits_over(max, &plugin.limits).first() {
        return Err(refused(
            "LimitsExceeded",
            format!(
                "spec.limits.{}: {} is more than the {} conductor.toml allows ([dynamic.max_grants] {})",
                over.key, over.asked, over.ceiling, over.key
            ),
        ));
    }
    Ok(Admitted {
        plugin,
        sources: spec.sources,
    })
}

/// Whether `grant`'s resource and every verb it asks for are within one of `max`.
fn within(grant: &KubeResourceGrant, max: &[KubeResourceGrant]) -> bool {
    max.iter()
        .any(|m| m.resource == grant.resource && grant.verbs().iter().all(|v| m.allows(&grant.resource, v)))
}

/// One limit over its ceiling: the key, the value asked and the ceiling, as people read them.
#[derive(Debug, Clone, PartialEq, Eq)]
struct OverCeiling {
    key: &'static str,
    asked: String,
    ceiling: String,
}

/// The limits of `limits` above their ceilings in `max` (none: every one is within).
fn limits_over(max: &MaxGrants, limits: &PluginLimits) -> Vec<OverCeiling> {
    let mut over = Vec::new();
    let mut check = |key: &'static str, asked: u128, ceiling: u128, show: &dyn Fn(u128) -> String| {
        if asked > ceiling {
            over.push(OverCeiling {
                key,
                asked: show(asked),
                ceiling: show(ceiling),
            });
        }
    };
    let bytes = |n: u128| format!("{n} bytes");
    let count = |n: u128| n.to_string();
    let time = |ms: u128| conductor_plugin_sdk::duration::format(std::time::Duration::from_millis(ms as u64));
    check("memory", limits.memory.0.into(), max.memory.0.into(), &bytes);
    check("kv_bytes", limits.kv_bytes.0.into(), max.kv_bytes.0.into(), &bytes);
    check(
        "call_timeout",
        limits.call_timeout.0.as_millis(),
        max.call_timeout.0.as_millis(),
        &time,
    );
    check(
        "acquire_timeout",
        limits.acquire_timeout.0.as_millis(),
        max.acquire_timeout.0.as_millis(),
        &time,
    );
    for (key, asked, ceiling) in [
        ("event_queue", limits.event_queue, max.event_queue),
        ("event_batch", limits.event_batch, max.event_batch),
        ("notification_batch", limits.notification_batch, max.notification_batch),
        ("request_batch", limits.request_batch, max.request_batch),
        ("kv_keys", limits.kv_keys, max.kv_keys),
        ("timers", limits.timers, max.timers),
        ("metric_series", limits.metric_series, max.metric_series),
    ] {
        check(key, asked as u128, ceiling as u128, &count);
    }
    check(
        "log_lines_per_second",
        limits.log_lines_per_second.into(),
        max.log_lines_per_second.into(),
        &count,
    );
    if let Some(n) = limits.concurrent_notifications {
        check(
            "concurrent_notifications",
            n.into(),
            max.concurrent_notifications.into(),
            &count,
        );
    }
    over
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    /// `extra`, with unsigned artifacts allowed (the signature's own test says otherwise).
    fn config(extra: &str) -> Config {
        let mut c = Config::parse(extra).unwrap();
        c.dynamic.require_signature = false;
        c
    }

    #[test]
    fn an_artifact_is_refused_unless_a_key_verifies_it_or_signatures_are_not_required() {
        let strict = Config::parse("").unwrap();
        assert!(strict.dynamic.require_signature, "required by default");
        let r = admit("works", &spec(json!({})), &strict).unwrap_err();
        assert_eq!(r.reason, "SignatureRequired");
        assert!(r.message.contains("[dynamic] verify"), "{}", r.message);
        let keyed = Config::parse("[dynamic]\nverify = { public_key_file = \"cosign.pub\" }\n").unwrap();
        let a = admit("works", &spec(json!({})), &keyed).unwrap();
        assert!(a.plugin.verify.is_some(), "the pull verifies with the key");
        let folder = Config::parse("[dynamic]\nallow_plugin_folder = true\n").unwrap();
        admit("works", &spec(json!({ "file": "works.wasm" })), &folder)
            .expect("a file of the plugin folder is the operator's own");
    }

    fn spec(extra: Value) -> Value {
        let mut s = json!({ "file": format!("oci://registry.example/plugins/works@{DIGEST}"), "sources": ["works"] });
        for (k, v) in extra.as_object().unwrap() {
            s[k] = v.clone();
        }
        s
    }

    #[test]
    fn a_spec_within_the_defaults_becomes_a_component_table() {
        let a = admit(
            "works",
            &spec(json!({ "grants": ["emit", "kv"], "config": { "n": 1 }, "pool_size": 2 })),
            &config(""),
        )
        .unwrap();
        assert_eq!(a.sources, vec!["works"]);
        assert_eq!(a.plugin.kind, crate::config::PluginKind::Component);
        assert_eq!(a.plugin.grants, vec!["emit", "kv"]);
        assert_eq!(a.plugin.pool_size, 2);
        assert_eq!(a.plugin.config["n"].as_integer(), Some(1));
    }

    #[test]
    fn grants_beyond_max_grants_are_refused_naming_them() {
        for (extra, says) in [
            (json!({ "grants": ["emit", "pg"] }), "[\"pg\"] exceed"),
            (json!({ "grants": ["blob"] }), "[\"blob\"] exceed"),
            (
                json!({ "grants": ["kube"], "kube_resources": ["configmaps"] }),
                "[\"kube\"] exceed",
            ),
            (json!({ "databases": ["maestro"] }), "spec.databases[0]"),
            (json!({ "pool_size": 16 }), "spec.pool_size"),
        ] {
            let r = admit("works", &spec(extra.clone()), &config("")).unwrap_err();
            assert_eq!(r.reason, "GrantsExceeded", "{extra}: {r:?}");
            assert!(r.message.contains(says), "{extra}: {}", r.message);
        }
    }

    #[test]
    fn every_limit_has_a_ceiling_and_the_refusal_names_the_value_and_the_ceiling() {
        let cases = [
            (
                json!({ "memory": "1GiB" }),
                "spec.limits.memory: 1073741824 bytes is more than the 67108864 bytes",
            ),
            (
                json!({ "kv_bytes": "100GiB" }),
                "spec.limits.kv_bytes: 107374182400 bytes is more than the 16777216 bytes",
            ),
            (
                json!({ "kv_bytes": 107374182400u64 }),
                "spec.limits.kv_bytes: 107374182400 bytes",
            ),
            (
                json!({ "call_timeout": "24h" }),
                "spec.limits.call_timeout: 1day is more than the 5s",
            ),
            (
                json!({ "acquire_timeout": "1h" }),
                "spec.limits.acquire_timeout: 1h is more than the 10s",
            ),
            (
                json!({ "event_queue": 1_000_000 }),
                "spec.limits.event_queue: 1000000 is more than the 10000",
            ),
            (
                json!({ "event_batch": 5000 }),
                "spec.limits.event_batch: 5000 is more than the 100",
            ),
            (
                json!({ "concurrent_notifications": 64 }),
                "spec.limits.concurrent_notifications: 64 is more than the 4",
            ),
            (
                json!({ "kv_keys": 1_000_000_000 }),
                "spec.limits.kv_keys: 1000000000 is more than the 10000",
            ),
            (
                json!({ "timers": 1_000_000_000 }),
                "spec.limits.timers: 1000000000 is more than the 1000",
            ),
            (
                json!({ "log_lines_per_second": 100_000 }),
                "spec.limits.log_lines_per_second: 100000 is more than the 100",
            ),
            (
                json!({ "metric_series": 1_000_000_000 }),
                "spec.limits.metric_series: 1000000000 is more than the 1000",
            ),
        ];
        for (limits, says) in cases {
            let r = admit("works", &spec(json!({ "limits": limits.clone() })), &config("")).unwrap_err();
            assert_eq!(r.reason, "LimitsExceeded", "{limits}: {r:?}");
            assert!(r.message.contains(says), "{limits}: {}", r.message);
            assert!(r.message.contains("[dynamic.max_grants]"), "{}", r.message);
        }
        // At the ceiling is within it; the operator raises a ceiling in conductor.toml.
        admit(
            "works",
            &spec(json!({ "limits": { "kv_keys": 10_000, "memory": 67108864 } })),
            &config(""),
        )
        .unwrap();
        let raised = config("[dynamic.max_grants]\nkv_bytes = \"1GiB\"\ncall_timeout = \"1m\"\n");
        admit(
            "works",
            &spec(json!({ "limits": { "kv_bytes": "512MiB", "call_timeout": "30s" } })),
            &raised,
        )
        .unwrap();
        // A typo in a limit's name is an invalid spec, not a limit.
        let r = admit("works", &spec(json!({ "limits": { "kv_key": 1 } })), &config("")).unwrap_err();
        assert_eq!(r.reason, "InvalidSpec", "{r:?}");
    }

    #[test]
    fn an_unknown_grant_is_an_invalid_spec() {
        let r = admit("works", &spec(json!({ "grants": ["emit", "telepathy"] })), &config("")).unwrap_err();
        assert_eq!(r.reason, "InvalidSpec", "{r:?}");
        assert!(
            r.message.contains("spec.grants[1]: \"telepathy\" is not a capability"),
            "{}",
            r.message
        );
    }

    #[test]
    fn kube_resources_must_be_within_the_operators_verbs() {
        let c = config(
            "[dynamic.max_grants]\ngrants = [\"emit\", \"kube\"]\nkube_resources = [{ resource = \"configmaps\", verbs = [\"get\", \"list\", \"watch\"] }]\n",
        );
        let read =
            json!({ "grants": ["kube"], "kube_resources": [{ "resource": "configmaps", "verbs": ["get", "watch"] }] });
        admit("works", &spec(read), &c).unwrap();
        let write =
            json!({ "grants": ["kube"], "kube_resources": [{ "resource": "configmaps", "verbs": ["get", "delete"] }] });
        let r = admit("works", &spec(write), &c).unwrap_err();
        assert!(
            r.message.contains("spec.kube_resources[0]: configmaps"),
            "{}",
            r.message
        );
        let every_verb = json!({ "grants": ["kube"], "kube_resources": ["configmaps"] });
        assert_eq!(
            admit("works", &spec(every_verb), &c).unwrap_err().reason,
            "GrantsExceeded"
        );
    }

    #[test]
    fn files_of_the_host_names_and_sources_taken_and_unknown_keys_are_refused() {
        let local = json!({ "file": "works.wasm" });
        assert_eq!(
            admit("works", &spec(local.clone()), &config("")).unwrap_err().reason,
            "FileNotAllowed"
        );
        let c = config("[dynamic]\nallow_plugin_folder = true\n");
        admit("works", &spec(local), &c).unwrap();
        assert_eq!(
            admit("works", &spec(json!({ "file": "../etc/x.wasm" })), &c)
                .unwrap_err()
                .reason,
            "FileNotAllowed"
        );
        let tag = json!({ "file": "oci://registry.example/plugins/works:v1" });
        assert!(
            admit("works", &spec(tag), &config(""))
                .unwrap_err()
                .message
                .contains("not pinned by digest")
        );

        let taken = config("[plugins.mem]\nkind = \"memory\"\n[routes]\nworks = \"mem\"\n");
        let r = admit("works", &spec(json!({})), &taken).unwrap_err();
        assert_eq!(
            (r.reason, r.message.contains("already served by plugin \"mem\"")),
            ("SourceTaken", true),
            "{r:?}"
        );
        assert_eq!(
            admit("mem", &spec(json!({ "sources": ["other"] })), &taken)
                .unwrap_err()
                .reason,
            "NameTaken"
        );

        let r = admit("works", &spec(json!({ "blobs": { "x": "/etc/passwd" } })), &config("")).unwrap_err();
        assert_eq!(r.reason, "InvalidSpec");
        assert!(r.message.contains("unknown field `blobs`"), "{}", r.message);
    }

    #[test]
    fn an_artifact_outside_the_allowed_registries_is_refused() {
        let c = config("[oci]\nregistries = [\"registry.example/plugins/\"]\n");
        admit("works", &spec(json!({})), &c).unwrap();
        let elsewhere = json!({ "file": format!("oci://evil.example/plugins/works@{DIGEST}") });
        let r = admit("works", &spec(elsewhere), &c).unwrap_err();
        assert_eq!(r.reason, "RegistryNotAllowed", "{r:?}");
        assert!(
            r.message.contains("evil.example/plugins/works is not in a registry"),
            "{}",
            r.message
        );
    }

    #[test]
    fn the_operators_key_is_required_of_every_resource() {
        let c = config("[dynamic]\nverify = { public_key_file = \"cosign.pub\" }\n");
        let a = admit("works", &spec(json!({})), &c).unwrap();
        assert_eq!(
            a.plugin.verify.unwrap().public_key_file,
            std::path::PathBuf::from("cosign.pub")
        );
    }
}
