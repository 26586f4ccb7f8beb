//! An entry's own signature keys: the ConfigMap its `signatureKeys` names,
//! read into the key set the host checks an `oci:` module's cosign
//! signature against (docs/security.md, "Signed modules").

use std::collections::BTreeMap;

use nodewright_host::SigningKeys;

use super::{ConfigMapSource, observe};
use crate::apis::extensions::SignatureKeysSource;

/// The keys of `source` (every `data` entry is a PEM public key), named
/// `configmap/NAMESPACE/NAME` in errors. A failure comes with its metric
/// `reason` and a message naming `field`.
pub(super) fn entry_keys(
    source: &SignatureKeysSource,
    field: &str,
    config_maps: &dyn ConfigMapSource,
) -> Result<SigningKeys, (&'static str, String)> {
    let (namespace, name) = (source.namespace.as_str(), source.name.as_str());
    let found = config_maps.config_map(namespace, name).ok_or_else(|| {
        let message = format!(
            "{field}.signatureKeys: ConfigMap {namespace}/{name} not found; create it from the public keys (`kubectl -n {namespace} create configmap {name} --from-file=team.pub=cosign.pub`)"
        );
        (observe::CONFIG_MAP_NOT_FOUND, message)
    })?;
    let pems: Vec<(String, String)> = found
        .data
        .iter()
        .flatten()
        .map(|(key, pem)| (key.clone(), pem.clone()))
        .collect();
    SigningKeys::from_pems(&format!("configmap/{namespace}/{name}"), &pems).map_err(|e| {
        (
            observe::SIGNATURE_KEYS,
            format!("{field}.signatureKeys: {e}"),
        )
    })
}

/// What the key ConfigMap of an entry holds now (`None` while it does not
/// exist): part of a cached outcome's key, so a changed key set is checked
/// again rather than served from the cache.
pub(super) fn key_material(
    source: &SignatureKeysSource,
    config_maps: &dyn ConfigMapSource,
) -> Option<BTreeMap<String, String>> {
    config_maps
        .config_map(&source.namespace, &source.name)
        .map(|found| found.data.clone().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;

    fn keys_config_map(data: &[(&str, &str)]) -> Vec<ConfigMap> {
        let mut config_map = ConfigMap::default();
        config_map.metadata.name = Some("keys".into());
        config_map.metadata.namespace = Some("nodewright".into());
        config_map.data = Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        vec![config_map]
    }

    fn source() -> SignatureKeysSource {
        SignatureKeysSource {
            name: "keys".into(),
            namespace: "nodewright".into(),
        }
    }

    const FIELD: &str = "spec.extensions.instanceFilters[0]";

    #[test]
    fn a_missing_config_map_names_the_field_and_how_to_create_it() {
        let (reason, message) = entry_keys(&source(), FIELD, &Vec::new()).unwrap_err();
        assert_eq!(reason, observe::CONFIG_MAP_NOT_FOUND);
        assert!(
            message.starts_with(
                "spec.extensions.instanceFilters[0].signatureKeys: ConfigMap nodewright/keys not found"
            ),
            "{message}"
        );
        assert!(message.contains("create configmap keys"), "{message}");
        assert_eq!(key_material(&source(), &Vec::new()), None);
    }

    #[test]
    fn a_key_that_is_not_pem_or_no_key_at_all_is_refused() {
        let (reason, message) =
            entry_keys(&source(), FIELD, &keys_config_map(&[("team.pub", "hello")])).unwrap_err();
        assert_eq!(reason, observe::SIGNATURE_KEYS);
        assert!(
            message.contains("configmap/nodewright/keys: key team.pub is not a PEM"),
            "{message}"
        );
        let (_, message) = entry_keys(&source(), FIELD, &keys_config_map(&[])).unwrap_err();
        assert!(message.contains("holds no public key"), "{message}");
    }

    #[test]
    fn the_key_material_changes_with_the_config_map() {
        let before = key_material(&source(), &keys_config_map(&[("a.pub", "A")]));
        let after = key_material(&source(), &keys_config_map(&[("a.pub", "B")]));
        assert!(before.is_some());
        assert_ne!(before, after);
    }
}
