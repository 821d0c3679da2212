//! Folders that hold what conductor later trusts (compiled components it loads as code, plugin
//! artifacts it loads as plugins): private to conductor's user, written without ever showing half
//! a file.

use std::fs;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// Creates the folder (mode 0700) and refuses one that others may write to.
pub(crate) fn ensure_private_folder(folder: &Path) -> Result<(), String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(folder)
            .map_err(|e| format!("cannot create it: {e}"))?;
        let meta = fs::metadata(folder).map_err(|e| e.to_string())?;
        if !meta.is_dir() {
            return Err("not a folder".into());
        }
        if meta.permissions().mode() & 0o022 != 0 {
            return Err("others may write to it (it must be writable by its owner only)".into());
        }
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        if meta.uid() != me {
            return Err(format!("owned by uid {}, not by this process's {me}", meta.uid()));
        }
        Ok(())
    }
    #[cfg(not(unix))]
    {
        fs::create_dir_all(folder).map_err(|e| format!("cannot create it: {e}"))
    }
}

/// Writes `bytes` to a file beside `path`, then renames it into place: another process reading or
/// writing the same artifact never sees half of one.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let tmp = path.with_extension(format!(
        "tmp.{}.{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}
