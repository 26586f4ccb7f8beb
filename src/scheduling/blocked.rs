//! Why a NodePool, or the EC2NodeClass behind it, may not launch: a typed
//! reason for code to act on and a message for people, built where the
//! cause is found and never parsed back from text.

use std::fmt;

/// Why launches are blocked. Its `Display` is what users read (pod errors,
/// events, conditions, `simulate` output).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blocked {
    /// The cause, for code and condition reasons.
    pub reason: BlockedReason,
    /// What a user reads, without the class name when [`Blocked::node_class`]
    /// carries it.
    pub message: String,
    /// The EC2NodeClass the message is about, when the message does not
    /// name it itself; `Display` puts it in front.
    pub node_class: Option<String>,
}

/// The causes of a block, named like Karpenter's condition reasons.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BlockedReason {
    /// The NodePool names an EC2NodeClass that does not exist.
    NodeClassNotFound,
    /// The class's settings cannot be resolved into instance types.
    NodeClassNotResolvable,
    /// The class's `spec.extensions` is invalid, so no module runs.
    InvalidExtensions,
    /// A `failurePolicy: Fail` module failed.
    ModuleFailed,
    /// The class's modules did not finish within their time bound.
    ExtensionsTimedOut,
    /// The NodePool is being deleted.
    NodePoolDeleting,
    /// The NodePool's `Ready` condition is not `True`.
    NodePoolNotReady,
    /// The NodePool is static (`spec.replicas`): it keeps its replicas and
    /// never launches for pods (Karpenter leaves static pools out of the
    /// scheduler).
    StaticNodePool,
}

impl BlockedReason {
    /// The reason in CamelCase, as a condition or event reason.
    pub fn as_str(self) -> &'static str {
        match self {
            BlockedReason::NodeClassNotFound => "NodeClassNotFound",
            BlockedReason::NodeClassNotResolvable => "NodeClassNotResolvable",
            BlockedReason::InvalidExtensions => "InvalidExtensions",
            BlockedReason::ModuleFailed => "ModuleFailed",
            BlockedReason::ExtensionsTimedOut => "ExtensionsTimedOut",
            BlockedReason::NodePoolDeleting => "NodePoolDeleting",
            BlockedReason::NodePoolNotReady => "NodePoolNotReady",
            BlockedReason::StaticNodePool => "StaticNodePool",
        }
    }
}

impl fmt::Display for BlockedReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Blocked {
    /// A block whose message says all there is.
    pub fn new(reason: BlockedReason, message: impl Into<String>) -> Self {
        Blocked {
            reason,
            message: message.into(),
            node_class: None,
        }
    }

    /// A block of EC2NodeClass `node_class` as a whole, its name kept apart
    /// from the message.
    pub fn of_node_class(
        reason: BlockedReason,
        node_class: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Blocked {
            reason,
            message: message.into(),
            node_class: Some(node_class.into()),
        }
    }
}

impl fmt::Display for Blocked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.node_class {
            Some(class) => write!(f, "EC2NodeClass {class:?}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_class_block_names_the_class_in_front_of_its_message() {
        let blocked = Blocked::of_node_class(BlockedReason::InvalidExtensions, "x", "bad entry");
        assert_eq!(blocked.to_string(), "EC2NodeClass \"x\": bad entry");
        assert_eq!(blocked.message, "bad entry");
        let plain = Blocked::new(BlockedReason::ModuleFailed, "filter failed: boom");
        assert_eq!(plain.to_string(), "filter failed: boom");
        assert_eq!(plain.reason.to_string(), "ModuleFailed");
    }
}
