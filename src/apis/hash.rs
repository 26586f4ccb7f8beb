//! What the NodePool and EC2NodeClass hashes share: a canonical form of a
//! spec (lists as sets, empty values ignored), a stable 64-bit FNV-1a so
//! values survive upgrades, and the re-stamping of NodeClaims whose hash
//! is of another version (Karpenter's, after a migration).

use std::collections::BTreeMap;

use kube::ResourceExt;
use serde_json::Value;

use crate::apis::NodeClaim;
use crate::apis::conditions::{NODE_CLAIM_DRIFTED, find_condition};

/// `value` with nulls and empty strings, lists and maps dropped, map keys
/// sorted and lists sorted (as sets); `None` when nothing is left.
pub fn canonical(value: Value) -> Option<Value> {
    match value {
        Value::Null => None,
        Value::String(s) if s.is_empty() => None,
        Value::Array(items) => {
            let mut items: Vec<Value> = items.into_iter().filter_map(canonical).collect();
            items.sort_by_key(|v| v.to_string());
            items.dedup();
            (!items.is_empty()).then_some(Value::Array(items))
        }
        Value::Object(map) => {
            let sorted: std::collections::BTreeMap<String, Value> = map
                .into_iter()
                .filter_map(|(k, v)| canonical(v).map(|v| (k, v)))
                .collect();
            (!sorted.is_empty()).then(|| Value::Object(sorted.into_iter().collect()))
        }
        other => Some(other),
    }
}

/// FNV-1a of `bytes`: stable across builds and platforms.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// The annotations re-stamping writes on `claim` for a hash `hash` of
/// version `version` under `hash_key`/`version_key`: nothing when the claim
/// already carries this version; otherwise the version, and the hash unless
/// the claim is already `Drifted` — a drift found under the old hash cannot
/// be re-checked under the new one, so the old hash stays and the claim
/// stays drifted (Karpenter's hash controllers do the same).
pub fn restamp(
    claim: &NodeClaim,
    hash: &str,
    hash_key: &'static str,
    version_key: &'static str,
    version: &str,
) -> BTreeMap<&'static str, String> {
    let mut out = BTreeMap::new();
    if claim.annotations().get(version_key).map(String::as_str) == Some(version) {
        return out;
    }
    out.insert(version_key, version.to_string());
    let conditions = claim
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    if find_condition(conditions, NODE_CLAIM_DRIFTED).is_none() {
        out.insert(hash_key, hash.to_string());
    }
    out
}
