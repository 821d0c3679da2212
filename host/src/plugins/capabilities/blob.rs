//! `conductor:plugin/blob`: the files the operator named for the plugin (`blobs`), read whole, at
//! most [`MAX_BLOB`] bytes.

use std::sync::Arc;

use conductor_plugin_sdk::{Capability, Error};

use super::guard::Guard;

/// The largest file `blob` hands a plugin.
const MAX_BLOB: u64 = 16 << 20;

/// The `blob` capability of one plugin (its files are in its grants).
pub struct BlobHost {
    guard: Arc<Guard>,
}

impl BlobHost {
    pub fn new(guard: Arc<Guard>) -> Self {
        Self { guard }
    }

    /// The contents of the file the operator named `name` for the plugin.
    pub async fn read(&self, name: &str) -> Result<Vec<u8>, Error> {
        self.guard.check(Capability::Blob)?;
        let blobs = &self.guard.grants().blobs;
        let path = blobs.get(name).ok_or_else(|| {
            Error::NotFound(format!(
                "no file named {name:?} for plugin {:?} (its blobs: {:?})",
                self.guard.plugin(),
                blobs.keys().collect::<Vec<_>>()
            ))
        })?;
        let unreadable = |e: std::io::Error| Error::Unavailable(format!("blob {name:?} ({}): {e}", path.display()));
        let size = tokio::fs::metadata(path).await.map_err(unreadable)?.len();
        if size > MAX_BLOB {
            return Err(Error::Invalid(format!(
                "blob {name:?} ({}) holds {size} bytes, more than the {MAX_BLOB} a plugin may read",
                path.display()
            )));
        }
        tokio::fs::read(path).await.map_err(unreadable)
    }
}
