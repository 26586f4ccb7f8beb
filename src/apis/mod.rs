//! Karpenter v1 API types.
