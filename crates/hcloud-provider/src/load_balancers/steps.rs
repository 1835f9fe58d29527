//! [`Step`]s (one API change each) and [`Notice`]s (what is reported instead of done),
//! both printable for logs and for `plan`.

use std::fmt;

use hcloud_api::models::{
    AlgorithmType, AttachToNetworkRequest, ChangeDnsPtrRequest, Labels, LoadBalancer,
    LoadBalancerTarget, ServiceSpec, ServiceUpdate, TargetSpec,
};

/// One change of a load balancer.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// `PUT` name and/or labels.
    Update {
        /// New name.
        name: Option<String>,
        /// New labels (the whole map).
        labels: Option<Labels>,
    },
    /// `detach_from_network`.
    DetachNetwork(i64),
    /// `attach_to_network`.
    AttachNetwork(AttachToNetworkRequest),
    /// `remove_target`.
    RemoveTarget(TargetSpec),
    /// `delete_service`.
    DeleteService(u16),
    /// `change_type`.
    ChangeType {
        /// Current type name.
        from: String,
        /// New type (name or ID).
        to: String,
    },
    /// `change_algorithm`.
    ChangeAlgorithm {
        /// Current algorithm.
        from: AlgorithmType,
        /// New algorithm.
        to: AlgorithmType,
    },
    /// `update_service`.
    UpdateService {
        /// The body.
        update: ServiceUpdate,
        /// What changes, `what old -> new` (for people).
        changes: Vec<String>,
    },
    /// `add_service`.
    AddService(ServiceSpec),
    /// `add_target`.
    AddTarget(TargetSpec),
    /// `enable_public_interface`.
    EnablePublicInterface,
    /// `disable_public_interface`.
    DisablePublicInterface,
    /// `change_dns_ptr`.
    ChangeDnsPtr(ChangeDnsPtrRequest),
    /// Beyond the official CCM: `PUT` the labels the `labels` annotation changes.
    ChangeLabels {
        /// New labels (the whole map).
        labels: Labels,
        /// What changes, `set label k="v"` / `remove label k` (for people).
        changes: Vec<String>,
    },
    /// Beyond the official CCM: `change_protection` (delete protection on or off).
    ChangeProtection(bool),
}

impl Step {
    /// Whether the step only touches targets (what `update_load_balancer` may do).
    pub fn is_target_step(&self) -> bool {
        matches!(self, Self::AddTarget(_) | Self::RemoveTarget(_))
    }

    /// The kind of change, for a plan.
    pub fn verb(&self) -> cloud_provider::change::Verb {
        use cloud_provider::change::Verb;
        match self {
            Self::AddTarget(_) | Self::AddService(_) | Self::AttachNetwork(_) => Verb::Add,
            Self::RemoveTarget(_) | Self::DeleteService(_) | Self::DetachNetwork(_) => Verb::Remove,
            _ => Verb::Change,
        }
    }

    /// The request that carries the step out, as `METHOD /path/template`.
    pub fn write(&self) -> &'static str {
        match self {
            Self::Update { .. } => "PUT /load_balancers/{id}",
            Self::DetachNetwork(_) => "POST /load_balancers/{id}/actions/detach_from_network",
            Self::AttachNetwork(_) => "POST /load_balancers/{id}/actions/attach_to_network",
            Self::RemoveTarget(_) => "POST /load_balancers/{id}/actions/remove_target",
            Self::DeleteService(_) => "POST /load_balancers/{id}/actions/delete_service",
            Self::ChangeType { .. } => "POST /load_balancers/{id}/actions/change_type",
            Self::ChangeAlgorithm { .. } => "POST /load_balancers/{id}/actions/change_algorithm",
            Self::UpdateService { .. } => "POST /load_balancers/{id}/actions/update_service",
            Self::AddService(_) => "POST /load_balancers/{id}/actions/add_service",
            Self::AddTarget(_) => "POST /load_balancers/{id}/actions/add_target",
            Self::EnablePublicInterface => {
                "POST /load_balancers/{id}/actions/enable_public_interface"
            }
            Self::DisablePublicInterface => {
                "POST /load_balancers/{id}/actions/disable_public_interface"
            }
            Self::ChangeDnsPtr(_) => "POST /load_balancers/{id}/actions/change_dns_ptr",
            Self::ChangeLabels { .. } => "PUT /load_balancers/{id}",
            Self::ChangeProtection(_) => "POST /load_balancers/{id}/actions/change_protection",
        }
    }

    /// Apply a finished target step to `lb` as the API did, so that the load balancer need
    /// not be read again. `false` (and `lb` unchanged) for every other step: what the API
    /// makes of those (addresses, defaults filled in) is only known by reading it.
    pub fn apply_to(&self, lb: &mut LoadBalancer) -> bool {
        match self {
            Self::AddTarget(spec) => {
                lb.targets.retain(|t| !same_target(t, spec));
                lb.targets.push(LoadBalancerTarget {
                    kind: spec.kind.clone(),
                    server: spec.server,
                    label_selector: spec.label_selector.clone(),
                    ip: spec.ip.clone(),
                    use_private_ip: spec.use_private_ip.unwrap_or(false),
                    health_status: Vec::new(),
                    targets: Vec::new(),
                });
                true
            }
            Self::RemoveTarget(spec) => {
                lb.targets.retain(|t| !same_target(t, spec));
                true
            }
            _ => false,
        }
    }
}

