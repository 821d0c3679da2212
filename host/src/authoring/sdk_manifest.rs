//! The Rust SDK's manifest as a crate of its own, for `conductor plugins new` to carry
//! (`authoring::sdk`): `plugin-sdk/Cargo.toml` inherits from conductor's workspace, which a project
//! does not have. `host/build.rs` runs it on the two manifests (this file is its module too).

const SDK: &str = "plugin-sdk/Cargo.toml";

/// The SDK's manifest as a crate outside the workspace builds it: each `workspace = true`
/// resolved from the root manifest's `[workspace.package]` and `[workspace.dependencies]` (a
/// dependency's own features added to the workspace's), without `[lints]` and the
/// dev-dependencies (the SDK's own tests are not carried).
pub fn standalone(sdk: &str, root: &str) -> Result<String, String> {
    use toml::{Table, Value};
    let mut manifest: Table = toml::from_str(sdk).map_err(|e| format!("{SDK}: {e}"))?;
    let root: Table = toml::from_str(root).map_err(|e| format!("Cargo.toml: {e}"))?;
    let workspace = |key: &str| {
        root.get("workspace")
            .and_then(|w| w.get(key))
            .and_then(Value::as_table)
            .cloned()
            .unwrap_or_default()
    };
    let (package, dependencies) = (workspace("package"), workspace("dependencies"));

    manifest.remove("lints");
    manifest.remove("dev-dependencies");
    let fields = manifest
        .get_mut("package")
        .and_then(Value::as_table_mut)
        .ok_or(format!("{SDK}: no [package]"))?;
    for (key, value) in fields.iter_mut().filter(|(_, v)| inherits(v)) {
        *value = package
            .get(key)
            .cloned()
            .ok_or_else(|| format!("{SDK}: package.{key}: no {key} in [workspace.package] of Cargo.toml"))?;
    }
    const KINDS: [&str; 2] = ["dependencies", "build-dependencies"];
    for kind in KINDS {
        if let Some(table) = manifest.get_mut(kind).and_then(Value::as_table_mut) {
            resolve_dependencies(kind, table, &dependencies)?;
        }
    }
    if let Some(targets) = manifest.get_mut("target").and_then(Value::as_table_mut) {
        for (cfg, platform) in targets.iter_mut() {
            let Some(platform) = platform.as_table_mut() else {
                continue;
            };
            platform.remove("dev-dependencies");
            for kind in KINDS {
                if let Some(table) = platform.get_mut(kind).and_then(Value::as_table_mut) {
                    resolve_dependencies(&format!("target.{cfg}.{kind}"), table, &dependencies)?;
                }
            }
        }
        // A platform that had dev-dependencies only.
        targets.retain(|_, platform| platform.as_table().is_none_or(|t| !t.is_empty()));
        if targets.is_empty() {
            manifest.remove("target");
        }
    }

    // [package] first, as manifests have it.
    let package = Table::from_iter(manifest.remove_entry("package"));
    Ok(format!(
        "# conductor's plugin-sdk/Cargo.toml as a crate of its own, as `conductor plugins new` writes it:\n\
         # what it inherits written out, without its lints and dev-dependencies.\n\n{}\n{}",
        toml::to_string(&package).map_err(|e| e.to_string())?,
        toml::to_string(&manifest).map_err(|e| e.to_string())?,
    ))
}

/// `{ workspace = true }`.
fn inherits(value: &toml::Value) -> bool {
    value.get("workspace").and_then(toml::Value::as_bool) == Some(true)
}

