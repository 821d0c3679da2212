//! The SDK packages this conductor carries, of its own contract's version, for `conductor plugins
//! new` to write into a project: the SDK builds from the project as it is, with no checkout of
//! conductor and no registry holding the SDK.
//!
//! - Rust: the crate's folder, its sources and contract as `cargo build` reads them, with its
//!   manifest made standalone — `plugin-sdk/Cargo.toml` inherits from conductor's workspace, so
//!   the build (`host/build.rs`) resolves what it inherits and drops its lints and
//!   dev-dependencies. For a path dependency; the SDK's own dependencies come as any crate's.
//! - Python: a wheel, `conductor_plugin_sdk-<version>-py3-none-any.whl`, made from the sources of
//!   `plugin-sdk/python` (and the contract, `plugin-sdk/wit/plugin.wit`) as pip installs it:
//!   pip installs a wheel with no dependency without a registry, where a source folder would
//!   need its build backend (setuptools) from one.
//! - JavaScript: the npm package's folder, the files its `package.json` publishes (with the
//!   contract in `wit/`), for a `file:` dependency: npm links it, with no registry either.
//!
//! The files are built into the binary (`include_bytes!`); a test checks the lists against the
//! packages' folders, so a file added to a package is not left out here.

use std::fmt::Write as _;

use base64::Engine as _;
use conductor_plugin_sdk::SDK_VERSION;

/// One file of a package: its path in the package, its bytes, whether it is a command.
pub struct File {
    pub path: &'static str,
    pub bytes: &'static [u8],
    pub executable: bool,
}

macro_rules! sdk_file {
    ($path:literal) => {
        sdk_file!($path, $path)
    };
    ($path:literal, $from:literal) => {
        File {
            path: $path,
            bytes: include_bytes!(concat!("../../../plugin-sdk/", $from)),
            executable: false,
        }
    };
    ($path:literal, $from:literal, executable) => {
        File {
            path: $path,
            bytes: include_bytes!(concat!("../../../plugin-sdk/", $from)),
            executable: true,
        }
    };
}

/// The Rust crate: its manifest (made standalone by `host/build.rs`), its build script, README,
/// sources and contract, by their path in its folder.
const RUST: &[File] = &[
    File {
        path: "Cargo.toml",
        bytes: include_bytes!(concat!(env!("OUT_DIR"), "/plugin-sdk-Cargo.toml")),
        executable: false,
    },
    sdk_file!("build.rs"),
    sdk_file!("README.md"),
    sdk_file!("src/bindings.rs"),
    sdk_file!("src/calls.rs"),
    sdk_file!("src/component.rs"),
    sdk_file!("src/duration.rs"),
    sdk_file!("src/error.rs"),
    sdk_file!("src/event.rs"),
    sdk_file!("src/fakes.rs"),
    sdk_file!("src/host/database.rs"),
    sdk_file!("src/host/kube.rs"),
    sdk_file!("src/host/mod.rs"),
    sdk_file!("src/identity.rs"),
    sdk_file!("src/imports.rs"),
    sdk_file!("src/kube.rs"),
    sdk_file!("src/lib.rs"),
    sdk_file!("src/metric.rs"),
    sdk_file!("src/native.rs"),
    sdk_file!("src/ocm/codec.rs"),
    sdk_file!("src/ocm/conditions.rs"),
    sdk_file!("src/ocm/extensions.rs"),
    sdk_file!("src/ocm/mod.rs"),
    sdk_file!("src/ocm/resources.rs"),
    sdk_file!("src/ocm/resync.rs"),
    sdk_file!("src/ocm/types.rs"),
    sdk_file!("src/pg.rs"),
    sdk_file!("src/plugin.rs"),
    sdk_file!("src/request.rs"),
    sdk_file!("src/retry.rs"),
    sdk_file!("src/wit_convert.rs"),
    sdk_file!("wit/plugin.wit"),
];

/// The Rust crate's files, by their path in its folder.
pub fn rust_crate() -> &'static [File] {
    RUST
}

