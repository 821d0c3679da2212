//! `conductor plugins list`: what a configuration would load — each plugin found, read and its
//! grants checked, with its routes — or why not, one line per plugin.

use std::path::Path;

use crate::commands::{PluginFolder, load, runtime};
use crate::config::PluginKind;
use crate::errors::error_chain;
use crate::plugin_set::artifacts;

/// `conductor plugins list [--config FILE]`.
pub fn list(config: &Path, plugins: PluginFolder) -> anyhow::Result<()> {
    let loaded = load(config, plugins)?;
    runtime()?.block_on(async {
        for (name, plugin) in &loaded.config.plugins {
            if plugin.kind == PluginKind::Memory {
                println!(
                    "{name}: built-in {:?} source, routes {:?}",
                    plugin.kind,
                    loaded.config.sources_of(name)
                );
                continue;
            }
            let located = match artifacts::locate(&loaded, name).await {
                Ok(located) => located,
                Err(e) => {
                    println!("{name}: would NOT load: {e}");
                    continue;
                }
            };
            let file = &located.path;
            let read = located.read(plugin.kind).await;
            let checked = read.and_then(|f| f.check(&crate::plugins::grants(plugin).capabilities).map(|_| f));
            match checked {
                Ok(f) => println!(
                    "{name}: would load {} {} from {} (contract {}, sources {:?}, data types {:?}, capabilities {:?}, grants {:?})",
                    f.description.name,
                    f.description.version,
                    file.display(),
                    f.description.sdk_version,
                    f.description.sources,
                    f.description.data_types,
                    names(&f.capabilities),
                    plugin.grants
                ),
                Err(e) => println!("{name}: would NOT load {}: {}", file.display(), error_chain(&e)),
            }
        }
    });
    Ok(())
}

fn names(capabilities: &[conductor_plugin_sdk::Capability]) -> Vec<&'static str> {
    capabilities.iter().map(|c| c.name()).collect()
}
