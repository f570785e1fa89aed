//! API version v1alpha1: served for the CAPI v1beta1 contract (CAPI <= v1.10).
