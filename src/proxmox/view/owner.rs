//! Who waits on the view: the object a VM belongs to (a ProxmoxMachine, a standalone VM, …), named
//! by its kind, namespace and name. The view wakes owners through the channel their controller
//! subscribed for that kind ([`super::Views::subscribe`]).

use std::fmt;

/// The object a VM belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Owner {
    /// Its kind (`ProxmoxMachine`, …): which controller is woken.
    pub kind: &'static str,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl Owner {
    /// The owner `namespace/name` of `kind`.
    pub fn new(kind: &'static str, namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            kind,
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
    }
}
