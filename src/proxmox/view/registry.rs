//! The views of the manager, one per Proxmox endpoint and user, and the wake-up channels of the
//! controllers that own VMs there (one per owner kind).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::channel::mpsc::{UnboundedReceiver, UnboundedSender, unbounded};

use super::{ClusterName, Owner, ProxmoxView, ResourceList, ViewSettings, lock};
use crate::proxmox::Client;

/// Wakes owners: routes each to the channel its kind's controller subscribed.
#[derive(Debug, Clone, Default)]
pub struct Wake {
    channels: Arc<Mutex<HashMap<&'static str, UnboundedSender<Owner>>>>,
}

impl Wake {
    /// Wakes `owner` (dropped when no controller of its kind listens).
    pub fn send(&self, owner: Owner) {
        if let Some(tx) = lock(&self.channels).get(owner.kind) {
            let _ = tx.unbounded_send(owner);
        }
    }

    /// The channel that receives the wake-ups of owners of `kind` (a new subscription replaces
    /// an older one).
    pub fn subscribe(&self, kind: &'static str) -> UnboundedReceiver<Owner> {
        let (tx, rx) = unbounded();
        lock(&self.channels).insert(kind, tx);
        rx
    }
}

/// Views by Proxmox endpoint and user, created on first use and shared by every controller.
#[derive(Debug)]
pub struct Views {
    views: Mutex<HashMap<String, Arc<ProxmoxView>>>,
    settings: ViewSettings,
    wake: Wake,
}

impl Views {
    /// An empty registry with these settings.
    pub fn new(settings: ViewSettings) -> Self {
        Self {
            views: Mutex::default(),
            settings,
            wake: Wake::default(),
        }
    }

    /// The wake-ups of owners of `kind` (see [`Wake::subscribe`]).
    pub fn subscribe(&self, kind: &'static str) -> UnboundedReceiver<Owner> {
        self.wake.subscribe(kind)
    }

    /// The view of the cluster `client` talks to; a new one shares `resources` and `name` (the
    /// manager's list and name of that cluster).
    pub fn of(
        &self,
        client: &Client,
        resources: impl FnOnce() -> (Arc<ResourceList>, Arc<ClusterName>),
    ) -> Arc<ProxmoxView> {
        let key = client.endpoint_key();
        let mut views = lock(&self.views);
        // A client rebuilt from a rotated credentials Secret has the same key: the view must
        // send with the new one (the shared resource list stays, it is the same cluster).
        if let Some(view) = views.get(&key)
            && view.client().is_same_client(client)
        {
            return Arc::clone(view);
        }
        let (list, name) = resources();
        let view = ProxmoxView::new(client.clone(), list, name, self.settings, self.wake.clone());
        views.insert(key, Arc::clone(&view));
        view
    }
}
