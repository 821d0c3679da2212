//! `conductor plugins new NAME --lang rust|python|js`: a plugin project to start from, outside
//! the repository — the plugin (serving the ManifestWorks of its configuration, keeping what the
//! agents report in `kv`), a unit test against the SDK's fakes, a build script, a `conductor.toml`
//! that loads the built component and a `plugin-test.toml` for `conductor plugins test`.
//!
//! The SDK is a dependency of the project, which holds the SDK this conductor carries
//! ([`super::sdk`], of its contract's version) in `sdk/`: the crate's folder its `Cargo.toml`
//! names (a path dependency), the wheel its `requirements.txt` names, the npm package's folder its
//! `package.json` names (`file:`), so the SDK needs no registry and no checkout. With `--sdk-path
//! <conductor>/plugin-sdk`, each depends on the SDK of that checkout instead (a Cargo path
//! dependency, `pip install <sdk>/python`, an npm `file:` dependency on `<sdk>/js`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use conductor_plugin_sdk::SDK_VERSION;

use super::sdk as carried;
pub use super::templates::Lang;
use super::templates::{componentize_py_pin, files, leftover, render};

/// Why no project was written.
#[derive(Debug, thiserror::Error)]
pub enum NewError {
    #[error("invalid plugin name {name:?}: {reason}")]
    Name { name: String, reason: &'static str },
    #[error("{}: exists and is not empty; choose another folder (--dir)", .0.display())]
    Exists(PathBuf),
    #[error("--sdk-path {}: {reason}", path.display())]
    SdkPath { path: PathBuf, reason: String },
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// What to make.
#[derive(Debug, Clone)]
pub struct NewProject {
    pub name: String,
    pub lang: Lang,
    /// Where (default: `./<name>`).
    pub dir: PathBuf,
    /// The repository's `plugin-sdk` folder, for a dependency on it instead of a version.
    pub sdk_path: Option<PathBuf>,
}

/// What was written.
#[derive(Debug)]
pub struct Created {
    pub dir: PathBuf,
    pub files: Vec<PathBuf>,
}

/// A plugin name: the package's, the plugin's and the source's (lowercase letters, digits and
/// `-`, from a letter).
pub fn check_name(name: &str) -> Result<(), NewError> {
    let fail = |reason| {
        Err(NewError::Name {
            name: name.to_owned(),
            reason,
        })
    };
    if name.is_empty() || name.len() > 63 {
        return fail("from 1 to 63 characters");
    }
    if !name.starts_with(|c: char| c.is_ascii_lowercase()) {
        return fail("it must start with a lowercase letter");
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        return fail("lowercase letters, digits and `-` only");
    }
    if name.ends_with('-') || name.contains("--") {
        return fail("no `-` at the end, nor two in a row");
    }
    Ok(())
}

/// The SDK folder, checked: it holds the contract this conductor serves, and the package for
/// `lang`.
fn check_sdk(path: &Path, lang: Lang) -> Result<PathBuf, NewError> {
    let fail = |reason: String| NewError::SdkPath {
        path: path.to_owned(),
        reason,
    };
    let sdk = std::fs::canonicalize(path).map_err(|e| fail(e.to_string()))?;
    let wit = sdk.join("wit/plugin.wit");
    let text = std::fs::read_to_string(&wit).map_err(|e| {
        fail(format!(
            "no contract at {} ({e}): name the repository's plugin-sdk folder",
            wit.display()
        ))
    })?;
    let version = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("package conductor:plugin@")?.strip_suffix(';'))
        .ok_or_else(|| {
            fail(format!(
                "{} declares no `package conductor:plugin@<version>;`",
                wit.display()
            ))
        })?;
    if version != SDK_VERSION {
        return Err(fail(format!(
            "its contract is conductor:plugin@{version}, this conductor serves {SDK_VERSION}: use the plugin-sdk of this conductor's version"
        )));
    }
    let package = match lang {
        Lang::Rust => "Cargo.toml",
        Lang::Python => "python/pyproject.toml",
        Lang::Js => "js/package.json",
    };
    if !sdk.join(package).is_file() {
        return Err(fail(format!(
            "no {package} in it: name the repository's plugin-sdk folder"
        )));
    }
    Ok(sdk)
}

/// `path` as a `file://` URL (for pip's `name @ url` requirement).
fn file_url(path: &Path) -> String {
    let text = path.to_string_lossy();
    let escaped: String = text
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => char::from(b).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    format!("file://{escaped}")
}

fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_owned()).to_string()
}

