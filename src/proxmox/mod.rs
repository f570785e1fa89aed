//! Typed async client for the Proxmox VE API.
