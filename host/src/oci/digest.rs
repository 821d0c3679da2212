//! Content digests, as OCI names blobs and manifests.

/// `sha256:<hex>` of `bytes`.
pub fn sha256_digest(bytes: &[u8]) -> String {
    format(ring::digest::digest(&ring::digest::SHA256, bytes))
}

/// `sha256:<hex>` of a finished SHA-256 (of bytes hashed as they came).
pub fn format(digest: ring::digest::Digest) -> String {
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// `sha256:<hex>` of the file at `path`, read in pieces (never whole in memory). Blocking.
pub fn sha256_file(path: &std::path::Path) -> std::io::Result<String> {
    use std::io::Read as _;
    let mut file = std::fs::File::open(path)?;
    let mut hash = ring::digest::Context::new(&ring::digest::SHA256);
    let mut buffer = vec![0; 256 << 10];
    loop {
        match file.read(&mut buffer)? {
            0 => return Ok(format(hash.finish())),
            n => hash.update(&buffer[..n]),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn digests_are_sha256_of_the_bytes() {
        assert_eq!(
            super::sha256_digest(b""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        let bytes: Vec<u8> = (0..1_000_000u32).map(|i| i as u8).collect();
        std::fs::write(&file, &bytes).unwrap();
        assert_eq!(super::sha256_file(&file).unwrap(), super::sha256_digest(&bytes));
    }
}
