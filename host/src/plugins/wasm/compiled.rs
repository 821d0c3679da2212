//! Compiled components kept on disk, so that a restart, a reload or a CLI command loads a plugin
//! it compiled before in milliseconds instead of compiling it again (a Python or JavaScript
//! component takes seconds).
//!
//! The artifacts are wasmtime's own precompiled form (`Engine::precompile_component`, loaded with
//! `Component::deserialize_file`). Each is named by the SHA-256 of the component's bytes and by
//! the engine's compatibility hash (wasmtime's version and every engine setting that changes the
//! code), so a changed file, another wasmtime or another engine setting never finds a stale
//! artifact; wasmtime also checks the artifact's header before it uses one, and an artifact it
//! refuses is compiled again and replaced.
//!
//! Loading an artifact trusts it as code, so the folder must be conductor's own: it is created
//! with mode 0700, and a folder that others may write to is not used.

use std::fs;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::RwLock;

use crate::private_folder::{ensure_private_folder, write_atomically};
use wasmtime::Engine;
use wasmtime::component::Component;

const SUFFIX: &str = ".cwasm";

/// The folder in use; `None`: no cache on disk.
static FOLDER: RwLock<Option<PathBuf>> = RwLock::new(None);
/// The most its artifacts may take together; past it, the least recently used go.
static MAX_SIZE: AtomicU64 = AtomicU64::new(crate::config::DEFAULT_COMPILE_CACHE_MAX_SIZE);

/// Sets where compiled components are kept (`None`: nowhere). Applies to every later compilation.
pub fn set_folder(folder: Option<PathBuf>) {
    *FOLDER.write() = folder;
}

/// Sets the most the kept artifacts may take together. Applies from the next one written.
pub fn set_max_size(bytes: u64) {
    MAX_SIZE.store(bytes, Ordering::Relaxed);
}

/// Compiles `bytes` (read from `file`), or loads the artifact compiled from the same bytes by the
/// same engine before. Runs on a blocking thread.
pub(super) fn compile_or_load(engine: &Engine, file: &Path, bytes: &[u8]) -> wasmtime::Result<Component> {
    let Some(folder) = FOLDER.read().clone() else {
        return Component::from_binary(engine, bytes);
    };
    if let Err(reason) = ensure_private_folder(&folder) {
        tracing::warn!(folder = %folder.display(), %reason, "not using the compile cache");
        return Component::from_binary(engine, bytes);
    }
    let artifact = folder.join(artifact_name(engine, bytes));
    if artifact.exists() {
        // SAFETY: the artifact was written by `precompile_component` of an engine with the same
        // compatibility hash, into a folder only this user may write (checked above); wasmtime
        // checks its header and refuses an artifact of another version or configuration.
        match unsafe { Component::deserialize_file(engine, &artifact) } {
            Ok(component) => {
                touch(&artifact);
                tracing::info!(file = %file.display(), artifact = %artifact.display(), "compiled component loaded from the cache");
                return Ok(component);
            }
            Err(e) => {
                tracing::warn!(artifact = %artifact.display(), error = %format!("{e:#}"), "compiled component refused; compiling again");
                let _ = fs::remove_file(&artifact);
            }
        }
    }
    let precompiled = engine.precompile_component(bytes)?;
    match write_atomically(&artifact, &precompiled) {
        Ok(()) => {
            tracing::info!(file = %file.display(), artifact = %artifact.display(), "compiled component cached");
            prune(&folder, &artifact, MAX_SIZE.load(Ordering::Relaxed));
        }
        Err(e) => tracing::warn!(artifact = %artifact.display(), error = %e, "cannot write the compile cache"),
    }
    // SAFETY: `precompiled` was made by `precompile_component` of this engine just now.
    unsafe { Component::deserialize(engine, &precompiled) }
}

/// `<engine compatibility hash>-<sha256 of the bytes>.cwasm`.
fn artifact_name(engine: &Engine, bytes: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    let sha: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("{:016x}-{sha}{SUFFIX}", engine_hash(engine))
}

fn engine_hash(engine: &Engine) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut hasher);
    hasher.finish()
}

/// Marks an artifact as just used (its modification time), for [`prune`].
fn touch(artifact: &Path) {
    if let Ok(f) = fs::File::options().append(true).open(artifact) {
        let _ = f.set_modified(std::time::SystemTime::now());
    }
}