/// Whether `target` is the one `spec` names (by server, IP or selector; as the API matches
/// `remove_target`).
fn same_target(target: &LoadBalancerTarget, spec: &TargetSpec) -> bool {
    target.kind == spec.kind
        && match (&spec.server, &spec.ip, &spec.label_selector) {
            (Some(server), _, _) => target.server.as_ref().map(|s| s.id) == Some(server.id),
            (_, Some(ip), _) => target.ip.as_ref().map(|i| &i.ip) == Some(&ip.ip),
            (_, _, Some(selector)) => {
                target.label_selector.as_ref().map(|l| &l.selector) == Some(&selector.selector)
            }
            _ => false,
        }
}

struct Target<'a>(&'a TargetSpec);

impl fmt::Display for Target<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = self.0;
        match (&t.server, &t.ip, &t.label_selector) {
            (Some(s), _, _) => write!(f, "server {}", s.id)?,
            (_, Some(ip), _) => write!(f, "ip {}", ip.ip)?,
            (_, _, Some(sel)) => write!(f, "label selector {:?}", sel.selector)?,
            _ => f.write_str("target")?,
        }
        if t.use_private_ip == Some(true) {
            f.write_str(" (private IP)")?;
        }
        Ok(())
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Update { name, labels } => {
                let mut parts = Vec::new();
                if let Some(n) = name {
                    parts.push(format!("rename to {n:?}"));
                }
                let ours = [
                    super::naming::SERVICE_UID_LABEL,
                    super::cluster::CLUSTER_NAME_LABEL,
                ];
                for (key, value) in ours
                    .into_iter()
                    .filter_map(|key| Some((key, labels.as_ref()?.get(key)?)))
                {
                    parts.push(format!("set label {key}={value}"));
                }
                f.write_str(&parts.join(", "))
            }
            Self::DetachNetwork(n) => write!(f, "detach from network {n}"),
            Self::AttachNetwork(r) => {
                write!(f, "attach to network {}", r.network)?;
                if let Some(ip) = &r.ip {
                    write!(f, " with IP {ip}")?;
                }
                if let Some(range) = &r.ip_range {
                    write!(f, " in subnet {range}")?;
                }
                Ok(())
            }
            Self::RemoveTarget(t) => write!(f, "remove target {}", Target(t)),
            Self::DeleteService(p) => write!(f, "delete service {p}"),
            Self::ChangeType { from, to } => write!(f, "change type {from} -> {to}"),
            Self::ChangeAlgorithm { from, to } => write!(f, "change algorithm {from} -> {to}"),
            Self::UpdateService { update, changes } => {
                write!(
                    f,
                    "update service {}: {}",
                    update.listen_port,
                    changes.join(", ")
                )
            }
            Self::AddService(s) => write!(
                f,
                "add service {} ({} -> {})",
                s.listen_port, s.protocol, s.destination_port
            ),
            Self::AddTarget(t) => write!(f, "add target {}", Target(t)),
            Self::EnablePublicInterface => f.write_str("enable the public interface"),
            Self::DisablePublicInterface => f.write_str("disable the public interface"),
            Self::ChangeDnsPtr(r) => match &r.dns_ptr {
                Some(ptr) => write!(f, "set reverse DNS of {} to {ptr:?}", r.ip),
                None => write!(f, "reset reverse DNS of {}", r.ip),
            },
            Self::ChangeLabels { changes, .. } => f.write_str(&changes.join(", ")),
            Self::ChangeProtection(on) => write!(
                f,
                "turn delete protection {}",
                if *on { "on" } else { "off" }
            ),
        }
    }
}

/// What a notice is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Subject {
    /// The Service.
    Service,
    /// The Node with this name (as the official CCM reports `MaxTargetsReached` and
    /// `UnknownProviderIDPrefix`).
    Node(String),
}

