//! capmox-rs: a Cluster API infrastructure provider for Proxmox VE.

pub mod cluster;
pub mod conditions;
pub mod bootstrap;
pub mod context;
pub mod credentials;
pub mod controllers;
pub mod metrics;
pub mod proxmox;
pub mod cli;
pub mod health;
pub mod leader;
pub mod manager;
pub mod telemetry;
