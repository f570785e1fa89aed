//! Test control plane.
