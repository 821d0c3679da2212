//! The health endpoint's certificate: OCM's server serves `/healthz` over HTTPS with a
//! self-signed certificate it makes at start under `/tmp` (the only writable folder), and the
//! operator's probes ask for HTTPS without checking it. conductor does the same.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

/// Makes a self-signed certificate and its key in `dir` (`tls.crt`, `tls.key`, the key readable
/// by its owner only), replacing what an earlier start left there.
pub fn make(dir: &Path) -> Result<(PathBuf, PathBuf), HealthCertError> {
    let mut names = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
    if let Ok(pod) = std::env::var("POD_NAME")
        && !pod.is_empty()
    {
        names.push(pod);
    }
    let certified = rcgen::generate_simple_self_signed(names).map_err(|e| HealthCertError::Make(e.to_string()))?;
    std::fs::create_dir_all(dir).map_err(|e| HealthCertError::Write(dir.to_owned(), e))?;
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    write(&key, certified.key_pair.serialize_pem().as_bytes(), 0o600)?;
    write(&cert, certified.cert.pem().as_bytes(), 0o644)?;
    Ok((cert, key))
}

fn write(path: &Path, contents: &[u8], mode: u32) -> Result<(), HealthCertError> {
    let _ = std::fs::remove_file(path);
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .and_then(|mut f| f.write_all(contents))
        .map_err(|e| HealthCertError::Write(path.to_owned(), e))
}

#[derive(Debug, thiserror::Error)]
pub enum HealthCertError {
    #[error("cannot make the health endpoint's self-signed certificate: {0}")]
    Make(String),
    #[error("cannot write the health endpoint's certificate to {0} (the pod's /tmp must be writable): {1}")]
    Write(PathBuf, #[source] std::io::Error),
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    #[test]
    fn a_certificate_and_a_private_key_again_at_every_start() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = make(&dir.path().join("health")).unwrap();
        let first = std::fs::read_to_string(&cert).unwrap();
        assert!(first.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(std::fs::read_to_string(&key).unwrap().contains("PRIVATE KEY"));
        assert_eq!(std::fs::metadata(&key).unwrap().permissions().mode() & 0o777, 0o600);
        make(&dir.path().join("health")).unwrap();
        assert_ne!(std::fs::read_to_string(&cert).unwrap(), first);
    }
}
