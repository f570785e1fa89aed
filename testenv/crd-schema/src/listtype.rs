//! `x-kubernetes-list-type` set/map uniqueness.
