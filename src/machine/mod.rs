//! The ProxmoxMachine VM lifecycle: the pure placement rules (template, node, VMID) the machine controller applies before cloning.

pub mod desired;
pub mod scheduling;
pub mod state;
pub mod template;
pub mod vmid;
