//! capmox-rs: a Cluster API infrastructure provider for Proxmox VE.

pub mod proxmox;
