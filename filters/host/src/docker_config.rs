//! Registry credentials from a Docker `config.json`: the file `docker
//! login` and `oras login` write, and the `.dockerconfigjson` key of a
//! Kubernetes `kubernetes.io/dockerconfigjson` Secret. The controller reads
//! it so `oci` sources authenticate the way every other tool does.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde::Deserialize;

use crate::RegistryCredentials;

/// Why a Docker config cannot give credentials. Nothing is skipped
/// silently: an entry that cannot be used is an error naming it.
#[derive(Debug, thiserror::Error)]
pub enum DockerConfigError {
    /// Not JSON of the expected shape. Only where and what kind of fault
    /// is kept: serde's own message quotes the value it met, which may be a
    /// password or an `auth` string.
    #[error(
        "the registry config is not a Docker config.json: {what} at line {line}, column {column} (\"auths\" maps each registry to an object with \"auth\", or \"username\" and \"password\")"
    )]
    Parse {
        /// The kind of fault: syntax, a value of the wrong type, the input
        /// ending early.
        what: &'static str,
        /// Line of the fault, from 1.
        line: usize,
        /// Column of the fault, from 1.
        column: usize,
    },
    /// Credentials come from a helper program, which the controller does
    /// not run.
    #[error(
        "the registry config uses {field}, which runs a credential helper program: put the credentials under \"auths\" instead (`kubectl create secret docker-registry` writes that form)"
    )]
    CredentialHelper {
        /// `credsStore` or `credHelpers`.
        field: &'static str,
    },
    /// An `auths` entry without usable credentials.
    #[error("auths[{registry:?}] in the registry config: {why}")]
    Entry {
        /// The entry's key.
        registry: String,
        /// What is wrong with it and how to fix it.
        why: String,
    },
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DockerConfig {
    #[serde(default)]
    auths: BTreeMap<String, AuthEntry>,
    #[serde(default)]
    creds_store: Option<String>,
    #[serde(default)]
    cred_helpers: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize)]
struct AuthEntry {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default)]
    identitytoken: Option<String>,
}

/// The credentials in a Docker `config.json`, one per `auths` entry. Keys
/// may be a bare registry (`ghcr.io`, `registry.example.com:5000`) or a URL
/// (`https://index.docker.io/v1/`); either way the registry host is kept.
pub fn credentials_from_docker_config(
    text: &str,
) -> Result<Vec<RegistryCredentials>, DockerConfigError> {
    let config: DockerConfig =
        serde_json::from_str(text).map_err(|e| DockerConfigError::Parse {
            what: match e.classify() {
                serde_json::error::Category::Io => "a read error",
                serde_json::error::Category::Syntax => "a JSON syntax error",
                serde_json::error::Category::Data => "a value of the wrong type",
                serde_json::error::Category::Eof => "the end of the text, too early",
            },
            line: e.line(),
            column: e.column(),
        })?;
    if config.creds_store.as_deref().is_some_and(|s| !s.is_empty()) {
        return Err(DockerConfigError::CredentialHelper {
            field: "credsStore",
        });
    }
    if config.cred_helpers.as_ref().is_some_and(|h| !h.is_empty()) {
        return Err(DockerConfigError::CredentialHelper {
            field: "credHelpers",
        });
    }
    config
        .auths
        .into_iter()
        .map(|(key, entry)| {
            let entry_error = |why: &str| DockerConfigError::Entry {
                registry: key.clone(),
                why: why.to_string(),
            };
            let (username, password) = match (entry.auth, entry.username, entry.password) {
                (Some(auth), _, _) if !auth.is_empty() => {
                    let decoded = base64::engine::general_purpose::STANDARD
                        .decode(auth.trim())
                        .map_err(|_| entry_error("\"auth\" is not base64: it must be base64 of user:password"))?;
                    let decoded = String::from_utf8(decoded)
                        .map_err(|_| entry_error("\"auth\" does not decode to text: it must be base64 of user:password"))?;
                    let (user, pass) = decoded
                        .split_once(':')
                        .ok_or_else(|| entry_error("\"auth\" has no ':': it must be base64 of user:password"))?;
                    (user.to_string(), pass.to_string())
                }
                (_, Some(user), Some(pass)) => (user, pass),
                _ if entry.identitytoken.is_some() => {
                    return Err(entry_error(
                        "only an identity token is given, which the controller cannot exchange: give \"auth\" or \"username\" and \"password\"",
                    ));
                }
                _ => {
                    return Err(entry_error(
                        "no credentials: give \"auth\" (base64 of user:password) or \"username\" and \"password\"",
                    ));
                }
            };
            Ok(RegistryCredentials {
                registry: registry_of(&key),
                username,
                password,
            })
        })
        .collect()
}

