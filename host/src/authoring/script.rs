//! The scripted agent conversation `conductor plugins test FILE` replays: which plugin, loaded
//! how, and the calls an agent makes with what each should answer.
//!
//! ```toml
//! conductor = "conductor.toml"   # the plugin's table is read from here, as `serve` reads it…
//! plugin = "demo"                # …under [plugins.demo] (or an inline [plugin] table instead)
//!
//! [agent]
//! cluster = "cluster1"           # the default; data_type defaults to the plugin's first
//!
//! [[step]]
//! call = "resync"
//! expect = { events = 1 }
//!
//! [[step]]
//! call = "status"                # a status update for the resource the last resync named `web`
//! resource = "web"
//! status = { conditions = [{ type = "Applied", status = "True" }] }
//! expect = { kv_keys = ["status/cluster1/web"] }
//!
//! [[step]]
//! call = "delete"                # the agent reports the resource deleted (Deleted=True)
//! resource = "web"
//! expect = { kv_keys = [] }
//! ```

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::config::{PluginConfig, PluginKind};

/// Why a script cannot be replayed: the file, the key and the reason.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {key}: {reason}", path.display())]
    Invalid { path: PathBuf, key: String, reason: String },
}

/// A script, read and checked.
#[derive(Debug, Clone)]
pub struct Script {
    pub path: PathBuf,
    /// The plugin's name (its `[plugins.<name>]` key, or the inline table's `name`).
    pub name: String,
    /// The plugin's table, as `conductor.toml` has it.
    pub plugin: PluginConfig,
    /// The plugin file, resolved.
    pub file: PathBuf,
    /// Where compiled components are kept (the configuration's `compile_cache`, or the default).
    pub compile_cache: Option<PathBuf>,
    pub agent: Agent,
    pub steps: Vec<Step>,
}

/// Who the conversation is with.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Agent {
    /// The managed cluster the agent serves.
    #[serde(default = "default_cluster")]
    pub cluster: String,
    /// The data type of its calls; default: the plugin's first.
    pub data_type: Option<String>,
    /// The user the agent authenticates as (`system:anonymous` by default, as with no
    /// authenticator).
    #[serde(default = "default_user")]
    pub user: String,
    /// Its groups.
    #[serde(default)]
    pub groups: Vec<String>,
}

impl Default for Agent {
    fn default() -> Self {
        Self {
            cluster: default_cluster(),
            data_type: None,
            user: default_user(),
            groups: vec![],
        }
    }
}

fn default_cluster() -> String {
    "cluster1".to_owned()
}

fn default_user() -> String {
    "system:anonymous".to_owned()
}

/// What an agent does in one step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Call {
    /// A spec resync: `list` for the cluster and data type.
    Resync,
    /// A status update (`<data type>.status.update_request`): `handle`.
    Status,
    /// A status update reporting the resource deleted (the condition `Deleted=True`, what a work
    /// agent sends once it removed the resource): `handle`.
    Delete,
    /// A timer the plugin set goes off: `on-events` with that timer.
    Timer,
}

impl Call {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Resync => "resync",
            Self::Status => "status",
            Self::Delete => "delete",
            Self::Timer => "timer",
        }
    }
}

/// One call and what it should answer.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    pub call: Call,
    /// Another cluster than the agent's.
    pub cluster: Option<String>,
    /// Another data type than the agent's.
    pub data_type: Option<String>,
    /// The resource a status is about: the name (`metadata.name`) of one the last resync listed.
    pub resource: Option<String>,
    /// The resource a status is about, by its id (`resourceid`).
    pub resource_id: Option<String>,
    /// The status the agent reports (sent as JSON).
    pub status: Option<toml::Value>,
    /// The status's data as it is, instead of `status` (to send something malformed).
    pub data: Option<String>,
    /// The timer that goes off (`call = "timer"`).
    pub timer: Option<String>,
    /// What the call should answer; by default, success.
    #[serde(default)]
    pub expect: Expect,
}