/// Something the desired state leaves out or warns about. With a `reason` it becomes a `Warning` event
/// (the official CCM's reasons); without one it is only logged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    /// The object the event is written for.
    pub subject: Subject,
    /// Event reason; `None`: log only.
    pub reason: Option<&'static str>,
    /// The message.
    pub message: String,
}

impl Notice {
    /// A `Warning` event about the Service.
    pub fn warn(reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            subject: Subject::Service,
            reason: Some(reason),
            message: message.into(),
        }
    }

    /// A `Warning` event about the Node `node`.
    pub fn warn_node(node: &str, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            subject: Subject::Node(node.to_owned()),
            reason: Some(reason),
            message: message.into(),
        }
    }

    /// A log line only.
    pub fn log(message: impl Into<String>) -> Self {
        Self {
            subject: Subject::Service,
            reason: None,
            message: message.into(),
        }
    }
}

impl fmt::Display for Notice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.reason {
            Some(reason) => write!(f, "{reason}: ")?,
            None => f.write_str("note: ")?,
        }
        if let Subject::Node(node) = &self.subject {
            write!(f, "node {node}: ")?;
        }
        f.write_str(&self.message)
    }
}

/// Event reasons, as the official CCM writes them.
pub mod reasons {
    /// A node could not be added: the type's target limit is reached.
    pub const MAX_TARGETS_REACHED: &str = "MaxTargetsReached";
    /// A Service port uses a protocol other than TCP.
    pub const UNSUPPORTED_PROTOCOL_CONFIGURED: &str = "UnsupportedProtocolConfigured";
    /// Neither the `type` annotation nor `HCLOUD_LOAD_BALANCERS_TYPE` is set.
    pub const LOAD_BALANCER_TYPE_UNCONFIGURED: &str = "LoadBalancerTypeUnconfigured";
    /// The load balancer type is deprecated.
    pub const LOAD_BALANCER_TYPE_DEPRECATED: &str = "LoadBalancerTypeDeprecated";
    /// A node's providerID has no known prefix.
    pub const UNKNOWN_PROVIDER_ID_PREFIX: &str = "UnknownProviderIDPrefix";
    /// This CCM only (a safer divergence): a Node's providerID has a Hetzner prefix but no
    /// valid ID; the Node is left out of the targets (the official CCM fails the whole target
    /// update, for every Node).
    pub const INVALID_PROVIDER_ID: &str = "InvalidProviderID";
    /// This CCM only (a safer divergence): a TCP port of the Service has no NodePort
    /// (`spec.allocateLoadBalancerNodePorts: false` and no explicit `nodePort`), so the load
    /// balancer gets no service for it (the official CCM sends destination port 0, which the
    /// API refuses).
    pub const NODE_PORT_NOT_ALLOCATED: &str = "NodePortNotAllocated";
    /// This CCM only (a safer divergence): a load balancer with the Service's name belongs to
    /// another Service and is not taken over.
    pub const LOAD_BALANCER_OWNED_BY_OTHER_SERVICE: &str = "LoadBalancerOwnedByOtherService";
    /// This CCM only (a safer divergence): several load balancers carry the Service's UID.
    pub const DUPLICATE_LOAD_BALANCERS: &str = "DuplicateLoadBalancers";
    /// This CCM only: a Node's server does not exist, so the Node was left out of the targets
    /// (the other targets are still set).
    pub const TARGET_SERVER_NOT_FOUND: &str = "TargetServerNotFound";
    /// This CCM only (with a cluster name): the load balancer with the Service's UID or name
    /// is labelled for another cluster and is not taken over.
    pub const LOAD_BALANCER_OWNED_BY_OTHER_CLUSTER: &str = "LoadBalancerOwnedByOtherCluster";
    /// `use-private-ip` is set, but a Robot Node has no InternalIP.
    pub const INTERNAL_IP_NOT_CONFIGURED: &str = "InternalIPNotConfigured";
    /// A Robot Node's server (or its IP) is not known, so the Node is no target.
    pub const SERVER_NOT_FOUND: &str = "ServerNotFound";
    /// This CCM only: the Service was deleted but its load balancer has delete protection, so
    /// it is kept (as the official CCM does, which only logs it).
    pub const DELETE_PROTECTED: &str = "DeleteProtected";
    /// This CCM only: `spec.loadBalancerSourceRanges` is set, which Hetzner load balancers
    /// cannot enforce (they have no access control list); it is ignored.
    pub const SOURCE_RANGES_IGNORED: &str = "LoadBalancerSourceRangesIgnored";
    /// This CCM only: a `load-balancer.hetzner.cloud/` annotation that no setting reads (a
    /// typo); it is ignored, and the Warning names the closest known key.
    pub const UNKNOWN_ANNOTATION: &str = "UnknownAnnotation";
    /// This CCM only: the `location` or `network-zone` annotation differs from where the
    /// existing load balancer is; Hetzner cannot move a load balancer, so it stays.
    pub const LOAD_BALANCER_NOT_MOVED: &str = "LoadBalancerNotMoved";
    /// This CCM only: a Service sharing a load balancer whose target settings differ from
    /// those of the owner that sets them (the owner of its lowest port); its own are ignored.
    pub const SHARED_LOAD_BALANCER_SETTINGS_IGNORED: &str = "SharedLoadBalancerSettingsIgnored";
    /// This CCM only: a Service cannot share the load balancer it names (it is another
    /// Service's own, or the Service has one of its own).
    pub const SHARED_LOAD_BALANCER_REFUSED: &str = "SharedLoadBalancerRefused";
    /// This CCM only: a Node's server has no public IPv4 and shares no network with the load
    /// balancer, so the Node is left out of the targets (the other targets are still set; the
    /// official CCM fails the whole target update).
    pub const SERVER_WITHOUT_PUBLIC_IPV4: &str = "ServerWithoutPublicIPv4";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_read_like_a_plan() {
        let cases = [
            (
                Step::ChangeAlgorithm {
                    from: AlgorithmType::RoundRobin,
                    to: AlgorithmType::LeastConnections,
                },
                "change algorithm round_robin -> least_connections",
            ),
            (
                Step::AddTarget(TargetSpec::server(42, false)),
                "add target server 42",
            ),
            (
                Step::RemoveTarget(TargetSpec::ip("203.0.113.5")),
                "remove target ip 203.0.113.5",
            ),
            (
                Step::ChangeType {
                    from: "lb11".into(),
                    to: "lb21".into(),
                },
                "change type lb11 -> lb21",
            ),
            (
                Step::AttachNetwork(AttachToNetworkRequest {
                    network: 7,
                    ip: Some("10.0.0.5".into()),
                    ip_range: None,
                }),
                "attach to network 7 with IP 10.0.0.5",
            ),
            (
                Step::UpdateService {
                    update: ServiceUpdate {
                        listen_port: 80,
                        ..ServiceUpdate::default()
                    },
                    changes: vec!["destination port 30080 -> 30081".into()],
                },
                "update service 80: destination port 30080 -> 30081",
            ),
            (
                Step::Update {
                    name: Some("web".into()),
                    labels: None,
                },
                "rename to \"web\"",
            ),
            (
                Step::ChangeLabels {
                    labels: Labels::new(),
                    changes: vec!["set label team=\"a\"".into(), "remove label old".into()],
                },
                "set label team=\"a\", remove label old",
            ),
            (Step::ChangeProtection(true), "turn delete protection on"),
        ];
        for (step, text) in cases {
            assert_eq!(step.to_string(), text);
        }
        assert_eq!(
            Notice::warn_node("n1", reasons::MAX_TARGETS_REACHED, "full").to_string(),
            "MaxTargetsReached: node n1: full"
        );
    }

