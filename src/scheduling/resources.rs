//! Resource amounts (CPU, memory, storage, pods, extended resources) and
//! parsing of Kubernetes quantity strings into them.

use std::collections::BTreeMap;
use std::fmt;

use thiserror::Error;

/// Kubernetes resource name for CPU.
pub const CPU: &str = "cpu";
/// Kubernetes resource name for memory.
pub const MEMORY: &str = "memory";
/// Kubernetes resource name for ephemeral storage.
pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
/// Kubernetes resource name for the pod count.
pub const PODS: &str = "pods";

/// Why a quantity string was rejected.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum QuantityError {
    /// Not a Kubernetes quantity at all.
    #[error(
        "{resource}: {text:?} is not a Kubernetes quantity; write e.g. \"100m\", \"1.5\", \"512Mi\", \"1G\" or \"2e3\""
    )]
    Malformed {
        /// Resource the quantity was for.
        resource: String,
        /// The text given.
        text: String,
    },
    /// Negative amounts are not valid requests or capacities.
    #[error("{resource}: {text:?} is negative; resource amounts must be zero or more")]
    Negative {
        /// Resource the quantity was for.
        resource: String,
        /// The text given.
        text: String,
    },
    /// The amount does not fit in 64 bits.
    #[error("{resource}: {text:?} is too large")]
    TooLarge {
        /// Resource the quantity was for.
        resource: String,
        /// The text given.
        text: String,
    },
}

/// Parses a quantity and returns `ceil(value × 10^scale)`: scale 3 gives
/// millis (CPU), scale 0 gives whole units (bytes, counts), rounding up as
/// Kubernetes does.
pub fn parse_quantity(resource: &str, text: &str, scale: i32) -> Result<i64, QuantityError> {
    let malformed = || QuantityError::Malformed {
        resource: resource.to_string(),
        text: text.to_string(),
    };
    let too_large = || QuantityError::TooLarge {
        resource: resource.to_string(),
        text: text.to_string(),
    };
    let trimmed = text.trim();
    let (negative, body) = match trimmed.as_bytes().first() {
        Some(b'-') => (true, &trimmed[1..]),
        Some(b'+') => (false, &trimmed[1..]),
        _ => (false, trimmed),
    };
    let number_end = body
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(body.len());
    let (number, suffix) = body.split_at(number_end);
    if number.is_empty() || number == "." || number.matches('.').count() > 1 {
        return Err(malformed());
    }
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    let mut mantissa: i128 = 0;
    for digit in int_part.bytes().chain(frac_part.bytes()) {
        mantissa = mantissa
            .checked_mul(10)
            .and_then(|m| m.checked_add(i128::from(digit - b'0')))
            .ok_or_else(too_large)?;
    }
    let mut exp10: i32 = -(frac_part.len() as i32);
    let mut binary: i128 = 1;
    match suffix {
        "" => {}
        "n" => exp10 -= 9,
        "u" => exp10 -= 6,
        "m" => exp10 -= 3,
        "k" => exp10 += 3,
        "M" => exp10 += 6,
        "G" => exp10 += 9,
        "T" => exp10 += 12,
        "P" => exp10 += 15,
        "E" => exp10 += 18,
        "Ki" => binary = 1 << 10,
        "Mi" => binary = 1 << 20,
        "Gi" => binary = 1 << 30,
        "Ti" => binary = 1 << 40,
        "Pi" => binary = 1 << 50,
        "Ei" => binary = 1 << 60,
        s if s.starts_with(['e', 'E']) => {
            let exponent: i32 = s[1..].parse().map_err(|_| malformed())?;
            if exponent.abs() > 40 {
                return Err(too_large());
            }
            exp10 += exponent;
        }
        _ => return Err(malformed()),
    }
    if negative && mantissa != 0 {
        return Err(QuantityError::Negative {
            resource: resource.to_string(),
            text: text.to_string(),
        });
    }
    let mut value = mantissa.checked_mul(binary).ok_or_else(too_large)?;
    let shift = exp10 + scale;
    if shift >= 0 {
        for _ in 0..shift {
            value = value.checked_mul(10).ok_or_else(too_large)?;
        }
    } else {
        let mut divisor: i128 = 1;
        for _ in 0..(-shift) {
            divisor = match divisor.checked_mul(10) {
                Some(d) => d,
                None => return Ok(if value > 0 { 1 } else { 0 }),
            };
        }
        // Rounded up without `value + divisor - 1`, which overflows for a
        // mantissa near i128::MAX.
        value = value / divisor + i128::from(value % divisor != 0);
    }
    i64::try_from(value).map_err(|_| too_large())
}

/// An amount of every resource a node offers or a pod requests. CPU is in
/// millicores, memory and ephemeral storage in bytes, pods as a count;
/// anything else (GPUs, Neuron devices, ...) by resource name in whole units.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Resources {
    /// CPU in millicores.
    pub cpu_millis: i64,
    /// Memory in bytes.
    pub memory: i64,
    /// Ephemeral storage in bytes.
    pub ephemeral_storage: i64,
    /// Number of pods.
    pub pods: i64,
    /// Extended resources by name (e.g. `nvidia.com/gpu`), in whole units.
    pub extended: BTreeMap<String, i64>,
}

