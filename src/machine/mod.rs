//! The ProxmoxMachine VM lifecycle: the pure placement rules (template, node, VMID) the machine controller applies before cloning.

pub mod scheduling;
pub mod template;
pub mod vmid;