    #[test]
    fn finished_target_steps_apply_without_a_read() {
        let mut lb = LoadBalancer::default();
        assert!(Step::AddTarget(TargetSpec::server(1, false)).apply_to(&mut lb));
        assert!(Step::AddTarget(TargetSpec::server(2, true)).apply_to(&mut lb));
        assert!(Step::AddTarget(TargetSpec::ip("203.0.113.5")).apply_to(&mut lb));
        // Adding the same server again replaces it (e.g. with another use_private_ip).
        assert!(Step::AddTarget(TargetSpec::server(1, true)).apply_to(&mut lb));
        let servers: Vec<(i64, bool)> = lb
            .targets
            .iter()
            .filter_map(|t| t.server.as_ref().map(|s| (s.id, t.use_private_ip)))
            .collect();
        assert_eq!(servers, [(2, true), (1, true)]);
        assert!(Step::RemoveTarget(TargetSpec::server(2, true)).apply_to(&mut lb));
        assert!(Step::RemoveTarget(TargetSpec::ip("203.0.113.5")).apply_to(&mut lb));
        // An IP target is not a server target with the same number.
        assert!(Step::RemoveTarget(TargetSpec::ip("1")).apply_to(&mut lb));
        assert_eq!(lb.targets.len(), 1);
        assert_eq!(lb.targets[0].server.as_ref().map(|s| s.id), Some(1));
        let before = lb.clone();
        assert!(!Step::EnablePublicInterface.apply_to(&mut lb));
        assert!(!Step::DeleteService(80).apply_to(&mut lb));
        assert_eq!(lb, before);
    }
}
