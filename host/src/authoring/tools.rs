//! `conductor plugins tools install --lang python|js [--dir DIR]`: the pinned tools that build a
//! Python or JavaScript plugin into a component, installed through the machine's own pip or npm
//! (its configured index, its proxy), one language per request and with no checkout of
//! conductor: the pins are built into the binary.
//!
//! - Python: componentize-py (`plugin-sdk/python/requirements.txt`), in a virtual environment
//!   `DIR/componentize-py-<pin>/`, made with `python3 -m venv` and its pip.
//! - JavaScript: componentize-js, jco and the rolldown jco brings (`plugin-sdk/js/tools/`:
//!   `package.json` and `package-lock.json`, whose integrity hashes npm checks), installed with
//!   `npm ci` in `DIR/js-plugin-tools-<pin>/`.
//!
//! `<pin>` is the first 12 hex digits of the SHA-256 of the pin files, as
//! `scripts/build-polyglot-plugins.sh --tools` names them, so the command and the script share
//! an install. A pin already installed is not installed again; a new one removes the installs of
//! earlier pins. The commands are linked in `DIR/bin/` (`componentize-py`; `componentize-js` and
//! `rolldown`), where the build scripts of `conductor plugins new` look by default. `DIR` is
//! `$XDG_CACHE_HOME/conductor/tools`, else `~/.cache/conductor/tools`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The languages with tools to install (a Rust plugin needs only its toolchain's target).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ToolsLang {
    Python,
    Js,
}

const PYTHON_PINS: &str = include_str!("../../../plugin-sdk/python/requirements.txt");
const JS_PACKAGE: &str = include_str!("../../../plugin-sdk/js/tools/package.json");
const JS_LOCK: &str = include_str!("../../../plugin-sdk/js/tools/package-lock.json");