/// What a step should answer. Every field given is checked; none given: the call succeeds.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// The error's kind (`invalid`, `not-found`, `unavailable`, `internal`, …); absent: success.
    pub error: Option<String>,
    /// Text the error's message contains.
    pub message: Option<String>,
    /// How many events a resync answers.
    pub events: Option<usize>,
    /// The names (`metadata.name`, else `resourceid`) of the events a resync answers, in order.
    pub names: Option<Vec<String>>,
    /// Every key the plugin holds in `kv` after the call.
    pub kv_keys: Option<BTreeSet<String>>,
    /// How many events the plugin emitted during the call.
    pub emitted: Option<usize>,
}

/// The file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    /// A configuration file holding the plugin's table (relative to the script).
    conductor: Option<PathBuf>,
    /// The plugin's name in it.
    plugin: Option<String>,
    #[serde(default)]
    agent: Agent,
    #[serde(default)]
    step: Vec<Step>,
}

/// An inline `[plugin]` table: `[plugins.<name>]` of `conductor.toml`, with the name.
#[derive(Debug, Deserialize)]
struct Inline {
    name: String,
    #[serde(flatten)]
    table: toml::Table,
}

const KNOWN_ERRORS: [&str; 9] = [
    "status",
    "not-found",
    "already-exists",
    "conflict",
    "invalid",
    "denied",
    "unavailable",
    "database",
    "internal",
];

impl Script {
    /// Reads and checks the script at `path`.
    pub fn load(path: &Path) -> Result<Self, ScriptError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScriptError::Read {
            path: path.to_owned(),
            source,
        })?;
        let invalid = |key: &str, reason: String| ScriptError::Invalid {
            path: path.to_owned(),
            key: key.to_owned(),
            reason,
        };
        let value: toml::Table = toml::from_str(&text).map_err(|e| invalid("", e.message().to_owned()))?;
        let mut value = value;
        // `plugin` is either a name (with `conductor`) or the plugin's table.
        let inline = match value.get("plugin") {
            Some(toml::Value::Table(_)) => value.remove("plugin"),
            _ => None,
        };
        let file: File = serde_path_to_error::deserialize(toml::Value::Table(value)).map_err(|e| {
            let key = e.path().to_string();
            invalid(if key == "." { "" } else { &key }, e.into_inner().message().to_owned())
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        let (name, plugin, file_path, compile_cache) = match (inline, &file.conductor, &file.plugin) {
            (Some(table), None, None) => {
                let inline: Inline = serde_path_to_error::deserialize(table)
                    .map_err(|e| invalid(&format!("plugin.{}", e.path()), e.into_inner().message().to_owned()))?;
                let plugin: PluginConfig = serde_path_to_error::deserialize(toml::Value::Table(inline.table))
                    .map_err(|e| invalid(&format!("plugin.{}", e.path()), e.into_inner().message().to_owned()))?;
                plugin
                    .validate("plugin", &Default::default())
                    .map_err(|(key, reason)| invalid(&key, reason))?;
                let file = plugin
                    .file
                    .as_ref()
                    .map(|f| base.join(f))
                    .ok_or_else(|| invalid("plugin.file", "required".to_owned()))?;
                (inline.name, plugin, file, crate::config::default_compile_cache())
            }
            (None, Some(conductor), Some(name)) => {
                let loaded = crate::config::Config::load(&base.join(conductor), None)
                    .map_err(|e| invalid("conductor", e.to_string()))?;
                let plugin = loaded.config.plugins.get(name).cloned().ok_or_else(|| {
                    let known: Vec<&String> = loaded.config.plugins.keys().collect();
                    invalid(
                        "plugin",
                        format!("no [plugins.{name}] in {} (it has {known:?})", conductor.display()),
                    )
                })?;
                let file = loaded.plugin_file(&plugin).ok_or_else(|| {
                    invalid(
                        "plugin",
                        format!(
                            "[plugins.{name}] is the built-in {:?} source: it has no file to test",
                            plugin.kind
                        ),
                    )
                })?;
                let cache = loaded.compile_cache();
                (name.clone(), plugin, file, cache)
            }
            (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
                return Err(invalid(
                    "plugin",
                    "either an inline [plugin] table or `conductor` and `plugin = \"<name>\"`, not both".to_owned(),
                ));
            }
            (None, None, _) | (None, Some(_), None) => {
                return Err(invalid(
                    "plugin",
                    "missing: name the plugin's table, `conductor = \"conductor.toml\"` and `plugin = \"<name>\"`, or write it inline as [plugin]".to_owned(),
                ));
            }
        };
        if plugin.kind == PluginKind::Memory {
            return Err(invalid(
                "plugin.kind",
                "the built-in memory source has nothing to test".to_owned(),
            ));
        }
        if file.step.is_empty() {
            return Err(invalid("step", "no [[step]]: nothing to replay".to_owned()));
        }
        for (i, step) in file.step.iter().enumerate() {
            step.check()
                .map_err(|(key, reason)| invalid(&format!("step[{i}].{key}"), reason))?;
        }
        Ok(Self {
            path: path.to_owned(),
            name,
            plugin,
            file: file_path,
            compile_cache,
            agent: file.agent,
            steps: file.step,
        })
    }
}

