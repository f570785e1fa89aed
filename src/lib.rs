//! capmox-rs: a Cluster API infrastructure provider for Proxmox VE.

pub mod context;
pub mod controllers;
pub mod metrics;
pub mod proxmox;
