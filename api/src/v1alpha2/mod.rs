//! API version v1alpha2: the storage version, CAPI v1beta2 contract.
