//! SHA-256 digests: module pins and cache keys.

use sha2::{Digest, Sha256};

use crate::LoadError;

/// Lower-case hex SHA-256 of `bytes`, the form `sha256` pins use.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

/// Checks a pin's syntax and returns it lower-cased. Accepts an optional
/// `sha256:` prefix, as OCI digests are written.
pub(crate) fn normalize_pin(given: &str) -> Result<String, LoadError> {
    let hexpart = given.strip_prefix("sha256:").unwrap_or(given);
    if hexpart.len() == 64 && hexpart.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(hexpart.to_ascii_lowercase())
    } else {
        Err(LoadError::InvalidDigest {
            given: given.to_string(),
        })
    }
}

/// A `std::hash::Hasher` that feeds SHA-256, so an engine's compatibility
/// hash becomes a stable directory name.
pub(crate) struct Sha256Hasher(pub(crate) Sha256);

impl std::hash::Hasher for Sha256Hasher {
    fn finish(&self) -> u64 {
        let d = self.0.clone().finalize();
        let mut first = [0u8; 8];
        first.copy_from_slice(&d[..8]);
        u64::from_le_bytes(first)
    }

    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_digest_of_empty_input() {
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn pins_are_validated() {
        let pin = "E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855";
        assert_eq!(normalize_pin(pin).unwrap(), pin.to_ascii_lowercase());
        assert_eq!(
            normalize_pin(&format!("sha256:{pin}")).unwrap(),
            pin.to_ascii_lowercase()
        );
        assert!(normalize_pin("abc").is_err());
        assert!(normalize_pin(&"g".repeat(64)).is_err());
    }
}