/// The Python package's modules, by their path in the wheel (the packages of `python/src`).
const PYTHON: &[File] = &[
    sdk_file!("conductor_sdk/__init__.py", "python/src/conductor_sdk/__init__.py"),
    sdk_file!("conductor_sdk/ocm.py", "python/src/conductor_sdk/ocm.py"),
    sdk_file!("conductor_sdk/fakes.py", "python/src/conductor_sdk/fakes.py"),
    sdk_file!("conductor_sdk/py.typed", "python/src/conductor_sdk/py.typed"),
    sdk_file!(
        "conductor_plugin_wit/__init__.py",
        "python/src/conductor_plugin_wit/__init__.py"
    ),
    sdk_file!(
        "conductor_plugin_wit/__main__.py",
        "python/src/conductor_plugin_wit/__main__.py"
    ),
    sdk_file!(
        "conductor_plugin_wit/py.typed",
        "python/src/conductor_plugin_wit/py.typed"
    ),
    // In the repository a link to the contract.
    sdk_file!("conductor_plugin_wit/plugin.wit", "wit/plugin.wit"),
];

const PYPROJECT: &str = include_str!("../../../plugin-sdk/python/pyproject.toml");
const PYTHON_README: &str = include_str!("../../../plugin-sdk/python/README.md");

/// The npm package: `package.json` and the files it publishes (`files`), the contract staged in
/// `wit/` as `npm pack` stages it.
const JS: &[File] = &[
    sdk_file!("package.json", "js/package.json"),
    sdk_file!("README.md", "js/README.md"),
    sdk_file!("sdk.mjs", "js/sdk.mjs"),
    sdk_file!("error.mjs", "js/error.mjs"),
    sdk_file!("ocm.mjs", "js/ocm.mjs"),
    sdk_file!("fake-host.mjs", "js/fake-host.mjs"),
    sdk_file!("fakes/blob.mjs", "js/fakes/blob.mjs"),
    sdk_file!("fakes/emit.mjs", "js/fakes/emit.mjs"),
    sdk_file!("fakes/kv.mjs", "js/fakes/kv.mjs"),
    sdk_file!("fakes/log.mjs", "js/fakes/log.mjs"),
    sdk_file!("fakes/metrics.mjs", "js/fakes/metrics.mjs"),
    sdk_file!("fakes/requests.mjs", "js/fakes/requests.mjs"),
    sdk_file!("fakes/timer.mjs", "js/fakes/timer.mjs"),
    sdk_file!("register.mjs", "js/register.mjs"),
    sdk_file!("hooks.mjs", "js/hooks.mjs"),
    sdk_file!("wit.mjs", "js/wit.mjs"),
    sdk_file!(
        "bin/conductor-plugin-wit.mjs",
        "js/bin/conductor-plugin-wit.mjs",
        executable
    ),
    sdk_file!("wit/plugin.wit", "wit/plugin.wit"),
];

/// The npm package's files, by their path in its folder.
pub fn js_package() -> &'static [File] {
    JS
}

/// The folder a project keeps the Rust crate or the npm package in, relative to the project.
pub const PACKAGE_FOLDER: &str = "sdk/conductor-plugin-sdk";

/// The wheel's file name: `conductor_plugin_sdk-<version>-py3-none-any.whl`.
pub fn wheel_name() -> String {
    format!("{}-{SDK_VERSION}-py3-none-any.whl", dist_name())
}

/// The distribution's name as wheels spell it (`conductor_plugin_sdk`).
fn dist_name() -> String {
    project_table()
        .get("name")
        .and_then(toml::Value::as_str)
        .unwrap_or("conductor-plugin-sdk")
        .replace(['-', '.'], "_")
}

fn project_table() -> toml::Table {
    toml::from_str::<toml::Table>(PYPROJECT)
        .ok()
        .and_then(|t| t.get("project").and_then(toml::Value::as_table).cloned())
        .unwrap_or_default()
}

