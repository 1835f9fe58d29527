//! Changes: what a controller decides to do to an object or to the cloud, in a form both
//! halves of the one decision path use.
//!
//! Every controller reconciles as read → decide → apply. What decide returns is printed by
//! `plan` ([`crate::plan`]) as [`Change`]s, and carried out by the controller as the
//! [`Write`]s the same decision names: one Kubernetes patch may carry several changes (a
//! Node's providerID, labels and taints), one cloud request carries one. A test compares the
//! writes `plan` names with the writes a reconcile then makes.

use std::fmt;

use serde::Serialize;

/// What kind of change a line of a plan is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verb {
    /// Something is added (a label, a taint, a finalizer, a route).
    Add,
    /// A value changes.
    Change,
    /// Something is removed from an object (a taint, a finalizer).
    Remove,
    /// A cloud resource is created.
    Create,
    /// An object or a cloud resource is deleted.
    Delete,
}

impl Verb {
    /// `+`, `~` or `-`.
    pub fn symbol(self) -> char {
        match self {
            Self::Add | Self::Create => '+',
            Self::Change => '~',
            Self::Remove | Self::Delete => '-',
        }
    }
}

/// One change a controller would make.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Change {
    /// Add, change, remove, create or delete.
    #[serde(rename = "action")]
    pub verb: Verb,
    /// What changes, e.g. `label topology.kubernetes.io/region` or `load balancer "web"`.
    pub target: String,
    /// The current value, when there is one worth showing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// The new value, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
}

impl Change {
    /// A change of `target`.
    pub fn new(verb: Verb, target: impl Into<String>) -> Self {
        Self {
            verb,
            target: target.into(),
            from: None,
            to: None,
        }
    }

    /// With its old and new value.
    #[must_use]
    pub fn values(mut self, from: Option<String>, to: Option<String>) -> Self {
        self.from = from;
        self.to = to;
        self
    }
}

/// One write to an API that carries out changes.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(untagged)]
pub enum Write {
    /// A Kubernetes write, as the apiserver's audit log names it: `patch nodes n1`,
    /// `patch nodes/status n1`, `delete nodes n1`, `create events`.
    Kube(String),
    /// A cloud API request, as `METHOD /path/{id}/template`: `POST /load_balancers`.
    Cloud(String),
}

impl Write {
    /// `verb resource name` of a Kubernetes write (`resource` may carry a subresource:
    /// `nodes/status`).
    pub fn kube(verb: &str, resource: &str, name: &str) -> Self {
        Self::Kube(format!("{verb} {resource} {name}"))
    }

    /// A cloud request `METHOD /path/template`.
    pub fn cloud(method_and_path: impl Into<String>) -> Self {
        Self::Cloud(method_and_path.into())
    }
}

impl fmt::Display for Write {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Kube(write) | Self::Cloud(write) => f.write_str(write),
        }
    }
}

/// A Warning the controllers would record on the object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Warning {
    /// The event reason.
    pub reason: String,
    /// The event message.
    pub message: String,
}

impl Warning {
    /// A Warning with `reason`.
    pub fn new(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            message: message.into(),
        }
    }
}

/// What one decision would do, as `plan` prints it: the changes, the writes that carry them
/// out and the Warnings it records. Each decision renders itself into this from the value its
/// controller applies, so the two never say different things.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Planned {
    /// What would change, in order.
    pub changes: Vec<Change>,
    /// The writes that carry the changes out.
    pub writes: Vec<Write>,
    /// Warnings the controller would record.
    pub warnings: Vec<Warning>,
}

impl Planned {
    /// One change and the write that carries it out.
    pub fn one(change: Change, write: Write) -> Self {
        Self {
            changes: vec![change],
            writes: vec![write],
            warnings: Vec::new(),
        }
    }

    /// Only a Warning.
    pub fn warning(warning: Warning) -> Self {
        Self {
            warnings: vec![warning],
            ..Self::default()
        }
    }
}
