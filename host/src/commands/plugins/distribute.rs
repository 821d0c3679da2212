//! `conductor plugins push` and `conductor plugins pull`: a built component published to a
//! registry in the layout conductor loads (and signed, if asked), and an artifact fetched and
//! described without loading it.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

use super::RegistryArgs;
use crate::commands::runtime;
use crate::config::PluginKind;
use crate::oci::{self, ArtifactReference, PublicKey, RegistryOptions, SigningKey, artifact};
use crate::plugins::PluginFile;

/// Annotations of conductor's own on the manifests it pushes.
pub const PLUGIN_NAME: &str = "io.open-cluster-management.conductor.plugin";
pub const CONTRACT: &str = "io.open-cluster-management.conductor.contract";

/// `conductor plugins push FILE REFERENCE`.
pub fn push(file: &Path, reference: &str, sign_key: Option<&Path>, registry: RegistryArgs) -> anyhow::Result<()> {
    crate::plugins::wasm::set_compile_cache(crate::config::default_compile_cache());
    let out = runtime()?.block_on(publish(file, reference, &registry.options(), sign_key))?;
    print!("{out}");
    Ok(())
}

/// `conductor plugins pull REFERENCE`.
pub fn pull(
    reference: &str,
    verify_key: Option<&Path>,
    cache: Option<PathBuf>,
    registry: RegistryArgs,
) -> anyhow::Result<()> {
    crate::plugins::wasm::set_compile_cache(crate::config::default_compile_cache());
    let cache = cache
        .or_else(crate::config::default_oci_cache)
        .ok_or_else(|| anyhow::anyhow!("no cache folder: give --cache (neither XDG_CACHE_HOME nor HOME is set)"))?;
    let out = runtime()?.block_on(fetch(reference, &cache, &registry.options(), verify_key))?;
    print!("{out}");
    Ok(())
}

/// Publishes `file` (a component) under `reference`; says the digest and the reference to load.
pub async fn publish(
    file: &Path,
    reference: &str,
    options: &RegistryOptions,
    sign_key: Option<&Path>,
) -> anyhow::Result<String> {
    let reference = ArtifactReference::parse(reference).map_err(anyhow::Error::msg)?;
    let signer = match sign_key {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
            Some(SigningKey::from_pem(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?)
        }
        None => None,
    };
    // Only a plugin is published: the file must describe itself as one.
    let described = PluginFile::read(PluginKind::Component, file, None).await?;
    let d = &described.description;
    let contract = |interface: &str| format!("conductor:plugin/{interface}@{}", d.sdk_version);
    let contents = oci::push::PushContents {
        component: std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?,
        title: file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "plugin.wasm".into()),
        imports: described.capabilities.iter().map(|c| contract(c.name())).collect(),
        exports: vec![contract("plugin")],
        annotations: BTreeMap::from([
            (artifact::VERSION.to_owned(), d.version.clone()),
            (PLUGIN_NAME.to_owned(), d.name.clone()),
            (CONTRACT.to_owned(), d.sdk_version.clone()),
        ]),
    };
    let pushed = oci::push::push(contents, &reference, options, signer.as_ref()).await?;
    let mut out = String::new();
    writeln!(out, "pushed:    {reference}")?;
    writeln!(out, "plugin:    {} {} (contract {})", d.name, d.version, d.sdk_version)?;
    writeln!(out, "digest:    {}", pushed.digest)?;
    if pushed.signed {
        writeln!(out, "signature: {}", oci::signature::signature_tag(&pushed.digest))?;
    }
    writeln!(out, "load it with: file = \"{}\"", pushed.pinned)?;
    Ok(out)
}

/// Fetches the artifact `reference` pins into `cache` (verifying its signature with the key in
/// `verify_key`, if given) and describes the plugin it holds.
pub async fn fetch(
    reference: &str,
    cache: &Path,
    options: &RegistryOptions,
    verify_key: Option<&Path>,
) -> anyhow::Result<String> {
    let reference = ArtifactReference::parse_pinned(reference).map_err(anyhow::Error::msg)?;
    let key = match verify_key {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
            Some(PublicKey::from_pem(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?)
        }
        None => None,
    };
    let fetched = oci::fetch(&reference, cache, options, key.as_ref()).await?;
    let described = PluginFile::read(PluginKind::Component, &fetched.path, Some(&fetched.layer_digest)).await?;
    let mut out = String::new();
    writeln!(out, "reference:     {reference}")?;
    writeln!(
        out,
        "component:     {} ({})",
        fetched.layer_digest,
        fetched.path.display()
    )?;
    let signed = match &fetched.verified_with {
        Some(fingerprint) => format!("verified with the key {fingerprint}"),
        None => "not checked (no --verify-key)".to_owned(),
    };
    writeln!(out, "signature:     {signed}")?;
    for (k, v) in &fetched.annotations {
        writeln!(out, "annotation:    {k}={v}")?;
    }
    out.push_str(&describe(&described));
    Ok(out)
}

/// What a plugin file declares, as `plugins inspect` prints it.
pub fn describe(f: &PluginFile) -> String {
    let d = &f.description;
    let from = match f.kind {
        PluginKind::Component => "read from its imports",
        _ => "declared",
    };
    let capabilities: Vec<&str> = f.capabilities.iter().map(|c| c.name()).collect();
    let mut out = String::new();
    let _ = writeln!(out, "file:          {}", f.path.display());
    let _ = writeln!(out, "kind:          {:?}", f.kind);
    let _ = writeln!(out, "name:          {}", d.name);
    let _ = writeln!(out, "version:       {}", d.version);
    let _ = writeln!(out, "contract:      conductor:plugin@{}", d.sdk_version);
    let _ = writeln!(out, "sources:       {}", d.sources.join(", "));
    let _ = writeln!(out, "data types:    {}", d.data_types.join(", "));
    let _ = writeln!(out, "capabilities:  {} ({from})", capabilities.join(", "));
    if d.concurrent_notifications > 1 {
        let _ = writeln!(
            out,
            "notifications: up to {} on-events calls at once (at most pool_size)",
            d.concurrent_notifications
        );
    }
    out
}

/// The registry options of a command line: the given files, else the user's Docker config.
pub fn command_line_options(auth_file: Option<PathBuf>, ca_file: Option<PathBuf>) -> RegistryOptions {
    let defaults = crate::config::OciConfig::default();
    RegistryOptions {
        auth_file: auth_file.or_else(oci::default_auth_file),
        ca_file,
        timeout: defaults.timeout.0,
        max_blob_size: defaults.max_plugin_size.0,
        ca_file_option: "--ca-file",
    }
}
