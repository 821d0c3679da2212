//! The SDK's packages carry the contract's version: the Rust crate's, the Python package's
//! (`conductor_sdk.__version__`, which pyproject.toml reads) and the npm package's
//! (`package.json`, and `CONTRACT` of `sdk.mjs`) must be `SDK_VERSION`, read from
//! `wit/plugin.wit`. Moving the contract fails this test until both packages move with it.

use std::path::PathBuf;

use conductor_plugin_sdk::SDK_VERSION;

fn read(path: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The string literal assigned to `name` on a line of its own (`name = "…"`, `name = '…';`).
fn assigned(text: &str, name: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let rest = l.trim().strip_prefix(name)?.trim_start().strip_prefix('=')?.trim();
        let quote = rest.chars().next().filter(|q| *q == '"' || *q == '\'')?;
        Some(rest[1..].split(quote).next()?.to_owned())
    })
}

#[test]
fn the_rust_crate_has_the_contracts_version() {
    assert_eq!(
        env!("CARGO_PKG_VERSION"),
        SDK_VERSION,
        "plugin-sdk/Cargo.toml: move the version with the contract"
    );
}

#[test]
fn the_python_package_has_the_contracts_version() {
    let init = read("python/src/conductor_sdk/__init__.py");
    assert_eq!(
        assigned(&init, "__version__").as_deref(),
        Some(SDK_VERSION),
        "python/src/conductor_sdk/__init__.py: move __version__ with the contract"
    );
    let pyproject = read("python/pyproject.toml");
    let project: toml_like::Doc = toml_like::parse(&pyproject);
    assert_eq!(
        project.get("project", "name").as_deref(),
        Some("\"conductor-plugin-sdk\"")
    );
    assert_eq!(
        project.get("project", "dynamic").as_deref(),
        Some("[\"version\"]"),
        "pyproject.toml takes its version from conductor_sdk.__version__"
    );
    assert_eq!(
        project.get("tool.setuptools.dynamic", "version").as_deref(),
        Some("{ attr = \"conductor_sdk.__version__\" }")
    );
}

#[test]
fn the_npm_package_has_the_contracts_version() {
    let package: serde_json::Value = serde_json::from_str(&read("js/package.json")).unwrap();
    assert_eq!(package["name"], "conductor-plugin-sdk");
    assert_eq!(
        package["version"], SDK_VERSION,
        "js/package.json: move the version with the contract"
    );
    let sdk = read("js/sdk.mjs");
    let contract = sdk
        .lines()
        .find_map(|l| l.strip_prefix("export const CONTRACT"))
        .and_then(|rest| assigned(&format!("CONTRACT{rest}"), "CONTRACT"));
    assert_eq!(
        contract.as_deref(),
        Some(SDK_VERSION),
        "js/sdk.mjs: move CONTRACT with the contract"
    );
}

/// Just enough TOML for pyproject.toml's `key = value` lines under `[table]` headers (the SDK has
/// no TOML dependency, and this test should not add one).
mod toml_like {
    pub struct Doc(Vec<(String, String, String)>);

    pub fn parse(text: &str) -> Doc {
        let mut table = String::new();
        let mut entries = vec![];
        for line in text.lines().map(str::trim) {
            if line.starts_with('#') || line.is_empty() {
                continue;
            }
            if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                table = name.to_owned();
            } else if let Some((key, value)) = line.split_once('=') {
                entries.push((table.clone(), key.trim().to_owned(), value.trim().to_owned()));
            }
        }
        Doc(entries)
    }

    impl Doc {
        pub fn get(&self, table: &str, key: &str) -> Option<String> {
            self.0
                .iter()
                .find(|(t, k, _)| t == table && k == key)
                .map(|(_, _, v)| v.clone())
        }
    }
}