impl Resources {
    /// Nothing.
    pub fn zero() -> Self {
        Self::default()
    }

    /// CPU (millicores) and memory (bytes) only; handy in tests and benchmarks.
    pub fn cpu_memory(cpu_millis: i64, memory: i64) -> Self {
        Resources {
            cpu_millis,
            memory,
            ..Self::default()
        }
    }

    /// Builder-style setter for the pod count.
    pub fn with_pods(mut self, pods: i64) -> Self {
        self.pods = pods;
        self
    }

    /// Builder-style setter for an extended resource.
    pub fn with_extended(mut self, name: &str, amount: i64) -> Self {
        self.set(name, amount);
        self
    }

    /// Parses a Kubernetes resource list (`{"cpu": "500m", "memory": "1Gi"}`).
    pub fn parse<'a>(
        list: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, QuantityError> {
        let mut out = Resources::zero();
        for (name, text) in list {
            let scale = if name == CPU { 3 } else { 0 };
            let amount = parse_quantity(name, text, scale)?;
            out.set(name, amount);
        }
        Ok(out)
    }

    /// The amount of `name`, in this type's units.
    pub fn get(&self, name: &str) -> i64 {
        match name {
            CPU => self.cpu_millis,
            MEMORY => self.memory,
            EPHEMERAL_STORAGE => self.ephemeral_storage,
            PODS => self.pods,
            other => self.extended.get(other).copied().unwrap_or(0),
        }
    }

    /// Sets the amount of `name`.
    pub fn set(&mut self, name: &str, amount: i64) {
        match name {
            CPU => self.cpu_millis = amount,
            MEMORY => self.memory = amount,
            EPHEMERAL_STORAGE => self.ephemeral_storage = amount,
            PODS => self.pods = amount,
            other => {
                if amount == 0 {
                    self.extended.remove(other);
                } else {
                    self.extended.insert(other.to_string(), amount);
                }
            }
        }
    }

    /// Adds `other` into `self`.
    pub fn add(&mut self, other: &Resources) {
        self.cpu_millis = self.cpu_millis.saturating_add(other.cpu_millis);
        self.memory = self.memory.saturating_add(other.memory);
        self.ephemeral_storage = self
            .ephemeral_storage
            .saturating_add(other.ephemeral_storage);
        self.pods = self.pods.saturating_add(other.pods);
        for (name, amount) in &other.extended {
            let entry = self.extended.entry(name.clone()).or_insert(0);
            *entry = entry.saturating_add(*amount);
        }
    }

    /// `self + other` as a new value.
    pub fn plus(&self, other: &Resources) -> Resources {
        let mut out = self.clone();
        out.add(other);
        out
    }

    /// Subtracts `other`, flooring every resource at zero.
    pub fn sub_saturating(&mut self, other: &Resources) {
        self.cpu_millis = (self.cpu_millis - other.cpu_millis).max(0);
        self.memory = (self.memory - other.memory).max(0);
        self.ephemeral_storage = (self.ephemeral_storage - other.ephemeral_storage).max(0);
        self.pods = (self.pods - other.pods).max(0);
        for (name, amount) in &other.extended {
            if let Some(entry) = self.extended.get_mut(name) {
                *entry = (*entry - amount).max(0);
            }
        }
        self.extended.retain(|_, v| *v > 0);
    }

    /// `self - other`, floored at zero.
    pub fn minus(&self, other: &Resources) -> Resources {
        let mut out = self.clone();
        out.sub_saturating(other);
        out
    }

    /// Per-resource maximum of the two.
    pub fn max_with(&mut self, other: &Resources) {
        self.cpu_millis = self.cpu_millis.max(other.cpu_millis);
        self.memory = self.memory.max(other.memory);
        self.ephemeral_storage = self.ephemeral_storage.max(other.ephemeral_storage);
        self.pods = self.pods.max(other.pods);
        for (name, amount) in &other.extended {
            let entry = self.extended.entry(name.clone()).or_insert(0);
            *entry = (*entry).max(*amount);
        }
    }

    /// Whether `self` (a request) fits within `available`.
    pub fn fits(&self, available: &Resources) -> bool {
        self.first_shortfall(available).is_none()
    }

    /// The first resource name where `self` exceeds `available`, if any.
    pub fn first_shortfall(&self, available: &Resources) -> Option<&str> {
        if self.cpu_millis > available.cpu_millis {
            return Some(CPU);
        }
        if self.memory > available.memory {
            return Some(MEMORY);
        }
        if self.ephemeral_storage > available.ephemeral_storage {
            return Some(EPHEMERAL_STORAGE);
        }
        if self.pods > available.pods {
            return Some(PODS);
        }
        self.extended
            .iter()
            .find(|(name, amount)| **amount > available.extended.get(*name).copied().unwrap_or(0))
            .map(|(name, _)| name.as_str())
    }

