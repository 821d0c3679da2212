//! The artifacts pulled, kept on disk by content: `blobs/sha256/<hex>` (a plugin's `application/wasm`
//! layer, loaded from there like a file), `manifests/sha256/<hex>` (the manifest that names it)
//! and `verified/<manifest hex>.<key hex>` (the mark that the manifest's signature verified with
//! that key). A reference pinned by digest always names the same bytes, so a restart loads what it
//! pulled before without asking the registry; everything read back is hashed again (in pieces, on
//! a blocking thread: [`ArtifactCache::intact`]), and a file that does not match its name is
//! pulled again. A blob being pulled is written to `blobs/sha256/<hex>.partial.<pid>.<n>` and
//! renamed into place once its digest is checked.

use std::fs;
use std::path::{Path, PathBuf};

use std::sync::atomic::{AtomicU64, Ordering};

use super::digest::{sha256_digest, sha256_file};
use crate::private_folder::{ensure_private_folder, write_atomically};

/// The cache folder.
#[derive(Debug, Clone)]
pub struct ArtifactCache {
    root: PathBuf,
}

fn hex(digest: &str) -> &str {
    digest.strip_prefix("sha256:").unwrap_or(digest)
}

impl ArtifactCache {
    /// Opens `root` (created, mode 0700); a folder others may write to is refused, since what it
    /// holds is loaded as code.
    pub fn open(root: &Path) -> Result<Self, String> {
        for sub in ["", "blobs/sha256", "manifests/sha256", "verified"] {
            ensure_private_folder(&root.join(sub))
                .map_err(|e| format!("the artifact cache {}: {e}", root.display()))?;
        }
        Ok(Self { root: root.to_owned() })
    }

    /// Where the blob `digest` is (or would be) kept.
    pub fn blob_path(&self, digest: &str) -> PathBuf {
        self.root.join("blobs/sha256").join(hex(digest))
    }

    fn manifest_path(&self, digest: &str) -> PathBuf {
        self.root.join("manifests/sha256").join(hex(digest))
    }

    fn mark_path(&self, manifest_digest: &str, key_fingerprint: &str) -> PathBuf {
        self.root
            .join("verified")
            .join(format!("{}.{}", hex(manifest_digest), hex(key_fingerprint)))
    }

    /// The bytes kept under `path` if they hash to `digest`.
    fn read_checked(path: &Path, digest: &str) -> Option<Vec<u8>> {
        let bytes = fs::read(path).ok()?;
        if sha256_digest(&bytes) == digest {
            Some(bytes)
        } else {
            tracing::warn!(file = %path.display(), %digest, "a cached artifact does not match its digest; pulling it again");
            let _ = fs::remove_file(path);
            None
        }
    }

    /// The manifest `digest`, if kept and intact.
    pub fn manifest(&self, digest: &str) -> Option<Vec<u8>> {
        Self::read_checked(&self.manifest_path(digest), digest)
    }

    /// Whether the blob `digest` is kept and intact (hashed in pieces; blocking).
    pub fn has_blob(&self, digest: &str) -> bool {
        let path = self.blob_path(digest);
        match sha256_file(&path) {
            Ok(d) if d == digest => true,
            Ok(_) => {
                tracing::warn!(file = %path.display(), %digest, "a cached artifact does not match its digest; pulling it again");
                let _ = fs::remove_file(&path);
                false
            }
            Err(_) => false,
        }
    }

    /// The manifest `manifest_digest` when it is kept intact, its signature verified with
    /// `key_fingerprint` (if one is asked for) and the component it names intact: what a restart
    /// loads without the registry. Hashes files: call it on a blocking thread.
    pub fn intact(&self, manifest_digest: &str, key_fingerprint: Option<&str>) -> Option<Vec<u8>> {
        let manifest = self.manifest(manifest_digest)?;
        let (layer, _) = super::artifact::wasm_layer(&manifest).ok()?;
        let verified = key_fingerprint.is_none_or(|k| self.is_verified(manifest_digest, k));
        (verified && self.has_blob(&layer.digest)).then_some(manifest)
    }

    /// A new file beside the blob `digest`'s place, for pulling it into.
    pub fn partial_blob(&self, digest: &str) -> PathBuf {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        self.blob_path(digest).with_extension(format!(
            "partial.{}.{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ))
    }

    /// Puts the pulled (and checked) `partial` file in the blob `digest`'s place.
    pub fn commit_blob(&self, partial: &Path, digest: &str) -> Result<PathBuf, String> {
        let path = self.blob_path(digest);
        fs::rename(partial, &path).map_err(|e| {
            let _ = fs::remove_file(partial);
            format!("cannot write the artifact cache: {e}")
        })?;
        Ok(path)
    }

    pub fn store_manifest(&self, digest: &str, bytes: &[u8]) -> Result<(), String> {
        write_atomically(&self.manifest_path(digest), bytes)
            .map_err(|e| format!("cannot write the artifact cache: {e}"))
    }

    /// Records that `manifest_digest`'s signature verified with the key `key_fingerprint`.
    pub fn mark_verified(&self, manifest_digest: &str, key_fingerprint: &str) -> Result<(), String> {
        write_atomically(&self.mark_path(manifest_digest, key_fingerprint), b"")
            .map_err(|e| format!("cannot write the artifact cache: {e}"))
    }

    pub fn is_verified(&self, manifest_digest: &str, key_fingerprint: &str) -> bool {
        self.mark_path(manifest_digest, key_fingerprint).exists()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_kept_is_found_by_digest_and_a_damaged_file_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ArtifactCache::open(&dir.path().join("oci")).unwrap();
        let bytes = b"\0asm component".to_vec();
        let digest = sha256_digest(&bytes);
        assert!(!cache.has_blob(&digest));
        let partial = cache.partial_blob(&digest);
        fs::write(&partial, &bytes).unwrap();
        let path = cache.commit_blob(&partial, &digest).unwrap();
        assert!(!partial.exists());
        assert!(cache.has_blob(&digest));
        assert_eq!(fs::read(&path).unwrap(), bytes);
        cache.store_manifest(&digest, &bytes).unwrap();
        assert_eq!(cache.manifest(&digest).as_deref(), Some(&bytes[..]));

        fs::write(&path, b"tampered").unwrap();
        assert!(
            !cache.has_blob(&digest),
            "a file that does not hash to its name is not used"
        );
        assert!(!path.exists(), "and is removed");

        let key = sha256_digest(b"key");
        assert!(!cache.is_verified(&digest, &key));
        cache.mark_verified(&digest, &key).unwrap();
        assert!(cache.is_verified(&digest, &key));
        assert!(!cache.is_verified(&digest, &sha256_digest(b"another key")));
    }
}