/// The registry host of an `auths` key: scheme and path are dropped.
fn registry_of(key: &str) -> String {
    let without_scheme = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    without_scheme
        .split('/')
        .next()
        .unwrap_or(without_scheme)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_auth_and_username_password_entries() {
        let auth = base64::engine::general_purpose::STANDARD.encode("robot:s3cret:with-colon");
        let text = format!(
            r#"{{"auths": {{
                "https://index.docker.io/v1/": {{"auth": "{auth}"}},
                "registry.example.com:5000": {{"username": "ci", "password": "pw"}}
            }}}}"#
        );
        let creds = credentials_from_docker_config(&text).unwrap();
        assert_eq!(creds.len(), 2);
        assert_eq!(creds[0].registry, "index.docker.io");
        assert_eq!(creds[0].username, "robot");
        assert_eq!(creds[0].password, "s3cret:with-colon");
        assert_eq!(creds[1].registry, "registry.example.com:5000");
        assert_eq!(creds[1].username, "ci");
    }

    #[test]
    fn unusable_entries_and_helpers_are_errors_that_name_them() {
        let helper = credentials_from_docker_config(r#"{"credsStore": "desktop"}"#).unwrap_err();
        assert!(helper.to_string().contains("credsStore"), "{helper}");
        let token =
            credentials_from_docker_config(r#"{"auths": {"ghcr.io": {"identitytoken": "t"}}}"#)
                .unwrap_err();
        assert!(token.to_string().contains("auths[\"ghcr.io\"]"), "{token}");
        let junk = credentials_from_docker_config(r#"{"auths": {"ghcr.io": {"auth": "%%%"}}}"#)
            .unwrap_err();
        assert!(junk.to_string().contains("base64"), "{junk}");
        let empty = credentials_from_docker_config(r#"{"auths": {"ghcr.io": {}}}"#).unwrap_err();
        assert!(empty.to_string().contains("no credentials"), "{empty}");
        assert!(matches!(
            credentials_from_docker_config("not json"),
            Err(DockerConfigError::Parse { .. })
        ));
    }

    #[test]
    fn a_malformed_config_is_reported_without_the_values_in_it() {
        // An `auth` string where an object belongs, a password of the wrong
        // type next to a syntax fault: serde's own message would quote them.
        for text in [
            r#"{"auths": {"ghcr.io": "cm9ib3Q6aHVudGVyMg=="}}"#,
            r#"{"auths": {"ghcr.io": {"username": "robot", "password": "hunter2", "auth": 7}}}"#,
            r#"{"auths": {"ghcr.io": {"username": "robot", "password": "hunter2"}} hunter2"#,
            r#"{"auths": "hunter2"}"#,
        ] {
            let err = credentials_from_docker_config(text).unwrap_err();
            let shown = err.to_string();
            assert!(matches!(err, DockerConfigError::Parse { .. }), "{shown}");
            assert!(shown.contains("line 1, column"), "{shown}");
            for secret in ["cm9ib3Q6aHVudGVyMg==", "hunter2", "robot"] {
                assert!(!shown.contains(secret), "{secret} in {shown:?}");
            }
        }
    }
}