/// The placeholders' values for `project` (with the SDK at `sdk`, if given).
fn values(project: &NewProject, sdk: Option<&Path>) -> BTreeMap<&'static str, String> {
    let snake = project.name.replace('-', "_");
    let wasm = format!("{snake}.wasm");
    let mut v = BTreeMap::new();
    v.insert("name", project.name.clone());
    v.insert("snake", snake);
    v.insert("contract", SDK_VERSION.to_owned());
    v.insert("componentize_py", componentize_py_pin().to_owned());
    v.insert(
        "limits",
        match project.lang {
            Lang::Rust => String::new(),
            Lang::Python => "# CPython in the component: 13 MiB of linear memory to load, ~7 MiB resident per instance.\nlimits = { memory = \"64MiB\", call_timeout = \"5s\" }\n".to_owned(),
            Lang::Js => "# SpiderMonkey in the component: its memory grows with each status it handles until the limit,\n# then a new instance takes over (see the plugin author's guide).\nlimits = { memory = \"128MiB\", call_timeout = \"5s\" }\n".to_owned(),
        },
    );
    v.insert(
        "capabilities_where",
        match project.lang {
            Lang::Rust => "wit-bindgen imports the capability functions the code calls".to_owned(),
            Lang::Python | Lang::Js => "CAPABILITIES in build.sh".to_owned(),
        },
    );
    let version = toml_string(SDK_VERSION);
    let crate_path = toml_string(&sdk.map_or(carried::PACKAGE_FOLDER.into(), |sdk| sdk.to_string_lossy()));
    v.insert(
        "sdk_dependency",
        format!("{{ version = {version}, path = {crate_path} }}"),
    );
    v.insert(
        "sdk_dependency_fakes",
        format!("{{ version = {version}, path = {crate_path}, features = [\"fakes\"] }}"),
    );
    match sdk {
        Some(sdk) => {
            v.insert(
                "sdk_requirement",
                format!("conductor-plugin-sdk @ {}", file_url(&sdk.join("python"))),
            );
            v.insert(
                "sdk_npm",
                serde_json::Value::String(format!("file:{}", sdk.join("js").display())).to_string(),
            );
            let note = format!(", from the SDK at `{}` (`plugins new --sdk-path`)", sdk.display());
            v.insert("sdk_note", note.clone());
            v.insert(
                "requirement_note",
                format!(
                    ";\n# installed from the checkout at {} (`plugins new --sdk-path`).",
                    sdk.display()
                ),
            );
        }
        None => {
            v.insert("sdk_requirement", format!("./sdk/{}", carried::wheel_name()));
            v.insert(
                "sdk_npm",
                serde_json::Value::String(format!("file:{}", carried::PACKAGE_FOLDER)).to_string(),
            );
            v.insert(
                "sdk_note",
                match project.lang {
                    Lang::Rust => format!(
                        ", version {SDK_VERSION}: the crate in `{}/`, which `conductor plugins new` wrote from the conductor binary (no checkout; its own dependencies come as any crate's)",
                        carried::PACKAGE_FOLDER
                    ),
                    Lang::Python => format!(
                        ", version {SDK_VERSION}: the wheel in `sdk/`, which `conductor plugins new` wrote from the conductor binary (no registry, no network)"
                    ),
                    Lang::Js => format!(
                        ", version {SDK_VERSION}: the package in `{}/`, which `conductor plugins new` wrote from the conductor binary (no registry, no network)",
                        carried::PACKAGE_FOLDER
                    ),
                },
            );
            v.insert(
                "requirement_note",
                ";\n# the wheel conductor carries, written into sdk/ by `conductor plugins new`: no registry needed."
                    .to_owned(),
            );
        }
    }
    v.insert("wasm", wasm);
    v
}

/// Writes `bytes` to `path`, its folder made first; a command is made executable.
fn write_file(path: &Path, bytes: &[u8], executable: bool) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, bytes)?;
    if executable {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))?;
    }
    Ok(())
}

