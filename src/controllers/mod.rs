//! Controllers: thin reconcile loops that fetch what a reconcile needs, call one service entry
//! point and write status back.

pub mod cluster;
pub mod machine;

pub mod rbac;