/// Removes the least recently used artifacts until those left take at most `max_size` bytes
/// together (never `keep`, the one just written).
fn prune(folder: &Path, keep: &Path, max_size: u64) {
    let Ok(entries) = fs::read_dir(folder) else { return };
    let mut artifacts: Vec<(std::time::SystemTime, u64, PathBuf)> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_str().is_some_and(|s| s.ends_with(SUFFIX)) && p != keep)
        .filter_map(|p| {
            let meta = fs::metadata(&p).ok()?;
            Some((meta.modified().ok()?, meta.len(), p))
        })
        .collect();
    let mut total: u64 = fs::metadata(keep).map_or(0, |m| m.len()) + artifacts.iter().map(|a| a.1).sum::<u64>();
    // Oldest first.
    artifacts.sort_by_key(|a| a.0);
    for (_, size, old) in artifacts {
        if total <= max_size {
            break;
        }
        tracing::debug!(artifact = %old.display(), size, "compile cache: removing the least recently used");
        if fs::remove_file(&old).is_ok() {
            total -= size;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine() -> Engine {
        let mut config = wasmtime::Config::new();
        config.wasm_component_model(true);
        Engine::new(&config).expect("engine")
    }

    #[test]
    fn artifact_names_differ_by_bytes_and_engine_settings() {
        let e = engine();
        let a = artifact_name(&e, b"one");
        assert_eq!(a, artifact_name(&e, b"one"));
        assert_ne!(a, artifact_name(&e, b"two"));
        let mut other = wasmtime::Config::new();
        other.wasm_component_model(true).epoch_interruption(true);
        let other = Engine::new(&other).expect("engine");
        assert_ne!(
            a,
            artifact_name(&other, b"one"),
            "another engine setting is another key"
        );
        assert!(a.ends_with(SUFFIX));
    }

    #[test]
    fn a_second_compilation_loads_the_artifact_and_a_corrupt_one_is_replaced() {
        let dir = std::env::temp_dir().join(format!("conductor-compiled-test-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let e = engine();
        let bytes = wat_component();
        let artifact = dir.join(artifact_name(&e, &bytes));
        set_folder_for_test(&dir, || {
            compile_or_load(&e, Path::new("x.wasm"), &bytes).expect("compiles");
            assert!(artifact.exists(), "the artifact is written");
            let written = fs::metadata(&artifact).expect("artifact").len();
            compile_or_load(&e, Path::new("x.wasm"), &bytes).expect("loads");
            fs::write(&artifact, b"not an artifact").expect("corrupt it");
            compile_or_load(&e, Path::new("x.wasm"), &bytes).expect("compiles again");
            assert_eq!(fs::metadata(&artifact).expect("artifact").len(), written, "replaced");
        });
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(&dir).expect("dir").permissions().mode() & 0o777;
            assert_eq!(mode, 0o700);
            fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).expect("chmod");
            assert!(
                ensure_private_folder(&dir).is_err(),
                "a folder others may write is refused"
            );
        }
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_least_recently_used_artifacts_go_until_the_rest_fit() {
        let dir = tempfile::tempdir().unwrap();
        let at = |name: &str, size: usize, age: u64| {
            let p = dir.path().join(format!("{name}{SUFFIX}"));
            fs::write(&p, vec![0u8; size]).unwrap();
            let f = fs::File::options().append(true).open(&p).unwrap();
            f.set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(age))
                .unwrap();
            p
        };
        let oldest = at("oldest", 400, 300);
        let older = at("older", 400, 200);
        let recent = at("recent", 400, 100);
        let other = dir.path().join("not-an-artifact");
        fs::write(&other, vec![0u8; 10_000]).unwrap();
        let new = at("new", 400, 0);
        prune(dir.path(), &new, 1_000);
        assert!(!oldest.exists() && !older.exists(), "the least recently used went");
        assert!(recent.exists() && new.exists() && other.exists());
        prune(dir.path(), &new, 100);
        assert!(!recent.exists());
        assert!(new.exists(), "the one just written stays, however large");
    }

    /// The smallest component, `(component)`: the preamble alone (magic, version 0x0d, layer 1).
    fn wat_component() -> Vec<u8> {
        vec![0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00]
    }

    fn set_folder_for_test(dir: &Path, f: impl FnOnce()) {
        set_folder(Some(dir.to_owned()));
        f();
        set_folder(None);
    }
}
