//! Registry credentials from a `kubernetes.io/dockerconfigjson` pull secret (or a
//! `~/.docker/config.json`): `{"auths": {"HOST[:PORT]": {"auth": base64(user:password)}}}`.

use base64::Engine as _;
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
}

/// `HOST[:PORT]` of an `auths` key, which may be written as a URL (`https://host/v1/`), in
/// the one spelling a reference's registry has (`docker login` files Docker Hub's credentials
/// under `https://index.docker.io/v1/`, while a reference names `docker.io`).
fn host_of(key: &str) -> String {
    let key = key.strip_prefix("https://").or_else(|| key.strip_prefix("http://")).unwrap_or(key);
    super::reference::canonical_host(key.split('/').next().unwrap_or(key))
}

/// The most a docker config file (`--registry-auth`, read again at every pull) may hold: a
/// Secret's own limit. A bigger file is not read.
pub const MAX_DOCKER_CONFIG_BYTES: u64 = 1 << 20;

/// The credentials the docker config file `path` gives `registry`, the file read within
/// [`MAX_DOCKER_CONFIG_BYTES`] (`given_files.rs`). An error names the file, never its content.
pub fn from_docker_config_file(path: &std::path::Path, registry: &str) -> Result<RegistryAuth, String> {
    let json = super::given_files::read_within(path, MAX_DOCKER_CONFIG_BYTES).map_err(|why| format!("registry credentials {}: {why}", path.display()))?;
    from_docker_config(&json, registry).map_err(|why| format!("registry credentials {}: {why}", path.display()))
}

/// The credentials a docker config gives `registry`; anonymous if it names none. An error
/// names what is malformed (never the secret itself).
pub fn from_docker_config(json: &[u8], registry: &str) -> Result<RegistryAuth, String> {
    let config: DockerConfig = serde_json::from_slice(json).map_err(|e| format!("not a docker config.json ({{\"auths\": ...}}): {}", where_it_fails(&e)))?;
    let registry_host = super::reference::canonical_host(registry);
    let Some(entry) = config.auths.iter().find(|(key, _)| host_of(key) == registry_host).map(|(_, e)| e) else {
        return Ok(RegistryAuth::Anonymous);
    };
    if let (Some(user), Some(password)) = (&entry.username, &entry.password) {
        return Ok(RegistryAuth::Basic(user.clone(), password.clone()));
    }
    let auth = entry.auth.as_deref().ok_or_else(|| format!("the entry for {registry} has neither auth nor username and password"))?;
    let decoded = base64::engine::general_purpose::STANDARD.decode(auth.trim()).map_err(|_| format!("the auth of {registry} is not base64"))?;
    let decoded = String::from_utf8(decoded).map_err(|_| format!("the auth of {registry} is not UTF-8"))?;
    let (user, password) = decoded.split_once(':').ok_or_else(|| format!("the auth of {registry} is not user:password"))?;
    Ok(RegistryAuth::Basic(user.into(), password.into()))
}

/// What is wrong with a docker config, and where: never serde's own message, which quotes
/// the value it did not expect (a password, a token) into statuses, Events and logs.
fn where_it_fails(error: &serde_json::Error) -> String {
    use serde_json::error::Category;
    let what = match error.classify() {
        Category::Io => "unreadable",
        Category::Syntax => "not JSON",
        Category::Data => "JSON of another shape",
        Category::Eof => "JSON cut short",
    };
    format!("{what} at line {} column {}", error.line(), error.column())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_credentials_file_is_read_only_within_its_cap() {
        let dir = crate::supply::disk_cache::private_temp_dir("zundoko-auth-file-").unwrap();
        let file = dir.join("config.json");
        let json = br#"{"auths":{"r.io":{"username":"a","password":"b"}}}"#.to_vec();
        std::fs::write(&file, &json).unwrap();
        assert!(matches!(from_docker_config_file(&file, "r.io").unwrap(), RegistryAuth::Basic(u, _) if u == "a"));
        // Valid JSON, one byte over the cap (spaces after it): refused unread, naming the file
        // and the cap.
        let mut big = json.clone();
        big.resize(MAX_DOCKER_CONFIG_BYTES as usize + 1, b' ');
        std::fs::write(&file, &big).unwrap();
        let refused = from_docker_config_file(&file, "r.io").unwrap_err();
        assert!(refused.contains(&file.display().to_string()) && refused.contains("1048576-byte limit"), "{refused}");
        assert!(from_docker_config_file(std::path::Path::new("/dev/zero"), "r.io").is_err_and(|e| e.contains("not a regular file")));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn finds_the_registry_in_any_spelling() {
        let json = br#"{"auths":{"https://127.0.0.1:5000/v1/":{"auth":"dTpw"},"other.io":{"username":"a","password":"b"}}}"#;
        assert!(matches!(from_docker_config(json, "127.0.0.1:5000").unwrap(), RegistryAuth::Basic(u, p) if u == "u" && p == "p"));
        assert!(matches!(from_docker_config(json, "other.io").unwrap(), RegistryAuth::Basic(u, p) if u == "a" && p == "b"));
        assert!(matches!(from_docker_config(json, "elsewhere.io").unwrap(), RegistryAuth::Anonymous));
        // `docker login`'s key for Docker Hub serves a reference's `docker.io`, and hosts
        // match whatever their case.
        let hub = br#"{"auths":{"https://index.docker.io/v1/":{"username":"hub","password":"p"},"Ghcr.IO":{"username":"gh","password":"p"}}}"#;
        assert!(matches!(from_docker_config(hub, "docker.io").unwrap(), RegistryAuth::Basic(u, _) if u == "hub"));
        assert!(matches!(from_docker_config(hub, "ghcr.io").unwrap(), RegistryAuth::Basic(u, _) if u == "gh"));
        assert!(matches!(from_docker_config(hub, "quay.io").unwrap(), RegistryAuth::Anonymous));
        let bad = from_docker_config(br#"{"auths":{"r.io":{"auth":"bm9jb2xvbg=="}}}"#, "r.io").unwrap_err();
        assert!(bad.contains("not user:password") && !bad.contains("nocolon"), "{bad}");
        assert!(from_docker_config(b"nope", "r.io").unwrap_err().contains("not a docker config"));
    }

    #[test]
    fn a_malformed_config_is_named_by_where_it_fails_never_by_what_it_holds() {
        let secret = "hunter2-5be0c1d7";
        // serde's own messages quote the value (`invalid type: string "hunter2..."`).
        for json in [
            format!(r#"{{"auths": "{secret}"}}"#),
            format!(r#"{{"auths": {{"r.io": {{"auth": ["{secret}"]}}}}}}"#),
            format!(r#"{{"auths": {{"r.io": {{"username": 7, "password": "{secret}"}}}}}}"#),
            format!(r#"{{"auths": {{"{secret}": 1}}}}"#),
            format!(r#"{{"auths": {{"r.io": {{"auth": "{secret}"#),
            secret.to_string(),
        ] {
            let why = from_docker_config(json.as_bytes(), "r.io").unwrap_err();
            assert!(why.contains("not a docker config.json") && why.contains(" at line 1 column "), "{why}");
            assert!(!why.contains("hunter2"), "the secret's content in the message: {why}");
        }
    }
}