/// The wheel's `METADATA` (core metadata 2.1), from `pyproject.toml`'s `[project]` and the
/// package's README.
fn metadata() -> String {
    let project = project_table();
    let text = |key: &str| {
        project
            .get(key)
            .and_then(toml::Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let mut out = String::new();
    let _ = writeln!(out, "Metadata-Version: 2.1");
    let _ = writeln!(out, "Name: {}", text("name"));
    let _ = writeln!(out, "Version: {SDK_VERSION}");
    let _ = writeln!(out, "Summary: {}", text("description"));
    if let Some(license) = project
        .get("license")
        .and_then(|l| l.get("text"))
        .and_then(toml::Value::as_str)
    {
        let _ = writeln!(out, "License: {license}");
    }
    for classifier in project
        .get("classifiers")
        .and_then(toml::Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(toml::Value::as_str)
    {
        let _ = writeln!(out, "Classifier: {classifier}");
    }
    let _ = writeln!(out, "Requires-Python: {}", text("requires-python"));
    let _ = writeln!(out, "Description-Content-Type: text/markdown");
    let _ = writeln!(out);
    out.push_str(PYTHON_README);
    out
}

/// The wheel's `entry_points.txt`: `[project.scripts]` as console scripts.
fn entry_points() -> String {
    let mut out = "[console_scripts]\n".to_owned();
    if let Some(scripts) = project_table().get("scripts").and_then(toml::Value::as_table) {
        for (name, target) in scripts {
            let _ = writeln!(out, "{name} = {}", target.as_str().unwrap_or_default());
        }
    }
    out
}

/// The Python package as a wheel (a zip file, stored): the modules, then `<dist>.dist-info/`
/// with `METADATA`, `WHEEL`, `entry_points.txt`, `top_level.txt` and `RECORD`.
pub fn python_wheel() -> Vec<u8> {
    let dist_info = format!("{}-{SDK_VERSION}.dist-info", dist_name());
    let mut files: Vec<(String, Vec<u8>)> = PYTHON.iter().map(|f| (f.path.to_owned(), f.bytes.to_vec())).collect();
    let mut top_level: Vec<&str> = PYTHON.iter().filter_map(|f| f.path.split('/').next()).collect();
    top_level.dedup();
    files.push((format!("{dist_info}/METADATA"), metadata().into_bytes()));
    files.push((
        format!("{dist_info}/WHEEL"),
        format!(
            "Wheel-Version: 1.0\nGenerator: conductor {} (plugins new)\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
            env!("CARGO_PKG_VERSION")
        )
        .into_bytes(),
    ));
    files.push((format!("{dist_info}/entry_points.txt"), entry_points().into_bytes()));
    files.push((
        format!("{dist_info}/top_level.txt"),
        format!("{}\n", top_level.join("\n")).into_bytes(),
    ));
    let mut record = String::new();
    for (path, bytes) in &files {
        let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
        let hash = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest.as_ref());
        let _ = writeln!(record, "{path},sha256={hash},{}", bytes.len());
    }
    let _ = writeln!(record, "{dist_info}/RECORD,,");
    files.push((format!("{dist_info}/RECORD"), record.into_bytes()));
    zip_stored(&files)
}

/// CRC-32 (IEEE 802.3, as zip uses it).
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// A zip archive of `files`, uncompressed, every entry dated 1980-01-01 (the same bytes for the
/// same files).
fn zip_stored(files: &[(String, Vec<u8>)]) -> Vec<u8> {
    const DOS_DATE: u16 = (1 << 5) | 1; // 1980-01-01
    const UTF8_NAMES: u16 = 1 << 11;
    let u16le = |out: &mut Vec<u8>, v: u16| out.extend_from_slice(&v.to_le_bytes());
    let u32le = |out: &mut Vec<u8>, v: u32| out.extend_from_slice(&v.to_le_bytes());
    let as_u32 = |n: usize| u32::try_from(n).expect("the SDK's files are small");
    let as_u16 = |n: usize| u16::try_from(n).expect("the SDK's paths are short");
    let mut out = Vec::new();
    let mut central = Vec::new();
    for (name, bytes) in files {
        let offset = as_u32(out.len());
        let crc = crc32(bytes);
        // Local file header.
        u32le(&mut out, 0x0403_4b50);
        u16le(&mut out, 20);
        u16le(&mut out, UTF8_NAMES);
        u16le(&mut out, 0); // stored
        u16le(&mut out, 0);
        u16le(&mut out, DOS_DATE);
        u32le(&mut out, crc);
        u32le(&mut out, as_u32(bytes.len()));
        u32le(&mut out, as_u32(bytes.len()));
        u16le(&mut out, as_u16(name.len()));
        u16le(&mut out, 0);
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(bytes);
        // Its central directory entry.
        u32le(&mut central, 0x0201_4b50);
        u16le(&mut central, (3 << 8) | 20); // made on Unix (mode in the external attributes)
        u16le(&mut central, 20);
        u16le(&mut central, UTF8_NAMES);
        u16le(&mut central, 0);
        u16le(&mut central, 0);
        u16le(&mut central, DOS_DATE);
        u32le(&mut central, crc);
        u32le(&mut central, as_u32(bytes.len()));
        u32le(&mut central, as_u32(bytes.len()));
        u16le(&mut central, as_u16(name.len()));
        u16le(&mut central, 0);
        u16le(&mut central, 0);
        u16le(&mut central, 0);
        u16le(&mut central, 0);
        u32le(&mut central, 0o100_644 << 16);
        u32le(&mut central, offset);
        central.extend_from_slice(name.as_bytes());
    }
    let central_at = as_u32(out.len());
    out.extend_from_slice(&central);
    u32le(&mut out, 0x0605_4b50);
    u16le(&mut out, 0);
    u16le(&mut out, 0);
    u16le(&mut out, as_u16(files.len()));
    u16le(&mut out, as_u16(files.len()));
    u32le(&mut out, as_u32(central.len()));
    u32le(&mut out, central_at);
    u16le(&mut out, 0);
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::path::{Path, PathBuf};

    use super::*;

    fn sdk() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../plugin-sdk")
    }

    fn files_under(root: &Path, dir: &Path, out: &mut BTreeSet<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name == "__pycache__" || name.ends_with(".pyc") {
                continue;
            }
            if path.is_dir() {
                files_under(root, &path, out);
            } else {
                out.insert(path.strip_prefix(root).unwrap().to_string_lossy().into_owned());
            }
        }
    }

    #[test]
    fn the_python_wheel_holds_every_module_of_the_package() {
        let root = sdk().join("python/src");
        let mut on_disk = BTreeSet::new();
        files_under(&root, &root, &mut on_disk);
        let carried: BTreeSet<String> = PYTHON.iter().map(|f| f.path.to_owned()).collect();
        assert_eq!(
            carried, on_disk,
            "plugin-sdk/python/src and PYTHON in authoring/sdk.rs differ"
        );
    }

    /// The folders of `plugin-sdk` that are not the crate's: the other packages and their tools,
    /// and the SDK's own integration tests (which need its dev-dependencies).
    const NOT_THE_CRATE: &[&str] = &["python", "js", "tools", "tests"];

    #[test]
    fn the_rust_crate_holds_every_file_of_the_sdk_folder_but_the_other_packages() {
        let root = sdk();
        let mut on_disk = BTreeSet::new();
        for entry in std::fs::read_dir(&root).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                if !NOT_THE_CRATE.contains(&name.as_str()) {
                    files_under(&root, &path, &mut on_disk);
                }
            } else {
                on_disk.insert(name);
            }
        }
        let carried: BTreeSet<String> = RUST.iter().map(|f| f.path.to_owned()).collect();
        assert_eq!(carried, on_disk, "plugin-sdk and RUST in authoring/sdk.rs differ");
    }

    /// The manifest builds outside conductor's workspace: nothing left to inherit, the contract's
    /// version, the workspace's dependencies as the workspace declares them.
    #[test]
    fn the_rust_crates_manifest_stands_alone() {
        let text = std::str::from_utf8(RUST[0].bytes).unwrap();
        assert!(!text.contains("workspace"), "{text}");
        let manifest: toml::Table = toml::from_str(text).unwrap();
        let read = |path: &str| -> toml::Table {
            toml::from_str(&std::fs::read_to_string(sdk().join(path)).unwrap()).unwrap()
        };
        let (own, root) = (read("Cargo.toml"), read("../Cargo.toml"));
        let package = &manifest["package"];
        assert_eq!(package["version"].as_str(), Some(SDK_VERSION));
        assert_eq!(package["edition"], root["workspace"]["package"]["edition"]);
        assert_eq!(
            manifest["dependencies"]["chrono"],
            root["workspace"]["dependencies"]["chrono"]
        );
        assert_eq!(manifest["dependencies"]["postcard"], own["dependencies"]["postcard"]);
        assert_eq!(manifest["features"], own["features"]);
        assert_eq!(manifest["target"], own["target"]);
        assert!(!manifest.contains_key("lints") && !manifest.contains_key("dev-dependencies"));
    }

    #[test]
    fn the_npm_package_holds_what_its_package_json_publishes() {
        let js = sdk().join("js");
        let package: serde_json::Value =
            serde_json::from_slice(&std::fs::read(js.join("package.json")).unwrap()).unwrap();
        let mut published = BTreeSet::from(["package.json".to_owned()]);
        for entry in package["files"].as_array().unwrap() {
            let entry = entry.as_str().unwrap();
            if entry == "wit/plugin.wit" {
                // Staged from ../wit by `npm pack`.
                published.insert(entry.to_owned());
            } else if let Some(dir) = entry.strip_suffix('/') {
                let mut found = BTreeSet::new();
                files_under(&js, &js.join(dir), &mut found);
                published.extend(found);
            } else {
                published.insert(entry.to_owned());
            }
        }
        let carried: BTreeSet<String> = JS.iter().map(|f| f.path.to_owned()).collect();
        assert_eq!(
            carried, published,
            "plugin-sdk/js/package.json's files and JS in authoring/sdk.rs differ"
        );
        let bin = package["bin"]["conductor-plugin-wit"].as_str().unwrap();
        assert!(JS.iter().any(|f| f.path == bin && f.executable), "{bin}");
    }

    #[test]
    fn crc32_is_zips() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
    }

    /// The archive read back as a zip reader reads it: the end record, then each entry from the
    /// central directory to its local header and bytes.
    #[test]
    fn the_wheel_is_a_zip_of_the_modules_and_their_metadata() {
        let wheel = python_wheel();
        assert_eq!(wheel, python_wheel(), "the same bytes each time");
        let end = wheel.len() - 22;
        let le16 = |at: usize| usize::from(u16::from_le_bytes([wheel[at], wheel[at + 1]]));
        let le32 = |at: usize| u32::from_le_bytes(wheel[at..at + 4].try_into().unwrap()) as usize;
        assert_eq!(le32(end), 0x0605_4b50);
        let entries = le16(end + 10);
        let mut at = le32(end + 16);
        let mut read = std::collections::BTreeMap::new();
        for _ in 0..entries {
            assert_eq!(le32(at), 0x0201_4b50);
            let (crc, size, name_len, local) = (le32(at + 16), le32(at + 20), le16(at + 28), le32(at + 42));
            let name = String::from_utf8(wheel[at + 46..at + 46 + name_len].to_vec()).unwrap();
            assert_eq!(le32(local), 0x0403_4b50);
            let data_at = local + 30 + le16(local + 26);
            let data = &wheel[data_at..data_at + size];
            assert_eq!(crc32(data) as usize, crc, "{name}");
            read.insert(name, data.to_vec());
            at += 46 + name_len;
        }
        let dist_info = format!("conductor_plugin_sdk-{SDK_VERSION}.dist-info");
        assert_eq!(
            wheel_name(),
            format!("conductor_plugin_sdk-{SDK_VERSION}-py3-none-any.whl")
        );
        for f in PYTHON {
            assert_eq!(read[f.path], f.bytes, "{}", f.path);
        }
        let text = |name: &str| String::from_utf8(read[&format!("{dist_info}/{name}")].clone()).unwrap();
        let metadata = text("METADATA");
        assert!(
            metadata.starts_with(&format!(
                "Metadata-Version: 2.1\nName: conductor-plugin-sdk\nVersion: {SDK_VERSION}\n"
            )),
            "{metadata}"
        );
        assert!(metadata.contains("\nRequires-Python: >=3.9\n"), "{metadata}");
        assert!(text("WHEEL").contains("Tag: py3-none-any\n"));
        assert_eq!(
            text("entry_points.txt"),
            "[console_scripts]\nconductor-plugin-wit = conductor_plugin_wit:console\n"
        );
        assert_eq!(text("top_level.txt"), "conductor_sdk\nconductor_plugin_wit\n");
        let record = text("RECORD");
        assert_eq!(record.lines().count(), read.len(), "{record}");
        assert!(record.contains(&format!("\n{dist_info}/RECORD,,\n")), "{record}");
    }
}
