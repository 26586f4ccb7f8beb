//! How a pod is named across the controllers: `namespace/name`, built here
//! only, so keys made from a Kubernetes pod and from the scheduler's
//! [`super::Pod`] always agree.

use std::fmt;

/// A pod's namespace and name. Ordered by namespace, then name.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PodKey {
    /// The namespace (`default` when the pod names none).
    pub namespace: String,
    /// The pod's name.
    pub name: String,
}

impl PodKey {
    /// The key of pod `name` in `namespace`.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        PodKey {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// `namespace/name`, the text of a key, without building the key.
    pub fn text(namespace: &str, name: &str) -> String {
        let mut text = String::with_capacity(namespace.len() + 1 + name.len());
        text.push_str(namespace);
        text.push('/');
        text.push_str(name);
        text
    }
}

impl fmt::Display for PodKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&PodKey::text(&self.namespace, &self.name))
    }
}

/// A key equals its text (`namespace/name`): results name pods by key, and
/// tests and reports compare them with the text a user writes.
impl PartialEq<str> for PodKey {
    fn eq(&self, text: &str) -> bool {
        text.split_once('/')
            .is_some_and(|(namespace, name)| namespace == self.namespace && name == self.name)
    }
}

impl PartialEq<&str> for PodKey {
    fn eq(&self, text: &&str) -> bool {
        *self == **text
    }
}

impl PartialEq<String> for PodKey {
    fn eq(&self, text: &String) -> bool {
        *self == **text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_namespace_slash_name_and_orders_by_namespace_first() {
        let a = PodKey::new("a", "z");
        let b = PodKey::new("b", "a");
        assert_eq!(a.to_string(), "a/z");
        assert_eq!(a.to_string(), PodKey::text("a", "z"));
        assert!(a < b);
    }

    #[test]
    fn equals_its_text_only() {
        let key = PodKey::new("shop", "web-1");
        assert_eq!(key, "shop/web-1");
        assert_ne!(key, "shop/web-2");
        assert_ne!(key, "web-1");
        assert_ne!(PodKey::new("a/b", "c"), "a/b/c");
    }
}
