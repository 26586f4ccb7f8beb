//! Cosign key-pair signatures of `oci:` modules: the public keys a host
//! trusts, and the check of a signature manifest's layers against them.
//!
//! `cosign sign --key` stores a signature of an artifact whose manifest
//! digest is `sha256:HEX` under the tag `sha256-HEX.sig` of the same
//! repository: an OCI manifest whose layers are simple-signing payloads
//! (`application/vnd.dev.cosign.simplesigning.v1+json`, a JSON document
//! naming the signed manifest digest in `critical.image`), each with its
//! ECDSA P-256 SHA-256 signature (ASN.1 DER, base64) in the annotation
//! `dev.cosignproject.cosign/signature`. Keyless signatures (Fulcio
//! certificates, Rekor entries) are not checked: a key pair needs no
//! network beyond the registry.

use base64::Engine;
use ring::signature::{ECDSA_P256_SHA256_ASN1, UnparsedPublicKey};
use serde::Deserialize;

/// The media type of a cosign signature layer.
pub const SIMPLE_SIGNING_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";

/// The annotation holding a layer's signature.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";

/// The DER prefix of an ECDSA P-256 SubjectPublicKeyInfo (algorithm
/// id-ecPublicKey, curve prime256v1, a 66-byte bit string), before the
/// 65-byte uncompressed point.
const P256_SPKI_PREFIX: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
    0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

/// The public keys an `oci:` module's signature must be made by, named
/// after where they came from (a ConfigMap, a file) for errors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SigningKeys {
    set: String,
    keys: Vec<(String, Vec<u8>)>,
    /// SHA-256 of the keys' names and points: what a verification is
    /// remembered under.
    fingerprint: String,
}

/// Why a public key could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The set holds no key.
    #[error("{set} holds no public key; add a `cosign.pub` (PEM `PUBLIC KEY`)")]
    Empty {
        /// The key set.
        set: String,
    },
    /// A key is not PEM.
    #[error(
        "{set}: key {key} is not a PEM `-----BEGIN PUBLIC KEY-----` block ({problem}); give the `cosign.pub` that `cosign generate-key-pair` wrote"
    )]
    NotPem {
        /// The key set.
        set: String,
        /// The key's name.
        key: String,
        /// What is wrong.
        problem: String,
    },
    /// A key is not ECDSA P-256.
    #[error(
        "{set}: key {key} is not an ECDSA P-256 public key; cosign key pairs are P-256 (`cosign generate-key-pair`)"
    )]
    NotP256 {
        /// The key set.
        set: String,
        /// The key's name.
        key: String,
    },
}

impl SigningKeys {
    /// The keys of set `set` (named in errors) from `(name, PEM)` pairs.
    pub fn from_pems(set: &str, pems: &[(String, String)]) -> Result<SigningKeys, KeyError> {
        if pems.is_empty() {
            return Err(KeyError::Empty {
                set: set.to_string(),
            });
        }
        let keys = pems
            .iter()
            .map(|(name, pem)| Ok((name.clone(), p256_point(set, name, pem)?)))
            .collect::<Result<Vec<_>, KeyError>>()?;
        let mut material = Vec::new();
        for (name, point) in &keys {
            material.extend_from_slice(name.as_bytes());
            material.push(0);
            material.extend_from_slice(point);
        }
        Ok(SigningKeys {
            set: set.to_string(),
            keys,
            fingerprint: crate::sha256_hex(&material),
        })
    }

    /// Identifies the keys (not where they came from): two sets with the
    /// same keys under the same names share it.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// Where the keys came from, and their names: `set (a, b)`.
    pub fn describe(&self) -> String {
        let names: Vec<&str> = self.keys.iter().map(|(n, _)| n.as_str()).collect();
        format!("{} ({})", self.set, names.join(", "))
    }

    /// The name of the key whose signature `signature` (base64 DER) of
    /// `payload` verifies, if any.
    fn signer(&self, payload: &[u8], signature: &str) -> Option<&str> {
        let signature = base64::engine::general_purpose::STANDARD
            .decode(signature.trim())
            .ok()?;
        self.keys
            .iter()
            .find(|(_, point)| {
                UnparsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, point)
                    .verify(payload, &signature)
                    .is_ok()
            })
            .map(|(name, _)| name.as_str())
    }
}

