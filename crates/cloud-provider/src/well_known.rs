//! Well-known label, taint and annotation names shared with Kubernetes.

/// Taint the kubelet (`--cloud-provider=external`) puts on a new Node until the cloud node
/// controller has initialized it.
pub const TAINT_UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";
/// Taint the lifecycle controller puts on a Node whose instance is shut down.
pub const TAINT_SHUTDOWN: &str = "node.cloudprovider.kubernetes.io/shutdown";
/// Effect of the shutdown taint.
pub const TAINT_EFFECT_NO_SCHEDULE: &str = "NoSchedule";

/// Annotation carrying the kubelet's `--node-ip` (one IP or an `IPv4,IPv6` pair).
pub const ANNOTATION_PROVIDED_NODE_IP: &str = "alpha.kubernetes.io/provided-node-ip";

/// GA instance type label.
pub const LABEL_INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
/// Beta instance type label.
pub const LABEL_INSTANCE_TYPE_BETA: &str = "beta.kubernetes.io/instance-type";
/// GA zone label.
pub const LABEL_ZONE: &str = "topology.kubernetes.io/zone";
/// Beta zone label.
pub const LABEL_ZONE_BETA: &str = "failure-domain.beta.kubernetes.io/zone";
/// GA region label.
pub const LABEL_REGION: &str = "topology.kubernetes.io/region";
/// Beta region label.
pub const LABEL_REGION_BETA: &str = "failure-domain.beta.kubernetes.io/region";

/// Address types of `NodeAddress.type`.
pub mod address_type {
    /// `Hostname`
    pub const HOSTNAME: &str = "Hostname";
    /// `InternalIP`
    pub const INTERNAL_IP: &str = "InternalIP";
    /// `ExternalIP`
    pub const EXTERNAL_IP: &str = "ExternalIP";
}
