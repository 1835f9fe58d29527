//! `cloud_controller_manager_operations_total{op}`: how often each provider operation was
//! called, with the `op` values of the official Hetzner CCM so that its dashboards and alerts
//! keep working.
//!
//! [`Operations`] is a cheap, cloneable handle; every capability of one provider shares one,
//! registered once by [`crate::HcloudProvider::register_metrics`]. The `op` values are the
//! constants of [`op`], grouped by the area of the official code base they come from. Not every
//! official value has a counterpart here: the annotation parsers (`annotation/*`) and the
//! health-check extraction are part of one pass in this project and are never counted, so they
//! have no constant; a value is counted where the same work happens.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// Registered name of the counter family (the exposition adds `_total`).
pub const OPERATIONS_METRIC: &str = "cloud_controller_manager_operations";

/// The official CCM's `op` label values.
pub mod op {
    /// Provider setup and the cloud-level calls.
    pub mod cloud {
        /// The provider was built.
        pub const NEW_CLOUD: &str = "hcloud/newCloud";
        /// The metadata service was asked whether this host is in the network.
        pub const SERVER_IS_ATTACHED_TO_NETWORK: &str = "serverIsAttachedToNetwork";
    }

    /// InstancesV2.
    pub mod instances {
        /// `InstanceExists`.
        pub const INSTANCE_EXISTS: &str = "hcloud/instancesv2.InstanceExists";
        /// `InstanceShutdown`.
        pub const INSTANCE_SHUTDOWN: &str = "hcloud/instancesv2.InstanceShutdown";
        /// `InstanceMetadata`.
        pub const INSTANCE_METADATA: &str = "hcloud/instancesv2.InstanceMetadata";
        /// A Robot server looked up by name.
        pub const GET_ROBOT_SERVER_BY_NAME: &str = "hcloud/getRobotServerByName";
        /// A Robot server looked up by number.
        pub const GET_ROBOT_SERVER_BY_ID: &str = "hcloud/getRobotServerByID";
    }

    /// Routes.
    pub mod routes {
        /// The routes capability was built.
        pub const NEW_ROUTES: &str = "hcloud/newRoutes";
        /// The network (with its routes) was read again.
        pub const RELOAD_NETWORK: &str = "hcloud/reloadNetwork";
        /// `ListRoutes`.
        pub const LIST_ROUTES: &str = "hcloud/ListRoutes";
        /// `CreateRoute`.
        pub const CREATE_ROUTE: &str = "hcloud/CreateRoute";
        /// `DeleteRoute`.
        pub const DELETE_ROUTE: &str = "hcloud/DeleteRoute";
    }

    /// The load balancer capability (the calls of the service controller).
    pub mod load_balancers {
        /// `GetLoadBalancer`.
        pub const GET_LOAD_BALANCER: &str = "hcloud/loadBalancers.GetLoadBalancer";
        /// `EnsureLoadBalancer`.
        pub const ENSURE_LOAD_BALANCER: &str = "hcloud/loadBalancers.EnsureLoadBalancer";
        /// The ingress status built from a load balancer.
        pub const GET_LOAD_BALANCER_STATUS_INGRESS: &str =
            "hcloud/loadBalancers.getLoadBalancerStatusIngress";
        /// `UpdateLoadBalancer`.
        pub const UPDATE_LOAD_BALANCER: &str = "hcloud/loadBalancers.UpdateLoadBalancer";
        /// `EnsureLoadBalancerDeleted`.
        pub const ENSURE_LOAD_BALANCER_DELETED: &str =
            "hcloud/loadBalancers.EnsureLoadBalancerDeleted";
    }

