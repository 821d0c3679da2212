//! `conductor plugins new`, `conductor plugins test` and `conductor plugins tools install`: what
//! plugin authors run, on [`crate::authoring`].

use std::path::{Path, PathBuf};

use crate::authoring::new::{self, Lang};
use crate::authoring::tools::{self, ToolsLang};
use crate::commands::runtime;

/// `conductor plugins new NAME --lang LANG`: writes the project into `dir` (default: ./NAME).
pub fn new_plugin(name: String, lang: Lang, dir: Option<PathBuf>, sdk_path: Option<PathBuf>) -> anyhow::Result<()> {
    let dir = dir.unwrap_or_else(|| PathBuf::from(&name));
    let created = new::create(&new::NewProject {
        name,
        lang,
        dir,
        sdk_path,
    })?;
    print!("{}", new::next_steps(&created, lang));
    Ok(())
}

/// `conductor plugins tools install --lang LANG`.
pub fn install_tools(lang: ToolsLang, dir: Option<PathBuf>) -> anyhow::Result<()> {
    let installed = tools::install(lang, dir.as_deref())?;
    let default = dir.is_none() || dir == tools::default_dir();
    print!("{}", tools::report(&installed, default));
    Ok(())
}

/// `conductor plugins test FILE`: fails when a call answers otherwise than the script expects.
pub fn test_plugin(file: &Path) -> anyhow::Result<()> {
    if runtime()?.block_on(crate::authoring::test_plugin(file))? {
        Ok(())
    } else {
        anyhow::bail!("{}: a call answered otherwise than the script expects", file.display())
    }
}
