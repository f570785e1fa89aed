//! Proxmox VE API simulator.
