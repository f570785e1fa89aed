//! capmox-compatible API types for the `infrastructure.cluster.x-k8s.io` group.
