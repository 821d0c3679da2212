//! `conductor plugins inspect FILE`: what a plugin file declares, read without loading it.

use std::path::Path;

use super::FileKind;
use super::distribute::describe;
use crate::commands::runtime;
use crate::config::PluginKind;
use crate::plugins::PluginFile;

/// `conductor plugins inspect FILE [--kind KIND]`: the form is guessed from the file name when
/// not given.
pub fn inspect(file: &Path, kind: Option<FileKind>) -> anyhow::Result<()> {
    let kind = match kind {
        Some(FileKind::Component) => PluginKind::Component,
        Some(FileKind::Native) => PluginKind::Native,
        None if file.extension().is_some_and(|e| e == "wasm") => PluginKind::Component,
        None => PluginKind::Native,
    };
    crate::plugins::wasm::set_compile_cache(crate::config::default_compile_cache());
    let f = runtime()?.block_on(PluginFile::read(kind, file, None))?;
    print!("{}", describe(&f));
    Ok(())
}