/// Writes the project; refuses a folder that exists and is not empty.
pub fn create(project: &NewProject) -> Result<Created, NewError> {
    check_name(&project.name)?;
    let sdk = project
        .sdk_path
        .as_deref()
        .map(|p| check_sdk(p, project.lang))
        .transpose()?;
    let dir = &project.dir;
    if std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some()) {
        return Err(NewError::Exists(dir.clone()));
    }
    let values = values(project, sdk.as_deref());
    let write_error = |path: &Path| {
        let path = path.to_owned();
        move |source| NewError::Write { path, source }
    };
    let mut written = vec![];
    for template in files(project.lang) {
        let path = dir.join(template.path);
        let text = render(template.text, &values);
        debug_assert!(leftover(&text).is_none(), "{}: {:?}", template.path, leftover(&text));
        write_file(&path, text.as_bytes(), template.executable).map_err(write_error(&path))?;
        written.push(PathBuf::from(template.path));
    }
    // Without a checkout: the SDK this conductor carries, a wheel or a folder.
    match (&sdk, project.lang) {
        (Some(_), _) => {}
        (None, Lang::Python) => {
            let name = PathBuf::from("sdk").join(carried::wheel_name());
            let path = dir.join(&name);
            write_file(&path, &carried::python_wheel(), false).map_err(write_error(&path))?;
            written.push(name);
        }
        (None, lang @ (Lang::Rust | Lang::Js)) => {
            let package = if lang == Lang::Rust {
                carried::rust_crate()
            } else {
                carried::js_package()
            };
            let folder = PathBuf::from(carried::PACKAGE_FOLDER);
            for file in package {
                let path = dir.join(&folder).join(file.path);
                write_file(&path, file.bytes, file.executable).map_err(write_error(&path))?;
            }
            written.push(folder);
        }
    }
    // A Rust project on a checkout builds with the versions the SDK's own workspace is tested
    // with (and compiled: a shared CARGO_TARGET_DIR then reuses them).
    if project.lang == Lang::Rust
        && let Some(lock) = sdk.as_deref().and_then(Path::parent).map(|w| w.join("Cargo.lock"))
        && lock.is_file()
    {
        let to = dir.join("Cargo.lock");
        std::fs::copy(&lock, &to).map_err(write_error(&to))?;
        written.push(PathBuf::from("Cargo.lock"));
    }
    Ok(Created {
        dir: dir.clone(),
        files: written,
    })
}

