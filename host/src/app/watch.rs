//! Reloads the configuration when its file or a plugin file it names changes.
//!
//! Files are looked at every `reload.watch_interval`: each one's identity once symlinks are
//! followed (the resolved path, device and inode), size and modification time. That sees an
//! editor's save, a copied plugin, and the kubelet's update of a mounted ConfigMap or Secret (a
//! new timestamped folder, then an atomic rename of the `..data` symlink, so the path resolves to
//! another file) alike, with no inotify watch to re-arm. A change is applied once the files have
//! stayed the same for `reload.debounce`, as `conductor reload` applies it: a configuration that
//! does not load whole changes nothing, and the same files are not tried again until they change
//! once more.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

use crate::admin::{ReloadRequest, ReloadTrigger};

/// What is looked at of one file; `None` when it cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    resolved: PathBuf,
    device: u64,
    inode: u64,
    size: u64,
    modified: Option<SystemTime>,
}

fn look(path: &Path) -> Option<Seen> {
    use std::os::unix::fs::MetadataExt;
    let resolved = std::fs::canonicalize(path).ok()?;
    let meta = std::fs::metadata(&resolved).ok()?;
    Some(Seen {
        resolved,
        device: meta.dev(),
        inode: meta.ino(),
        size: meta.len(),
        modified: meta.modified().ok(),
    })
}

fn look_all(files: &[PathBuf]) -> Vec<Option<Seen>> {
    files.iter().map(|f| look(f)).collect()
}

/// The files as they were when conductor started to load them: a file replaced while the plugins
/// load (before the watch has begun) is a change like any later one.
pub struct Baseline {
    files: Vec<PathBuf>,
    seen: Vec<Option<Seen>>,
}

impl Baseline {
    pub fn look(files: Vec<PathBuf>) -> Self {
        let seen = look_all(&files);
        Self { files, seen }
    }
}

/// Watches `files` (replaced after every reload through the channel), starting from `baseline`,
/// and asks `reload` to reload when one changes, until `stop`.
pub async fn watch_files(
    mut files: watch::Receiver<Vec<PathBuf>>,
    baseline: Baseline,
    interval: Duration,
    debounce: Duration,
    reload: mpsc::Sender<ReloadRequest>,
    stop: CancellationToken,
) {
    let Baseline {
        files: mut watched,
        mut seen,
    } = baseline;
    if *files.borrow_and_update() != watched {
        watched = files.borrow().clone();
        seen = look_all(&watched);
    }
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            changed = files.changed() => {
                if changed.is_err() {
                    return;
                }
                watched = files.borrow_and_update().clone();
                seen = look_all(&watched);
                continue;
            }
            _ = tokio::time::sleep(interval) => {}
        }
        let mut now = look_all(&watched);
        if now == seen {
            continue;
        }
        // Settle: the files must stay the same for `debounce`.
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(debounce) => {}
            }
            let again = look_all(&watched);
            if again == now {
                break;
            }
            now = again;
        }
        let changed: Vec<String> = watched
            .iter()
            .zip(seen.iter().zip(&now))
            .filter(|(_, (before, after))| before != after)
            .map(|(f, _)| f.display().to_string())
            .collect();
        seen = now;
        tracing::info!(files = ?changed, "configuration files changed");
        let (reply, done) = oneshot::channel();
        let request = ReloadRequest {
            reply: Some(reply),
            trigger: ReloadTrigger::FilesChanged,
        };
        if reload.send(request).await.is_err() {
            return;
        }
        // One reload at a time; its outcome is logged and counted where it runs.
        let _ = done.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_symlink_swap_is_a_change_and_the_same_file_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::create_dir(&a).unwrap();
        std::fs::create_dir(&b).unwrap();
        std::fs::write(a.join("conductor.toml"), "x = 1").unwrap();
        std::fs::write(b.join("conductor.toml"), "x = 1").unwrap();
        // The kubelet's layout: file -> ..data/file, ..data -> a timestamped folder.
        let data = dir.path().join("..data");
        std::os::unix::fs::symlink(&a, &data).unwrap();
        let file = dir.path().join("conductor.toml");
        std::os::unix::fs::symlink(data.join("conductor.toml"), &file).unwrap();
        let before = look(&file).unwrap();
        assert_eq!(look(&file).unwrap(), before, "nothing changed");
        let tmp = dir.path().join("..data_tmp");
        std::os::unix::fs::symlink(&b, &tmp).unwrap();
        std::fs::rename(&tmp, &data).unwrap();
        assert_ne!(
            look(&file).unwrap(),
            before,
            "the same bytes in a swapped folder are a change"
        );
        std::fs::remove_file(&file).unwrap();
        assert_eq!(look(&file), None);
    }

    #[tokio::test]
    async fn a_change_asks_for_one_reload_after_the_files_settle() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("conductor.toml");
        std::fs::write(&file, "one").unwrap();
        let (files_tx, files_rx) = watch::channel(vec![file.clone()]);
        let (reload_tx, mut reload_rx) = mpsc::channel(4);
        let stop = CancellationToken::new();
        let task = tokio::spawn(watch_files(
            files_rx,
            Baseline::look(vec![file.clone()]),
            Duration::from_millis(20),
            Duration::from_millis(100),
            reload_tx,
            stop.clone(),
        ));
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(reload_rx.try_recv().is_err(), "no change, no reload");
        // Three writes in quick succession: one reload.
        for text in ["two", "three!", "four!!!"] {
            std::fs::write(&file, text).unwrap();
            tokio::time::sleep(Duration::from_millis(40)).await;
        }
        let request = tokio::time::timeout(Duration::from_secs(5), reload_rx.recv())
            .await
            .expect("a reload is asked for")
            .unwrap();
        assert!(matches!(request.trigger, ReloadTrigger::FilesChanged));
        let _ = request.reply.unwrap().send(Err("refused".into()));
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(reload_rx.try_recv().is_err(), "the same files are not tried again");
        drop(files_tx);
        stop.cancel();
        task.await.unwrap();
    }

    #[tokio::test]
    async fn a_file_replaced_before_the_watch_begins_is_a_change() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("plugin.wasm");
        std::fs::write(&file, "the build conductor loaded").unwrap();
        let baseline = Baseline::look(vec![file.clone()]);
        // Replaced while the plugins load, before the watch task first looks.
        let tmp = dir.path().join("plugin.wasm.new");
        std::fs::write(&tmp, "another build").unwrap();
        std::fs::rename(&tmp, &file).unwrap();
        let (_files_tx, files_rx) = watch::channel(vec![file.clone()]);
        let (reload_tx, mut reload_rx) = mpsc::channel(4);
        let stop = CancellationToken::new();
        let task = tokio::spawn(watch_files(
            files_rx,
            baseline,
            Duration::from_millis(20),
            Duration::from_millis(40),
            reload_tx,
            stop.clone(),
        ));
        let request = tokio::time::timeout(Duration::from_secs(5), reload_rx.recv())
            .await
            .expect("the replacement is seen")
            .unwrap();
        assert!(matches!(request.trigger, ReloadTrigger::FilesChanged));
        drop(request);
        stop.cancel();
        task.await.unwrap();
    }
}