    /// Kubernetes quantities for every non-zero resource (`cpu` in cores or
    /// millicores, byte amounts in `Gi`/`Mi` when whole), as a NodeClaim's or
    /// Node's capacity is written.
    pub fn to_quantities(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        if self.cpu_millis != 0 {
            let cpu = if self.cpu_millis % 1000 == 0 {
                (self.cpu_millis / 1000).to_string()
            } else {
                format!("{}m", self.cpu_millis)
            };
            out.insert(CPU.to_string(), cpu);
        }
        for (name, bytes) in [
            (MEMORY, self.memory),
            (EPHEMERAL_STORAGE, self.ephemeral_storage),
        ] {
            if bytes != 0 {
                out.insert(name.to_string(), bytes_quantity(bytes));
            }
        }
        if self.pods != 0 {
            out.insert(PODS.to_string(), self.pods.to_string());
        }
        for (name, amount) in &self.extended {
            if *amount != 0 {
                out.insert(name.clone(), amount.to_string());
            }
        }
        out
    }

    /// True when every amount is zero.
    pub fn is_zero(&self) -> bool {
        self.cpu_millis == 0
            && self.memory == 0
            && self.ephemeral_storage == 0
            && self.pods == 0
            && self.extended.values().all(|v| *v == 0)
    }
}

/// A byte amount as a quantity: `Gi` or `Mi` when whole, else bytes.
pub fn bytes_quantity(bytes: i64) -> String {
    const MI: i64 = 1 << 20;
    if bytes % (1024 * MI) == 0 {
        format!("{}Gi", bytes / (1024 * MI))
    } else if bytes % MI == 0 {
        format!("{}Mi", bytes / MI)
    } else {
        bytes.to_string()
    }
}

impl fmt::Display for Resources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if self.cpu_millis != 0 {
            parts.push(format!("cpu={}m", self.cpu_millis));
        }
        if self.memory != 0 {
            parts.push(format!("memory={}Mi", (self.memory + (1 << 20) - 1) >> 20));
        }
        if self.ephemeral_storage != 0 {
            parts.push(format!(
                "ephemeral-storage={}Mi",
                (self.ephemeral_storage + (1 << 20) - 1) >> 20
            ));
        }
        if self.pods != 0 {
            parts.push(format!("pods={}", self.pods));
        }
        for (name, amount) in &self.extended {
            parts.push(format!("{name}={amount}"));
        }
        write!(f, "{{{}}}", parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kubernetes_quantities() {
        assert_eq!(parse_quantity("cpu", "100m", 3), Ok(100));
        assert_eq!(parse_quantity("cpu", "1.5", 3), Ok(1500));
        assert_eq!(parse_quantity("cpu", "2", 3), Ok(2000));
        assert_eq!(parse_quantity("cpu", "1u", 3), Ok(1), "rounds up");
        assert_eq!(parse_quantity("memory", "512Mi", 0), Ok(512 << 20));
        assert_eq!(parse_quantity("memory", "1G", 0), Ok(1_000_000_000));
        assert_eq!(parse_quantity("memory", "2e3", 0), Ok(2000));
        assert_eq!(parse_quantity("memory", "1.5Gi", 0), Ok(3 << 29));
        assert_eq!(parse_quantity("memory", "0", 0), Ok(0));
        assert_eq!(parse_quantity("pods", "+110", 0), Ok(110));
    }

    #[test]
    fn rejects_bad_quantities_naming_the_resource() {
        for bad in ["", "abc", "1.2.3", "12Q", "1e", ".", "Mi"] {
            let err = parse_quantity("memory", bad, 0).unwrap_err();
            assert!(err.to_string().starts_with("memory:"), "{bad}: {err}");
        }
        assert!(matches!(
            parse_quantity("cpu", "-1", 3),
            Err(QuantityError::Negative { .. })
        ));
        assert!(matches!(
            parse_quantity("memory", "99999E", 0),
            Err(QuantityError::TooLarge { .. })
        ));
    }

    #[test]
    fn arithmetic_and_fit() {
        let node = Resources::parse([
            ("cpu", "2"),
            ("memory", "4Gi"),
            ("pods", "10"),
            ("nvidia.com/gpu", "1"),
        ])
        .unwrap();
        let pod = Resources::parse([("cpu", "1500m"), ("memory", "1Gi"), ("pods", "1")]).unwrap();
        assert!(pod.fits(&node));
        let two = pod.plus(&pod);
        assert_eq!(two.first_shortfall(&node), Some(CPU));
        let gpu_pod = Resources::zero().with_extended("nvidia.com/gpu", 2);
        assert_eq!(gpu_pod.first_shortfall(&node), Some("nvidia.com/gpu"));
        let left = node.minus(&two);
        assert_eq!(left.cpu_millis, 0);
        assert_eq!(left.memory, 2 << 30);
        assert_eq!(left.get("nvidia.com/gpu"), 1);
    }
}
