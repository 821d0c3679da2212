//! Registry credentials from a Docker config file (`config.json`, as `docker login`, `podman
//! login`, kubelet's image pull Secrets of type `kubernetes.io/dockerconfigjson` and every registry
//! client write it): `{"auths": {"<registry>": {"auth": "<base64 user:password>"}}}`, or
//! `username` and `password` in place of `auth`, or an `identitytoken`.

use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use oci_client::secrets::RegistryAuth;
use serde::Deserialize;

#[derive(Deserialize)]
struct DockerConfig {
    #[serde(default)]
    auths: std::collections::BTreeMap<String, Entry>,
}

#[derive(Deserialize)]
struct Entry {
    auth: Option<String>,
    username: Option<String>,
    password: Option<String>,
    identitytoken: Option<String>,
}

/// The credentials `file` holds for `registry` (`host` or `host:port`); anonymous without a file
/// or without an entry for the registry.
pub fn for_registry(file: Option<&Path>, registry: &str) -> Result<RegistryAuth, String> {
    let Some(file) = file else {
        return Ok(RegistryAuth::Anonymous);
    };
    let text = std::fs::read_to_string(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    from_text(&text, registry).map_err(|e| format!("{}: {e}", file.display()))
}

fn from_text(text: &str, registry: &str) -> Result<RegistryAuth, String> {
    let config: DockerConfig =
        serde_json::from_str(text).map_err(|e| format!("not a Docker config file ({{\"auths\": {{…}}}}): {e}"))?;
    // Keys are written as the bare host, or as a URL of it (older clients).
    let entry = config.auths.iter().find_map(|(key, entry)| {
        let host = key
            .trim_start_matches("https://")
            .trim_start_matches("http://")
            .split('/')
            .next()
            .unwrap_or_default();
        (host == registry).then_some(entry)
    });
    let Some(entry) = entry else {
        return Ok(RegistryAuth::Anonymous);
    };
    if let Some(token) = &entry.identitytoken {
        return Ok(RegistryAuth::Bearer(token.clone()));
    }
    if let (Some(user), Some(password)) = (&entry.username, &entry.password) {
        return Ok(RegistryAuth::Basic(user.clone(), password.clone()));
    }
    let auth = entry
        .auth
        .as_deref()
        .ok_or_else(|| format!("auths.{registry:?} has neither auth nor username and password"))?;
    let decoded = BASE64
        .decode(auth.trim())
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or_else(|| format!("auths.{registry:?}.auth is not base64 of user:password"))?;
    let (user, password) = decoded
        .split_once(':')
        .ok_or_else(|| format!("auths.{registry:?}.auth is not base64 of user:password"))?;
    Ok(RegistryAuth::Basic(user.to_owned(), password.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(auth: RegistryAuth) -> (String, String) {
        match auth {
            RegistryAuth::Basic(u, p) => (u, p),
            other => panic!("not basic: {other:?}"),
        }
    }

    #[test]
    fn the_entry_of_the_registry_is_used_in_each_form() {
        let text = format!(
            r#"{{"auths": {{
                "127.0.0.1:5000": {{"auth": "{}"}},
                "https://registry.example/v1/": {{"username": "bob", "password": "pw"}},
                "tokens.example": {{"identitytoken": "t0k"}}
            }}}}"#,
            BASE64.encode("alice:s3:cret")
        );
        assert_eq!(
            basic(from_text(&text, "127.0.0.1:5000").unwrap()),
            ("alice".into(), "s3:cret".into())
        );
        assert_eq!(
            basic(from_text(&text, "registry.example").unwrap()),
            ("bob".into(), "pw".into())
        );
        assert!(matches!(from_text(&text, "tokens.example").unwrap(), RegistryAuth::Bearer(t) if t == "t0k"));
        assert!(matches!(
            from_text(&text, "elsewhere:5000").unwrap(),
            RegistryAuth::Anonymous
        ));
        assert!(matches!(for_registry(None, "r").unwrap(), RegistryAuth::Anonymous));
    }

    #[test]
    fn a_bad_file_says_why() {
        assert!(
            from_text(r#"{"auths": []}"#, "r")
                .unwrap_err()
                .contains("not a Docker config file")
        );
        let e = from_text(r#"{"auths": {"r": {"auth": "%%%"}}}"#, "r").unwrap_err();
        assert!(e.contains("not base64 of user:password"), "{e}");
        let e = for_registry(Some(Path::new("/nonexistent/config.json")), "r").unwrap_err();
        assert!(e.contains("cannot read /nonexistent/config.json"), "{e}");
    }
}