/// The uncompressed point of the P-256 public key in `pem`.
fn p256_point(set: &str, key: &str, pem: &str) -> Result<Vec<u8>, KeyError> {
    let not_pem = |problem: &str| KeyError::NotPem {
        set: set.to_string(),
        key: key.to_string(),
        problem: problem.to_string(),
    };
    let body = pem
        .split("-----BEGIN PUBLIC KEY-----")
        .nth(1)
        .and_then(|rest| rest.split("-----END PUBLIC KEY-----").next())
        .ok_or_else(|| not_pem("no PUBLIC KEY block"))?;
    let body: String = body.chars().filter(|c| !c.is_whitespace()).collect();
    let der = base64::engine::general_purpose::STANDARD
        .decode(body)
        .map_err(|_| not_pem("the block is not base64"))?;
    match der.strip_prefix(&P256_SPKI_PREFIX[..]) {
        Some(point) if point.len() == 65 && point[0] == 0x04 => Ok(point.to_vec()),
        _ => Err(KeyError::NotP256 {
            set: set.to_string(),
            key: key.to_string(),
        }),
    }
}

/// One layer of a signature manifest: its payload and signature.
#[derive(Debug, Clone)]
pub struct SignatureLayer {
    /// The simple-signing payload (the layer's blob).
    pub payload: Vec<u8>,
    /// The base64 signature from the layer's annotation.
    pub signature: String,
}

#[derive(Deserialize)]
struct Payload {
    critical: Critical,
}

#[derive(Deserialize)]
struct Critical {
    image: Image,
}

#[derive(Deserialize)]
struct Image {
    #[serde(rename = "docker-manifest-digest")]
    digest: String,
}

/// Accepts `layers` when one is signed by a key of `keys` and names
/// `manifest_digest`; returns the key's name, or why none does.
pub fn check(
    keys: &SigningKeys,
    manifest_digest: &str,
    layers: &[SignatureLayer],
) -> Result<String, String> {
    if layers.is_empty() {
        return Err("its signature manifest has no signature layer".to_string());
    }
    let mut other_digests = Vec::new();
    for layer in layers {
        let Some(signer) = keys.signer(&layer.payload, &layer.signature) else {
            continue;
        };
        match serde_json::from_slice::<Payload>(&layer.payload) {
            Ok(p) if p.critical.image.digest == manifest_digest => return Ok(signer.to_string()),
            Ok(p) => other_digests.push(p.critical.image.digest),
            Err(e) => other_digests.push(format!("an unreadable payload ({e})")),
        }
    }
    if other_digests.is_empty() {
        Err(format!(
            "none of its {} signature(s) is made by a key of {}",
            layers.len(),
            keys.describe()
        ))
    } else {
        Err(format!(
            "its signature by a key of {} is for another manifest ({}), not {manifest_digest}",
            keys.describe(),
            other_digests.join(", ")
        ))
    }
}