impl Step {
    /// What a step needs for its call, and what it must not have.
    fn check(&self) -> Result<(), (String, String)> {
        let fail = |key: &str, reason: &str| Err((key.to_owned(), reason.to_owned()));
        match self.call {
            Call::Status | Call::Delete => {
                if self.resource.is_none() && self.resource_id.is_none() {
                    return fail(
                        "resource",
                        "a status is about a resource: `resource` (the name of one the last resync listed) or `resource_id`",
                    );
                }
                if self.resource.is_some() && self.resource_id.is_some() {
                    return fail("resource_id", "`resource` or `resource_id`, not both");
                }
                if self.call == Call::Delete && (self.status.is_some() || self.data.is_some()) {
                    return fail("status", "a delete sends the Deleted condition: no `status` or `data`");
                }
                if self.status.is_some() && self.data.is_some() {
                    return fail("data", "`status` or `data`, not both");
                }
                if self.call == Call::Status && self.status.is_none() && self.data.is_none() {
                    return fail(
                        "status",
                        "what the agent reports: `status = { conditions = [...] }` (or `data`)",
                    );
                }
            }
            Call::Resync | Call::Timer => {
                for (key, given) in [
                    ("resource", self.resource.is_some()),
                    ("resource_id", self.resource_id.is_some()),
                    ("status", self.status.is_some()),
                    ("data", self.data.is_some()),
                ] {
                    if given {
                        return fail(key, &format!("a {} step takes no `{key}`", self.call.as_str()));
                    }
                }
            }
        }
        match (self.call, &self.timer) {
            (Call::Timer, None) => return fail("timer", "the name of the timer that goes off"),
            (Call::Timer, Some(_)) | (_, None) => {}
            (_, Some(_)) => return fail("timer", "only a `timer` step names a timer"),
        }
        if let Some(kind) = &self.expect.error
            && !KNOWN_ERRORS.contains(&kind.as_str())
        {
            return fail(
                "expect.error",
                &format!("unknown error {kind:?} (the contract's: {})", KNOWN_ERRORS.join(", ")),
            );
        }
        if self.expect.message.is_some() && self.expect.error.is_none() {
            return fail("expect.message", "a message is the error's: name the `error` too");
        }
        if self.call != Call::Resync && (self.expect.events.is_some() || self.expect.names.is_some()) {
            return fail("expect.events", "only a resync answers events");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<Script, ScriptError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plugin-test.toml");
        std::fs::write(&path, text).unwrap();
        Script::load(&path)
    }

    const INLINE: &str = r#"
[plugin]
name = "demo"
kind = "component"
file = "demo.wasm"
grants = ["log", "kv"]
config = { greeting = "hi" }
"#;

    #[test]
    fn an_inline_plugin_and_its_steps() {
        let s = load(&format!(
            "{INLINE}\n[[step]]\ncall = \"resync\"\nexpect = {{ events = 1 }}\n[[step]]\ncall = \"status\"\nresource = \"web\"\nstatus = {{ conditions = [] }}\n"
        ))
        .unwrap();
        assert_eq!(s.name, "demo");
        assert_eq!(s.plugin.grants, ["log", "kv"]);
        assert!(s.file.ends_with("demo.wasm"));
        assert_eq!(s.agent.cluster, "cluster1");
        assert_eq!(s.steps.len(), 2);
        assert_eq!(s.steps[0].expect.events, Some(1));
        assert_eq!(s.steps[1].call, Call::Status);
    }

    #[test]
    fn a_bad_script_names_the_key_at_fault() {
        for (steps, key, reason) in [
            ("", "step", "no [[step]]"),
            (
                "[[step]]\ncall = \"resinc\"",
                "step[0].call",
                "unknown variant `resinc`",
            ),
            (
                "[[step]]\ncall = \"status\"",
                "step[0].resource",
                "a status is about a resource",
            ),
            (
                "[[step]]\ncall = \"status\"\nresource = \"w\"",
                "step[0].status",
                "what the agent reports",
            ),
            ("[[step]]\ncall = \"timer\"", "step[0].timer", "the name of the timer"),
            (
                "[[step]]\ncall = \"resync\"\nexpect = { error = \"oops\" }",
                "step[0].expect.error",
                "unknown error \"oops\"",
            ),
            (
                "[[step]]\ncall = \"resync\"\nexpect = { colour = 1 }",
                "step[0].expect.colour",
                "unknown field `colour`",
            ),
            (
                "[[step]]\ncall = \"delete\"\nresource = \"w\"\nexpect = { events = 1 }",
                "step[0].expect.events",
                "only a resync",
            ),
        ] {
            let err = load(&format!("{INLINE}\n{steps}")).unwrap_err().to_string();
            assert!(
                err.contains(&format!(": {key}: ")) && err.contains(reason),
                "{steps:?}: {err}"
            );
            assert!(err.contains("plugin-test.toml"), "{err}");
        }
        let err = load("[[step]]\ncall = \"resync\"").unwrap_err().to_string();
        assert!(err.contains(": plugin: missing"), "{err}");
        let err = load(&INLINE.replace("grants = [\"log\", \"kv\"]", "grants = [\"lg\"]"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("plugin.grants[0]: unknown capability \"lg\""), "{err}");
    }

    #[test]
    fn the_plugin_can_come_from_a_configuration() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("conductor.toml"),
            "[server]\nplaintext = true\n[auth]\nauthenticators = []\nauthorization = \"allow-all\"\n[plugins.demo]\nkind = \"component\"\nfile = \"./demo.wasm\"\ngrants = [\"kv\"]\n",
        )
        .unwrap();
        let path = dir.path().join("t.toml");
        std::fs::write(
            &path,
            "conductor = \"conductor.toml\"\nplugin = \"demo\"\n[[step]]\ncall = \"resync\"\n",
        )
        .unwrap();
        let s = Script::load(&path).unwrap();
        assert_eq!(
            (s.name.as_str(), s.plugin.grants.as_slice()),
            ("demo", &["kv".to_owned()][..])
        );
        assert_eq!(s.file, dir.path().join("./demo.wasm"));
        std::fs::write(
            &path,
            "conductor = \"conductor.toml\"\nplugin = \"other\"\n[[step]]\ncall = \"resync\"\n",
        )
        .unwrap();
        let err = Script::load(&path).unwrap_err().to_string();
        assert!(err.contains("plugin: no [plugins.other] in conductor.toml"), "{err}");
    }
}