/// Why the tools were not installed.
#[derive(Debug, thiserror::Error)]
pub enum ToolsError {
    #[error("no folder for the tools: neither XDG_CACHE_HOME nor HOME is set (name one with --dir)")]
    NoDir,
    #[error("{0} is needed to install them, and was not found on PATH")]
    Missing(&'static str),
    #[error("{command} failed ({status}); the output above says why")]
    Failed {
        command: String,
        status: std::process::ExitStatus,
    },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ToolsError + '_ {
    move |source| ToolsError::Io {
        path: path.to_owned(),
        source,
    }
}

/// One pinned install: its folder's name (before `-<pin>`), the pin files (name, contents), what
/// it pins (for people) and its commands.
struct Pins {
    folder: &'static str,
    files: Vec<(&'static str, &'static str)>,
    what: String,
    commands: Vec<Tool>,
}

/// A command of an install.
struct Tool {
    /// Its name in `DIR/bin/`.
    name: &'static str,
    /// Where it is in the install.
    path: &'static str,
    /// The variable the projects' build scripts read it from, elsewhere than `DIR/bin/`.
    variable: &'static str,
}

fn pins(lang: ToolsLang) -> Pins {
    match lang {
        ToolsLang::Python => Pins {
            folder: "componentize-py",
            files: vec![("requirements.txt", PYTHON_PINS)],
            what: PYTHON_PINS
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .collect::<Vec<_>>()
                .join(", "),
            commands: vec![Tool {
                name: "componentize-py",
                path: "bin/componentize-py",
                variable: "COMPONENTIZE_PY",
            }],
        },
        ToolsLang::Js => {
            let lock: serde_json::Value = serde_json::from_str(JS_LOCK).unwrap_or_default();
            let package: serde_json::Value = serde_json::from_str(JS_PACKAGE).unwrap_or_default();
            let mut what: Vec<String> = package["devDependencies"]
                .as_object()
                .into_iter()
                .flatten()
                .filter(|(name, _)| !name.ends_with("preview2-shim"))
                .map(|(name, version)| {
                    format!(
                        "{}=={}",
                        name.rsplit('/').next().unwrap_or(name),
                        version.as_str().unwrap_or("?")
                    )
                })
                .collect();
            if let Some(v) = lock["packages"]["node_modules/rolldown"]["version"].as_str() {
                what.push(format!("rolldown=={v}"));
            }
            Pins {
                folder: "js-plugin-tools",
                files: vec![("package.json", JS_PACKAGE), ("package-lock.json", JS_LOCK)],
                what: what.join(", "),
                commands: vec![
                    Tool {
                        name: "componentize-js",
                        path: "node_modules/.bin/componentize-js",
                        variable: "COMPONENTIZE_JS",
                    },
                    Tool {
                        name: "rolldown",
                        path: "node_modules/.bin/rolldown",
                        variable: "ROLLDOWN",
                    },
                ],
            }
        }
    }
}

impl Pins {
    /// The first 12 hex digits of the SHA-256 of the pin files, one after the other (what
    /// `cat FILES | sha256sum | cut -c1-12` prints).
    fn key(&self) -> String {
        let mut context = ring::digest::Context::new(&ring::digest::SHA256);
        for (_, text) in &self.files {
            context.update(text.as_bytes());
        }
        context.finish().as_ref()[..6]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

/// The default folder: `$XDG_CACHE_HOME/conductor/tools`, else `~/.cache/conductor/tools`.
pub fn default_dir() -> Option<PathBuf> {
    crate::config::cache_home().map(|c| c.join("tools"))
}

/// What was installed.
#[derive(Debug)]
pub struct Installed {
    /// The pins, for people (`componentize-py==0.25.1`).
    pub what: String,
    /// The install's folder.
    pub install: PathBuf,
    /// Installed now, or found installed.
    pub fresh: bool,
    /// Earlier pins' installs removed.
    pub removed: Vec<PathBuf>,
    /// The commands linked in `DIR/bin/`, with the variable build.sh reads for each.
    pub links: Vec<(&'static str, PathBuf)>,
}

/// Runs `command`, its output on the standard error; fails naming it unless it succeeds.
fn run(command: &mut Command) -> Result<(), ToolsError> {
    let shown = format!("{command:?}").replace('"', "");
    let status = command
        .stdin(Stdio::null())
        .stdout(Stdio::from(std::io::stderr()))
        .status()
        .map_err(|source| ToolsError::Io {
            path: PathBuf::from(command.get_program()),
            source,
        })?;
    if status.success() {
        Ok(())
    } else {
        Err(ToolsError::Failed { command: shown, status })
    }
}

/// Whether `program` is on PATH.
fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

/// Installs the tools of `lang` into `dir` (see the module's documentation).
pub fn install(lang: ToolsLang, dir: Option<&Path>) -> Result<Installed, ToolsError> {
    let root = match dir {
        Some(d) => d.to_owned(),
        None => default_dir().ok_or(ToolsError::NoDir)?,
    };
    let pins = pins(lang);
    let install = root.join(format!("{}-{}", pins.folder, pins.key()));
    let done = install.join(".installed");
    let fresh = !done.is_file();
    let mut removed = vec![];
    if fresh {
        let needed = match lang {
            ToolsLang::Python => "python3",
            ToolsLang::Js => "npm",
        };
        if !on_path(needed) {
            return Err(ToolsError::Missing(needed));
        }
        if install.exists() {
            // An install that did not finish.
            std::fs::remove_dir_all(&install).map_err(io(&install))?;
        }
        std::fs::create_dir_all(&install).map_err(io(&install))?;
        match lang {
            ToolsLang::Python => {
                run(Command::new("python3").arg("-m").arg("venv").arg(&install))?;
            }
            ToolsLang::Js => {}
        }
        for (name, text) in &pins.files {
            let path = install.join(name);
            std::fs::write(&path, text).map_err(io(&path))?;
        }
        match lang {
            ToolsLang::Python => run(Command::new(install.join("bin/pip"))
                .args(["install", "--quiet", "--disable-pip-version-check", "-r"])
                .arg(install.join("requirements.txt")))?,
            ToolsLang::Js => run(Command::new("npm")
                .args(["ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"])
                .current_dir(&install))?,
        }
        std::fs::write(&done, "").map_err(io(&done))?;
        // The installs of earlier pins.
        let prefix = format!("{}-", pins.folder);
        for entry in std::fs::read_dir(&root).map_err(io(&root))? {
            let path = entry.map_err(io(&root))?.path();
            let name = path.file_name().unwrap_or_default().to_string_lossy().into_owned();
            if path != install
                && path.is_dir()
                && name
                    .strip_prefix(&prefix)
                    .is_some_and(|k| k.len() == 12 && k.bytes().all(|b| b.is_ascii_hexdigit()))
            {
                std::fs::remove_dir_all(&path).map_err(io(&path))?;
                removed.push(path);
            }
        }
    }
    let bin = root.join("bin");
    std::fs::create_dir_all(&bin).map_err(io(&bin))?;
    let mut links = vec![];
    for tool in &pins.commands {
        let (name, target) = (tool.name, install.join(tool.path));
        let link = bin.join(name);
        if std::fs::read_link(&link).ok().as_deref() != Some(target.as_path()) {
            // A new link beside the old, then renamed over it: never a moment without one.
            let next = bin.join(format!(".{name}.new"));
            let _ = std::fs::remove_file(&next);
            std::os::unix::fs::symlink(&target, &next).map_err(io(&next))?;
            std::fs::rename(&next, &link).map_err(io(&link))?;
        }
        links.push((tool.variable, link));
    }
    Ok(Installed {
        what: pins.what,
        install,
        fresh,
        removed,
        links,
    })
}

/// What `plugins tools install` prints.
pub fn report(installed: &Installed, default: bool) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}: {} {}",
        installed.what,
        if installed.fresh {
            "installed in"
        } else {
            "already installed in"
        },
        installed.install.display()
    );
    for removed in &installed.removed {
        let _ = writeln!(out, "removed {} (an earlier pin)", removed.display());
    }
    for (_, link) in &installed.links {
        let _ = writeln!(out, "linked {}", link.display());
    }
    if !default {
        let _ = writeln!(out, "\nbuild.sh looks in the default folder; for these, export:");
        for (variable, link) in &installed.links {
            let _ = writeln!(out, "  export {variable}={}", link.display());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pins_are_the_sdks_and_keyed_as_the_script_keys_them() {
        let python = pins(ToolsLang::Python);
        assert_eq!(
            python.what,
            format!("componentize-py=={}", super::super::templates::componentize_py_pin())
        );
        let js = pins(ToolsLang::Js);
        assert!(
            js.what.contains("componentize-js==") && js.what.contains("jco==") && js.what.contains("rolldown=="),
            "{}",
            js.what
        );
        // `cat FILES | sha256sum | cut -c1-12`, as scripts/build-polyglot-plugins.sh names them.
        let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugin-sdk");
        for (p, files) in [
            (&python, vec![sdk.join("python/requirements.txt")]),
            (
                &js,
                vec![
                    sdk.join("js/tools/package.json"),
                    sdk.join("js/tools/package-lock.json"),
                ],
            ),
        ] {
            let mut bytes = vec![];
            for f in files {
                bytes.extend(std::fs::read(f).unwrap());
            }
            let digest = crate::oci::digest::sha256_digest(&bytes);
            assert_eq!(p.key(), digest["sha256:".len()..][..12]);
        }
    }
}
