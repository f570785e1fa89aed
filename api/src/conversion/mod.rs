//! Conversion between v1alpha1 and v1alpha2 (hub) as pure functions.