    /// Load balancer operations below the capability (the official `hcops` package).
    pub mod load_balancer_ops {
        /// Lookup by the Service UID label.
        pub const GET_BY_K8S_SERVICE_UID: &str = "hcops/LoadBalancerOps.GetByK8SServiceUID";
        /// Lookup by name (also used by the official code for lookup by ID).
        pub const GET_BY_NAME: &str = "hcops/LoadBalancerOps.GetByName";
        /// Creation.
        pub const CREATE: &str = "hcops/LoadBalancerOps.Create";
        /// Deletion.
        pub const DELETE: &str = "hcops/LoadBalancerOps.Delete";
        /// Reconciling the load balancer itself.
        pub const RECONCILE_HCLB: &str = "hcops/LoadBalancerOps.ReconcileHCLB";
        /// Name and labels.
        pub const CHANGE_HCLB_INFO: &str = "hcops/LoadBalancerOps.changeHCLBInfo";
        /// IPv4 reverse DNS.
        pub const CHANGE_IPV4_RDNS: &str = "hcops/LoadBalancerOps.changeIPv4RDNS";
        /// IPv6 reverse DNS.
        pub const CHANGE_IPV6_RDNS: &str = "hcops/LoadBalancerOps.changeIPv6RDNS";
        /// Algorithm.
        pub const CHANGE_ALGORITHM: &str = "hcops/LoadBalancerOps.changeAlgorithm";
        /// Load balancer type.
        pub const CHANGE_TYPE: &str = "hcops/LoadBalancerOps.changeType";
        /// Detaching from a network.
        pub const DETACH_FROM_NETWORK: &str = "hcops/LoadBalancerOps.detachFromNetwork";
        /// Attaching to a network.
        pub const ATTACH_TO_NETWORK: &str = "hcops/LoadBalancerOps.attachToNetwork";
        /// Public interface on or off.
        pub const TOGGLE_PUBLIC_INTERFACE: &str = "hcops/LoadBalancerOps.togglePublicInterface";
        /// Targets.
        pub const RECONCILE_HCLB_TARGETS: &str = "hcops/LoadBalancerOps.ReconcileHCLBTargets";
        /// Services (ports).
        pub const RECONCILE_HCLB_SERVICES: &str = "hcops/LoadBalancerOps.ReconcileHCLBServices";
        /// Managed certificate of a Service.
        pub const RECONCILE_MANAGED_CERTIFICATE: &str =
            "hcops/LoadBalancerOps.reconcileManagedCertificate";
        /// Certificate uploaded from a Service's Secret (beyond the official CCM).
        pub const RECONCILE_SECRET_CERTIFICATE: &str =
            "hcops/LoadBalancerOps.reconcileSecretCertificate";
        /// Reading a Service's settings for one load balancer service.
        pub const SERVICE_OPTS_EXTRACT: &str = "hcops/hclbServiceOptsBuilder.extract";
        /// Certificates referenced by name or ID.
        pub const SERVICE_OPTS_RESOLVE_CERTS_BY_NAME_OR_ID: &str =
            "hcops/hclbServiceOptsBuilder.resolveCertsByNameOrID";
        /// Options for adding a load balancer service.
        pub const SERVICE_OPTS_BUILD_ADD: &str = "hcops/hclbServiceOptsBuilder.buildAddServiceOpts";
        /// Options for updating a load balancer service.
        pub const SERVICE_OPTS_BUILD_UPDATE: &str =
            "hcops/hclbServiceOptsBuilder.buildUpdateServiceOpts";
    }

    /// Certificates (official `hcops` package).
    pub mod certificates {
        /// Lookup by name or ID.
        pub const GET_BY_NAME_OR_ID: &str = "hcops/CertificateOps.GetCertificateByNameOrID";
        /// Lookup by label.
        pub const GET_BY_LABEL: &str = "hcops/CertificateOps.GetCertificateByLabel";
        /// Creating a managed certificate.
        pub const CREATE_MANAGED: &str = "hcops/CertificateOps.CreateManagedCertificate";
        /// Uploading a certificate from a Secret (beyond the official CCM).
        pub const CREATE_FROM_SECRET: &str = "hcops/CertificateOps.CreateCertificateFromSecret";
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OpLabels {
    op: &'static str,
}

/// A cheap, cloneable handle on `cloud_controller_manager_operations_total{op}`; all clones
/// count into the same family.
#[derive(Clone, Debug, Default)]
pub struct Operations {
    family: Family<OpLabels, Counter>,
}

impl Operations {
    /// A new, unregistered family.
    pub fn new() -> Self {
        Self::default()
    }

    /// Count one call of `op` (one of the [`op`] constants).
    pub fn count(&self, op: &'static str) {
        self.family.get_or_create(&OpLabels { op }).inc();
    }

    /// How often `op` was counted (0 when never; reading does not create the series).
    pub fn value(&self, op: &'static str) -> u64 {
        self.family
            .get(&OpLabels { op })
            .map_or(0, |counter| counter.get())
    }

    /// Register the family in `registry`. Call once per registry.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            OPERATIONS_METRIC,
            "How often each cloud provider operation was called",
            self.family.clone(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;

    #[test]
    fn clones_count_into_one_family_with_official_names() {
        let operations = Operations::new();
        let clone = operations.clone();
        operations.count(op::routes::LIST_ROUTES);
        clone.count(op::routes::LIST_ROUTES);
        clone.count(op::instances::INSTANCE_EXISTS);
        assert_eq!(operations.value(op::routes::LIST_ROUTES), 2);
        assert_eq!(operations.value(op::routes::DELETE_ROUTE), 0);

        let mut registry = Registry::default();
        operations.register(&mut registry);
        let mut text = String::new();
        encode(&mut text, &registry).expect("encoding into a String");
        assert!(
            text.contains("cloud_controller_manager_operations_total{op=\"hcloud/ListRoutes\"} 2"),
            "{text}"
        );
        assert!(
            text.contains(
                "cloud_controller_manager_operations_total{op=\"hcloud/instancesv2.InstanceExists\"} 1"
            ),
            "{text}"
        );
        assert!(text.contains("# TYPE cloud_controller_manager_operations counter"));
        assert!(
            !text.contains("DeleteRoute"),
            "reading a value creates no series"
        );
    }
}