/// The tag cosign stores the signature of `manifest_digest` under.
pub fn signature_tag(manifest_digest: &str) -> String {
    format!("{}.sig", manifest_digest.replacen(':', "-", 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::rand::SystemRandom;
    use ring::signature::{ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, KeyPair};

    /// A fresh key pair: the signing key and its public key as PEM.
    fn key_pair() -> (EcdsaKeyPair, String) {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &rng).unwrap();
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8.as_ref(), &rng)
            .unwrap();
        let mut der = P256_SPKI_PREFIX.to_vec();
        der.extend_from_slice(pair.public_key().as_ref());
        let body = base64::engine::general_purpose::STANDARD.encode(der);
        (
            pair,
            format!("-----BEGIN PUBLIC KEY-----\n{body}\n-----END PUBLIC KEY-----\n"),
        )
    }

    fn signed(pair: &EcdsaKeyPair, digest: &str) -> SignatureLayer {
        let payload = format!(
            r#"{{"critical":{{"identity":{{"docker-reference":"r/f"}},"image":{{"docker-manifest-digest":"{digest}"}},"type":"cosign container image signature"}},"optional":null}}"#
        )
        .into_bytes();
        let signature = pair.sign(&SystemRandom::new(), &payload).unwrap();
        SignatureLayer {
            payload,
            signature: base64::engine::general_purpose::STANDARD.encode(signature.as_ref()),
        }
    }

    #[test]
    fn the_fingerprint_follows_the_keys_not_where_they_came_from() {
        let (_, a) = key_pair();
        let (_, b) = key_pair();
        let set = |name: &str, pems: &[(&str, &String)]| {
            let pems: Vec<(String, String)> = pems
                .iter()
                .map(|(n, p)| (n.to_string(), p.to_string()))
                .collect();
            SigningKeys::from_pems(name, &pems).unwrap()
        };
        let first = set("configmap/x/keys", &[("a.pub", &a)]);
        assert_eq!(
            first.fingerprint(),
            set("--module-signature-keys /k", &[("a.pub", &a)]).fingerprint()
        );
        assert_ne!(
            first.fingerprint(),
            set("configmap/x/keys", &[("a.pub", &b)]).fingerprint()
        );
        assert_ne!(
            first.fingerprint(),
            set("configmap/x/keys", &[("a.pub", &a), ("b.pub", &b)]).fingerprint()
        );
    }

    #[test]
    fn a_signature_by_a_listed_key_for_the_digest_is_accepted() {
        let (pair, pem) = key_pair();
        let (_, other) = key_pair();
        let keys = SigningKeys::from_pems(
            "configmap/keys",
            &[
                ("other.pub".to_string(), other),
                ("team.pub".to_string(), pem),
            ],
        )
        .unwrap();
        let layer = signed(&pair, "sha256:aa");
        assert_eq!(
            check(&keys, "sha256:aa", std::slice::from_ref(&layer)).unwrap(),
            "team.pub"
        );
        // Another manifest's signature is refused, naming both digests.
        let err = check(&keys, "sha256:bb", &[layer]).unwrap_err();
        assert!(
            err.contains("for another manifest (sha256:aa), not sha256:bb"),
            "{err}"
        );
    }

    #[test]
    fn a_signature_by_an_unlisted_key_is_refused_naming_the_set() {
        let (pair, _) = key_pair();
        let (_, listed) = key_pair();
        let keys =
            SigningKeys::from_pems("configmap/keys", &[("a.pub".to_string(), listed)]).unwrap();
        let err = check(&keys, "sha256:aa", &[signed(&pair, "sha256:aa")]).unwrap_err();
        assert!(
            err.contains("none of its 1 signature(s) is made by a key of configmap/keys (a.pub)"),
            "{err}"
        );
        assert!(
            check(&keys, "sha256:aa", &[])
                .unwrap_err()
                .contains("no signature layer")
        );
    }

    #[test]
    fn keys_must_be_p256_pem() {
        let err = SigningKeys::from_pems("k", &[]).unwrap_err();
        assert!(err.to_string().contains("holds no public key"), "{err}");
        let err =
            SigningKeys::from_pems("k", &[("x".to_string(), "hello".to_string())]).unwrap_err();
        assert!(err.to_string().contains("not a PEM"), "{err}");
        // An Ed25519 key (a SubjectPublicKeyInfo of another algorithm).
        let ed25519 = "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEAGb9ECWmEzf6FQbrBZ9w7lshQhqowtrbLDFw4rXAxZuE=\n-----END PUBLIC KEY-----\n";
        let err =
            SigningKeys::from_pems("k", &[("ed".to_string(), ed25519.to_string())]).unwrap_err();
        assert!(
            err.to_string().contains("not an ECDSA P-256 public key"),
            "{err}"
        );
    }

    #[test]
    fn the_signature_tag_is_cosigns() {
        assert_eq!(signature_tag("sha256:abc"), "sha256-abc.sig");
    }
}