/// Resolves each dependency of `table` that the workspace declares; refuses a path or git one.
fn resolve_dependencies(kind: &str, table: &mut toml::Table, workspace: &toml::Table) -> Result<(), String> {
    use toml::Value;
    for (name, dependency) in table.iter_mut() {
        if inherits(dependency) {
            let mut resolved = match workspace.get(name) {
                Some(Value::String(version)) => {
                    toml::Table::from_iter([("version".to_owned(), Value::String(version.clone()))])
                }
                Some(Value::Table(t)) => t.clone(),
                _ => {
                    return Err(format!(
                        "{SDK}: {kind}.{name}: not in [workspace.dependencies] of Cargo.toml"
                    ));
                }
            };
            let own = dependency.as_table().into_iter().flatten();
            for (key, value) in own.filter(|(k, _)| *k != "workspace") {
                match (resolved.get_mut(key), value) {
                    (Some(Value::Array(features)), Value::Array(more)) if key == "features" => {
                        for feature in more {
                            if !features.contains(feature) {
                                features.push(feature.clone());
                            }
                        }
                    }
                    _ => {
                        resolved.insert(key.clone(), value.clone());
                    }
                }
            }
            *dependency = match resolved.get("version") {
                Some(Value::String(version)) if resolved.len() == 1 => Value::String(version.clone()),
                _ => Value::Table(resolved),
            };
        }
        if dependency.get("path").is_some() || dependency.get("git").is_some() {
            return Err(format!(
                "{SDK}: {kind}.{name}: a path or git dependency, which cannot be carried"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOT: &str = r#"
[workspace.package]
edition = "2024"
license = "Apache-2.0"

[workspace.dependencies]
serde = { version = "1", features = ["derive"] }
thiserror = "2"
chrono = { version = "0.4", default-features = false, features = ["std"] }
"#;

    fn standalone_table(sdk: &str) -> Result<toml::Table, String> {
        let text = standalone(sdk, ROOT)?;
        assert!(!text.contains("workspace"), "{text}");
        Ok(toml::from_str(&text).expect("it is TOML"))
    }

    #[test]
    fn what_the_sdk_inherits_is_written_out_and_its_lints_and_own_tests_are_dropped() {
        let manifest = standalone_table(
            r#"
[package]
name = "sdk"
version = "0.6.4"
edition.workspace = true
license.workspace = true

[dependencies]
postcard = { version = "1", features = ["alloc"] }
thiserror.workspace = true
serde = { workspace = true, features = ["rc", "derive"], optional = true }

[target.'cfg(target_arch = "wasm32")'.dependencies]
chrono.workspace = true

[target.'cfg(unix)'.dev-dependencies]
chrono.workspace = true

[build-dependencies]
chrono = { workspace = true, features = ["clock"] }

[dev-dependencies]
sdk = { path = ".", features = ["fakes"] }

[lints]
workspace = true
"#,
        )
        .unwrap();
        let expected: toml::Table = toml::from_str(
            r#"
[package]
name = "sdk"
version = "0.6.4"
edition = "2024"
license = "Apache-2.0"

[dependencies]
postcard = { version = "1", features = ["alloc"] }
thiserror = "2"
serde = { version = "1", features = ["derive", "rc"], optional = true }

[target.'cfg(target_arch = "wasm32")'.dependencies]
chrono = { version = "0.4", default-features = false, features = ["std"] }

[build-dependencies]
chrono = { version = "0.4", default-features = false, features = ["std", "clock"] }
"#,
        )
        .unwrap();
        assert_eq!(manifest, expected);
    }

    #[test]
    fn what_cannot_be_resolved_or_carried_is_refused_naming_it() {
        for (sdk, expected) in [
            (
                "[package]\nname = \"sdk\"\nrust-version.workspace = true\n",
                "plugin-sdk/Cargo.toml: package.rust-version: no rust-version in [workspace.package] of Cargo.toml",
            ),
            (
                "[package]\nname = \"sdk\"\n[dependencies]\nuuid.workspace = true\n",
                "plugin-sdk/Cargo.toml: dependencies.uuid: not in [workspace.dependencies] of Cargo.toml",
            ),
            (
                "[package]\nname = \"sdk\"\n[target.'cfg(unix)'.dependencies]\nother = { path = \"../other\" }\n",
                "plugin-sdk/Cargo.toml: target.cfg(unix).dependencies.other: a path or git dependency, which cannot be carried",
            ),
            ("[dependencies]\n", "plugin-sdk/Cargo.toml: no [package]"),
        ] {
            assert_eq!(standalone_table(sdk).unwrap_err(), expected);
        }
    }

    #[test]
    fn the_manifest_starts_with_its_package() {
        let text = standalone("[dependencies]\n[package]\nname = \"sdk\"\n", ROOT).unwrap();
        let body: Vec<&str> = text.lines().filter(|l| !l.is_empty() && !l.starts_with('#')).collect();
        assert_eq!(body, ["[package]", "name = \"sdk\"", "[dependencies]"]);
    }
}
