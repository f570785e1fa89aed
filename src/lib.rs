//! capmox-rs: a Cluster API infrastructure provider for Proxmox VE.

pub mod autoscaling;
pub mod bootstrap;
pub mod cli;
pub mod cluster;
pub mod conditions;
pub mod context;
pub mod controllers;
pub mod convert;
pub mod credentials;
pub mod diagnostics;
pub mod duration;
pub mod health;
pub mod https;
pub mod ipam;
pub mod leader;
pub mod machine;
pub mod manager;
pub mod merge_patch;
pub mod metrics;
pub mod packaging;
pub mod proxmox;
pub mod telemetry;
pub mod user_agent;
pub mod virtual_machine;
pub mod vm;
pub mod webhooks;
