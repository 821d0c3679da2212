//! The files of a new plugin project, per language, built into the binary (`templates/`), with
//! `{{name}}`-style placeholders the project's values replace.

use std::collections::BTreeMap;

/// A project's language.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    Rust,
    Python,
    Js,
}

impl Lang {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Rust => "rust",
            Self::Python => "python",
            Self::Js => "js",
        }
    }
}

/// One file of a project: where it goes, its text, whether it is a script to run.
pub struct Template {
    pub path: &'static str,
    pub text: &'static str,
    pub executable: bool,
}

macro_rules! template {
    ($path:literal, $file:literal) => {
        Template {
            path: $path,
            text: include_str!(concat!("templates/", $file)),
            executable: false,
        }
    };
    ($path:literal, $file:literal, executable) => {
        Template {
            path: $path,
            text: include_str!(concat!("templates/", $file)),
            executable: true,
        }
    };
}

/// The files of a `lang` project.
pub fn files(lang: Lang) -> Vec<Template> {
    let mut files = match lang {
        Lang::Rust => vec![
            template!("Cargo.toml", "rust/Cargo.toml.tmpl"),
            template!("src/lib.rs", "rust/src/lib.rs.tmpl"),
            template!("build.sh", "rust/build.sh", executable),
            template!("README.md", "rust/README.md"),
            template!(".gitignore", "rust/gitignore"),
        ],
        Lang::Python => vec![
            template!("src/app.py", "python/src/app.py"),
            template!("tests/test_app.py", "python/tests/test_app.py"),
            template!("requirements.txt", "python/requirements.txt"),
            template!("build.sh", "python/build.sh", executable),
            template!("README.md", "python/README.md"),
            template!(".gitignore", "python/gitignore"),
        ],
        Lang::Js => vec![
            template!("plugin.js", "js/plugin.js"),
            template!("plugin.test.js", "js/plugin.test.js"),
            template!("package.json", "js/package.json"),
            template!("build.sh", "js/build.sh", executable),
            template!("README.md", "js/README.md"),
            template!(".gitignore", "js/gitignore"),
        ],
    };
    files.push(template!("conductor.toml", "common/conductor.toml"));
    files.push(template!("plugin-test.toml", "common/plugin-test.toml"));
    files
}

/// The pinned componentize-py (`plugin-sdk/python/requirements.txt`), for the Python project's
/// build script to name.
pub fn componentize_py_pin() -> &'static str {
    include_str!("../../../plugin-sdk/python/requirements.txt")
        .lines()
        .find_map(|l| l.trim().strip_prefix("componentize-py=="))
        .unwrap_or("")
}

/// A placeholder left in `rendered`, if any (`{{name}}`).
pub fn leftover(rendered: &str) -> Option<&str> {
    let start = rendered.find("{{")?;
    let end = rendered[start..].find("}}").map_or(rendered.len(), |e| start + e + 2);
    Some(&rendered[start..end])
}

/// `text` with every `{{key}}` replaced by its value.
pub fn render(text: &str, values: &BTreeMap<&str, String>) -> String {
    let mut out = text.to_owned();
    for (key, value) in values {
        out = out.replace(&format!("{{{{{key}}}}}"), value);
    }
    out
}
