//! [`LoadBalancerSettings`]: the `HCLOUD_LOAD_BALANCERS_*` defaults.
//!
//! The binary's configuration reads and validates the variables (it is the one configuration
//! source) straight into this type. A field that is `None` was not set: the load balancer keeps
//! what it has (and on creation the field is not sent, so the API's default applies), exactly
//! as the official CCM treats an unset variable.

use std::time::Duration;

use hcloud_api::models::AlgorithmType;
use ipnet::Ipv4Net;

/// Type used when neither the `type` annotation nor `HCLOUD_LOAD_BALANCERS_TYPE` names one.
pub const DEFAULT_LB_TYPE: &str = "lb11";

/// Defaults for every Service's load balancer (the `HCLOUD_LOAD_BALANCERS_*` variables; an
/// annotation on the Service always wins) plus timing knobs of the implementation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadBalancerSettings {
    /// `HCLOUD_LOAD_BALANCERS_LOCATION`.
    pub location: Option<String>,
    /// `HCLOUD_LOAD_BALANCERS_NETWORK_ZONE`.
    pub network_zone: Option<String>,
    /// `HCLOUD_LOAD_BALANCERS_TYPE`: creation type and, as officially, the type existing load
    /// balancers are changed to. `None`: [`DEFAULT_LB_TYPE`] on creation (with a
    /// `LoadBalancerTypeUnconfigured` warning) and existing types are left alone.
    pub lb_type: Option<String>,
    /// `HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE`; `None`: left as it is (API default on creation).
    pub algorithm: Option<AlgorithmType>,
    /// `HCLOUD_LOAD_BALANCERS_DISABLE_PRIVATE_INGRESS`.
    pub disable_private_ingress: bool,
    /// `HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP`.
    pub use_private_ip: bool,
    /// `HCLOUD_LOAD_BALANCERS_DISABLE_IPV6`.
    pub disable_ipv6: bool,
    /// `HCLOUD_LOAD_BALANCERS_DISABLE_PUBLIC_NETWORK`; `None`: the public interface is never
    /// toggled.
    pub disable_public_network: Option<bool>,
    /// `HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE`.
    pub private_subnet_ip_range: Option<Ipv4Net>,
    /// `HCLOUD_LOAD_BALANCERS_USES_PROXYPROTOCOL`; `None`: left as it is (off on creation).
    pub uses_proxyprotocol: Option<bool>,
    /// `HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_INTERVAL`; `None`: left as it is (API default on
    /// creation). Being set makes the health check follow the service protocol.
    pub health_check_interval: Option<Duration>,
    /// `HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_TIMEOUT`; like the interval.
    pub health_check_timeout: Option<Duration>,
    /// `HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES`; like the interval.
    pub health_check_retries: Option<u32>,
    /// `HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_KUBE_PROXY` (beyond the official CCM): Services with
    /// `externalTrafficPolicy: Cluster` check kube-proxy's `/healthz` on port 10256, which
    /// fails on a Node being deleted (see `local_traffic.rs`).
    pub health_check_kube_proxy: bool,
    /// `HCLOUD_LOAD_BALANCERS_CLUSTER_NAME` (beyond the official CCM): label, and look up only,
    /// this cluster's load balancers (see `cluster.rs`). `None`: no label, no selector.
    pub cluster_name: Option<String>,
    /// Not from the environment: how long one ensure waits for one action (default 2 min)
    /// before answering with a [`cloud_provider::Error::retry`].
    pub action_timeout: Duration,
    /// Not from the environment: the fixed delay of the [`cloud_provider::Error::retry`]
    /// returned when the load balancer is locked by another actor's action or still being
    /// created (default 5 s).
    pub retry_after: Duration,
    /// Not from the environment: how long one ensure waits for a managed certificate to be
    /// issued before answering with a [`cloud_provider::Error::retry`] (default 2 min).
    pub certificate_timeout: Duration,
}

impl Default for LoadBalancerSettings {
    fn default() -> Self {
        Self {
            location: None,
            network_zone: None,
            lb_type: None,
            algorithm: None,
            disable_private_ingress: false,
            use_private_ip: false,
            disable_ipv6: false,
            disable_public_network: None,
            private_subnet_ip_range: None,
            uses_proxyprotocol: None,
            health_check_interval: None,
            health_check_timeout: None,
            health_check_retries: None,
            health_check_kube_proxy: false,
            cluster_name: None,
            action_timeout: Duration::from_secs(120),
            retry_after: Duration::from_secs(5),
            certificate_timeout: Duration::from_secs(120),
        }
    }
}