/// What `plugins new` prints: what it wrote, and what to run next.
pub fn next_steps(created: &Created, lang: Lang) -> String {
    let files: Vec<String> = created.files.iter().map(|f| f.display().to_string()).collect();
    let needs = match lang {
        Lang::Rust => "Rust with the wasm32-wasip2 target",
        Lang::Python => {
            "python3, and componentize-py: `conductor plugins tools install --lang python` installs it once"
        }
        Lang::Js => {
            "node and npm, componentize-js and rolldown: `conductor plugins tools install --lang js` installs them once"
        }
    };
    format!(
        "wrote a {} plugin project in {}: {}\n\nnext (build.sh needs {needs}):\n  cd {}\n  ./build.sh                                  # unit tests, then the component\n  conductor plugins test plugin-test.toml     # the component, a scripted agent conversation\n  conductor serve --config conductor.toml     # agents on 127.0.0.1:8090\n",
        lang.as_str(),
        created.dir.display(),
        files.join(", "),
        created.dir.display(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sdk() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../plugin-sdk")
    }

    #[test]
    fn names_are_checked() {
        for ok in ["demo", "my-plugin2", "a"] {
            check_name(ok).unwrap();
        }
        for bad in ["", "Demo", "2fast", "my_plugin", "end-", "a--b", &"x".repeat(64)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn every_language_renders_every_placeholder_and_its_configuration_loads() {
        for lang in [Lang::Rust, Lang::Python, Lang::Js] {
            for sdk_path in [None, Some(sdk())] {
                let dir = tempfile::tempdir().unwrap();
                let project = NewProject {
                    name: "demo-plugin".into(),
                    lang,
                    dir: dir.path().join("demo-plugin"),
                    sdk_path: sdk_path.clone(),
                };
                let created = create(&project).unwrap();
                for f in created.files.iter().filter(|f| !f.starts_with("sdk")) {
                    let text = std::fs::read_to_string(created.dir.join(f)).unwrap();
                    assert_eq!(leftover(&text), None, "{lang:?} {}", f.display());
                }
                let config = created.dir.join("conductor.toml");
                let loaded = crate::config::Config::load(&config, None).unwrap();
                let plugin = &loaded.config.plugins["demo-plugin"];
                assert_eq!(plugin.grants, ["log", "kv"]);
                // The source of its events, from its configuration (a copy configures its own).
                assert_eq!(plugin.config["source"].as_str(), Some("demo-plugin"));
                assert_eq!(
                    loaded.plugin_file(plugin).unwrap(),
                    created.dir.join("./demo_plugin.wasm")
                );
                let script = super::super::script::Script::load(&created.dir.join("plugin-test.toml")).unwrap();
                assert_eq!(script.steps.len(), 4);
                let build = created.dir.join("build.sh");
                use std::os::unix::fs::PermissionsExt as _;
                assert_eq!(std::fs::metadata(&build).unwrap().permissions().mode() & 0o111, 0o111);
                match lang {
                    Lang::Rust => {
                        let cargo: toml::Table =
                            toml::from_str(&std::fs::read_to_string(created.dir.join("Cargo.toml")).unwrap()).unwrap();
                        let dep = &cargo["dependencies"]["conductor-plugin-sdk"];
                        let dev = &cargo["dev-dependencies"]["conductor-plugin-sdk"];
                        assert_eq!(dep["version"].as_str(), Some(SDK_VERSION));
                        assert_eq!(dev["version"].as_str(), Some(SDK_VERSION));
                        assert_eq!(dev["path"], dep["path"]);
                        assert_eq!(dev["features"], toml::Value::from(vec!["fakes"]));
                        let folder = created.dir.join("sdk/conductor-plugin-sdk");
                        assert_eq!(folder.is_dir(), sdk_path.is_none());
                        // The workspace's lock comes with a checkout's SDK only.
                        assert_eq!(created.dir.join("Cargo.lock").is_file(), sdk_path.is_some());
                        match &sdk_path {
                            None => {
                                assert_eq!(dep["path"].as_str(), Some("sdk/conductor-plugin-sdk"));
                                assert!(created.files.contains(&PathBuf::from("sdk/conductor-plugin-sdk")));
                                for file in carried::rust_crate() {
                                    assert_eq!(
                                        std::fs::read(folder.join(file.path)).unwrap(),
                                        file.bytes,
                                        "{}",
                                        file.path
                                    );
                                }
                                let manifest: toml::Table =
                                    toml::from_str(&std::fs::read_to_string(folder.join("Cargo.toml")).unwrap())
                                        .unwrap();
                                assert_eq!(manifest["package"]["name"].as_str(), Some("conductor-plugin-sdk"));
                                assert_eq!(manifest["package"]["version"].as_str(), Some(SDK_VERSION));
                                let wit = std::fs::read_to_string(folder.join("wit/plugin.wit")).unwrap();
                                assert!(wit.contains(&format!("package conductor:plugin@{SDK_VERSION};")));
                            }
                            Some(_) => assert!(dep["path"].as_str().unwrap().ends_with("plugin-sdk")),
                        }
                    }
                    Lang::Python => {
                        let req = std::fs::read_to_string(created.dir.join("requirements.txt")).unwrap();
                        let line = req.lines().find(|l| !l.starts_with('#')).unwrap();
                        let wheel = format!("sdk/conductor_plugin_sdk-{SDK_VERSION}-py3-none-any.whl");
                        assert_eq!(created.dir.join(&wheel).is_file(), sdk_path.is_none(), "{wheel}");
                        match &sdk_path {
                            None => assert_eq!(line, format!("./{wheel}")),
                            Some(_) => assert!(
                                line.starts_with("conductor-plugin-sdk @ file:///")
                                    && line.ends_with("/plugin-sdk/python"),
                                "{line}"
                            ),
                        }
                    }
                    Lang::Js => {
                        let package: serde_json::Value =
                            serde_json::from_str(&std::fs::read_to_string(created.dir.join("package.json")).unwrap())
                                .unwrap();
                        let dep = package["dependencies"]["conductor-plugin-sdk"].as_str().unwrap();
                        let carried = created.dir.join("sdk/conductor-plugin-sdk/package.json");
                        assert_eq!(carried.is_file(), sdk_path.is_none());
                        match &sdk_path {
                            None => {
                                assert_eq!(dep, "file:sdk/conductor-plugin-sdk");
                                let package: serde_json::Value =
                                    serde_json::from_str(&std::fs::read_to_string(carried).unwrap()).unwrap();
                                assert_eq!(package["version"], SDK_VERSION);
                                let wit = created.dir.join("sdk/conductor-plugin-sdk/wit/plugin.wit");
                                assert!(
                                    std::fs::read_to_string(wit)
                                        .unwrap()
                                        .contains(&format!("package conductor:plugin@{SDK_VERSION};"))
                                );
                            }
                            Some(_) => assert!(dep.starts_with("file:/") && dep.ends_with("/plugin-sdk/js"), "{dep}"),
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_folder_in_use_or_a_wrong_sdk_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("x"), "").unwrap();
        let project = NewProject {
            name: "demo".into(),
            lang: Lang::Python,
            dir: dir.path().to_owned(),
            sdk_path: None,
        };
        assert!(matches!(create(&project), Err(NewError::Exists(_))));
        let err = create(&NewProject {
            dir: dir.path().join("new"),
            sdk_path: Some(dir.path().to_owned()),
            ..project
        })
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("no contract at") && err.contains("plugin-sdk folder"),
            "{err}"
        );
    }
}
