//! Load balancers: `HCLOUD_LOAD_BALANCERS_*` (the defaults of every load balancer, read into
//! the provider's [`LoadBalancerSettings`]) and the class the service controller owns.

use std::str::FromStr;
use std::time::Duration;

use hcloud_api::models::AlgorithmType;
use hcloud_provider::LoadBalancerSettings;
use ipnet::{IpNet, Ipv4Net};

use super::args::LB;
use super::checker::{Checker, at_least, boolean, duration, text};
use super::setting::{Spec, settings};

settings! {
    SETTINGS, LB;
    /// Whether Services of type LoadBalancer are handled.
    pub(super) ENABLED: bool =
        Spec::env("hcloud-load-balancers-enabled", "HCLOUD_LOAD_BALANCERS_ENABLED", "BOOL")
            .default("true")
            .parse(boolean);
    /// Default location of new load balancers (exclusive with the network zone).
    pub(super) LOCATION: String =
        Spec::env("hcloud-load-balancers-location", "HCLOUD_LOAD_BALANCERS_LOCATION", "LOCATION")
            .parse(text);
    /// Default network zone of new load balancers (exclusive with the location).
    pub(super) NETWORK_ZONE: String = Spec::env(
        "hcloud-load-balancers-network-zone",
        "HCLOUD_LOAD_BALANCERS_NETWORK_ZONE",
        "ZONE",
    )
    .parse(text);
    /// Default load balancer type [default: lb11].
    pub(super) TYPE: String =
        Spec::env("hcloud-load-balancers-type", "HCLOUD_LOAD_BALANCERS_TYPE", "TYPE").parse(text);
    /// Default algorithm: round_robin or least_connections [default: round_robin].
    pub(super) ALGORITHM_TYPE: AlgorithmType = Spec::env(
        "hcloud-load-balancers-algorithm-type",
        "HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE",
        "ALGORITHM",
    )
    .parse(algorithm);
    /// Do not publish private IPs in the Service status by default.
    pub(super) DISABLE_PRIVATE_INGRESS: bool = Spec::env(
        "hcloud-load-balancers-disable-private-ingress",
        "HCLOUD_LOAD_BALANCERS_DISABLE_PRIVATE_INGRESS",
        "BOOL",
    )
    .default("false")
    .parse(boolean);
    /// Reach targets over the private network by default.
    pub(super) USE_PRIVATE_IP: bool = Spec::env(
        "hcloud-load-balancers-use-private-ip",
        "HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP",
        "BOOL",
    )
    .default("false")
    .parse(boolean);
    /// Do not publish the IPv6 address by default.
    pub(super) DISABLE_IPV6: bool = Spec::env(
        "hcloud-load-balancers-disable-ipv6",
        "HCLOUD_LOAD_BALANCERS_DISABLE_IPV6",
        "BOOL",
    )
    .default("false")
    .parse(boolean);
    /// Disable the public interface by default [default: false].
    pub(super) DISABLE_PUBLIC_NETWORK: bool = Spec::env(
        "hcloud-load-balancers-disable-public-network",
        "HCLOUD_LOAD_BALANCERS_DISABLE_PUBLIC_NETWORK",
        "BOOL",
    )
    .parse(boolean);
    /// Default subnet (CIDR) to attach load balancers in.
    pub(super) PRIVATE_SUBNET_IP_RANGE: Ipv4Net = Spec::env(
        "hcloud-load-balancers-private-subnet-ip-range",
        "HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE",
        "CIDR",
    )
    .parse(ipv4_range);
    /// Enable the PROXY protocol by default [default: false].
    pub(super) USES_PROXYPROTOCOL: bool = Spec::env(
        "hcloud-load-balancers-uses-proxyprotocol",
        "HCLOUD_LOAD_BALANCERS_USES_PROXYPROTOCOL",
        "BOOL",
    )
    .parse(boolean);
    /// Default health check interval [default: API default, 15s].
    pub(super) HEALTH_CHECK_INTERVAL: Duration = Spec::env(
        "hcloud-load-balancers-health-check-interval",
        "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_INTERVAL",
        "DURATION",
    )
    .parse(duration);
    /// Default health check timeout [default: API default, 10s].
    pub(super) HEALTH_CHECK_TIMEOUT: Duration = Spec::env(
        "hcloud-load-balancers-health-check-timeout",
        "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_TIMEOUT",
        "DURATION",
    )
    .parse(duration);
    /// Default health check retries [default: API default, 3].
    pub(super) HEALTH_CHECK_RETRIES: u32 = Spec::env(
        "hcloud-load-balancers-health-check-retries",
        "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES",
        "N",
    )
    .parse(|v| at_least(v, 0u32));
    /// Beyond the official CCM: Services with externalTrafficPolicy Cluster check kube-proxy's
    /// /healthz on port 10256 (HTTP), which fails on a Node being deleted or tainted
    /// ToBeDeletedByClusterAutoscaler, so it leaves the rotation before its target is removed.
    /// The port must be reachable from the load balancer. The annotation
    /// load-balancer.hetzner.cloud/health-check-kube-proxy wins.
    pub(super) HEALTH_CHECK_KUBE_PROXY: bool = Spec::env(
        "hcloud-load-balancers-health-check-kube-proxy",
        "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_KUBE_PROXY",
        "BOOL",
    )
    .default("false")
    .parse(boolean);
    /// Beyond the official CCM: this cluster's name, for several clusters in one project. Every
    /// load balancer and managed certificate created gets the label
    /// hcloud-ccm/cluster-name=NAME, lookups see only this cluster's (and unlabelled) ones, and
    /// `plan` lists orphans. Unset: no label, no selector (the official behaviour).
    pub(super) CLUSTER_NAME: String = Spec::env(
        "hcloud-load-balancers-cluster-name",
        "HCLOUD_LOAD_BALANCERS_CLUSTER_NAME",
        "NAME",
    )
    .parse(cluster_name);
    /// Handle only Services whose spec.loadBalancerClass is this class [default: unset, only
    /// Services without a class] (this project's variable).
    pub(super) CLASS: String =
        Spec::env("load-balancer-class", "HCLOUD_LOAD_BALANCER_CLASS", "CLASS")
            .aliases(&["hcloud-load-balancer-class"])
            .parse(class);
    /// Beyond the official CCM: cordoned Nodes (spec.unschedulable, as kubectl cordon and
    /// kubectl drain set it) leave every load balancer's targets, so a drain takes a Node out
    /// of rotation before its pods stop; uncordoned, it is a target again. Off: cordoned Nodes
    /// stay targets, as upstream.
    pub(super) EXCLUDE_CORDONED_NODES: bool = Spec::env(
        "hcloud-load-balancers-exclude-cordoned-nodes",
        "HCLOUD_LOAD_BALANCERS_EXCLUDE_CORDONED_NODES",
        "BOOL",
    )
    .default("false")
    .parse(boolean);
    /// Beyond the official CCM: a Service may name a kubernetes.io/tls Secret of its namespace
    /// in the annotation load-balancer.hetzner.cloud/http-certificate-secret; it is read when
    /// the Service is synced, uploaded as its certificate, and uploaded again when it changes
    /// (the TLS Secrets are watched, by metadata only, once a Service names one). Needs get,
    /// list and watch on secrets (the chart's rbac.secrets). Off: no Secret is read or
    /// watched, and a Service that names one fails with a Warning saying so.
    pub(super) TLS_SECRETS: bool = Spec::env(
        "hcloud-load-balancers-tls-secrets",
        "HCLOUD_LOAD_BALANCERS_TLS_SECRETS",
        "BOOL",
    )
    .default("true")
    .parse(boolean);
}

fn algorithm(value: &str) -> Result<AlgorithmType, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "round_robin" => Ok(AlgorithmType::RoundRobin),
        "least_connections" => Ok(AlgorithmType::LeastConnections),
        _ => Err(format!(
            "unsupported value {value:?}, expected round_robin or least_connections"
        )),
    }
}

/// Hetzner Cloud subnets (and so load balancer private IPs) are IPv4.
fn ipv4_range(value: &str) -> Result<Ipv4Net, String> {
    match IpNet::from_str(value) {
        Ok(IpNet::V4(net)) => Ok(net),
        Ok(IpNet::V6(_)) => Err(format!(
            "{value:?} is an IPv6 range; Hetzner Cloud subnets (and so load balancer private \
             IPs) are IPv4"
        )),
        Err(_) => Err(format!("{value:?} is not a valid CIDR")),
    }
}

/// `HCLOUD_LOAD_BALANCERS_CLUSTER_NAME`: a label value.
fn cluster_name(name: &str) -> Result<String, String> {
    hcloud_provider::load_balancers::cluster::check_name(name)?;
    Ok(name.to_owned())
}

/// The defaults of every load balancer. As the official CCM reads them, a zero health check
/// setting means unset: the health check is left as it is.
pub(super) fn check_load_balancers(c: &mut Checker<'_>) -> LoadBalancerSettings {
    let location = c.optional(&LOCATION);
    let network_zone = c.optional(&NETWORK_ZONE);
    if location.is_some() && network_zone.is_some() {
        c.problem(
            &format!("{}/{}", LOCATION.spec.name(), NETWORK_ZONE.spec.name()),
            "only one of them can be set",
        );
    }
    LoadBalancerSettings {
        location,
        network_zone,
        algorithm: c.optional(&ALGORITHM_TYPE),
        disable_private_ingress: c.value(&DISABLE_PRIVATE_INGRESS),
        use_private_ip: c.value(&USE_PRIVATE_IP),
        disable_ipv6: c.value(&DISABLE_IPV6),
        disable_public_network: c.optional(&DISABLE_PUBLIC_NETWORK),
        uses_proxyprotocol: c.optional(&USES_PROXYPROTOCOL),
        private_subnet_ip_range: c.optional(&PRIVATE_SUBNET_IP_RANGE),
        health_check_interval: c.optional(&HEALTH_CHECK_INTERVAL).filter(|d| !d.is_zero()),
        health_check_timeout: c.optional(&HEALTH_CHECK_TIMEOUT).filter(|d| !d.is_zero()),
        health_check_retries: c.optional(&HEALTH_CHECK_RETRIES).filter(|n| *n != 0),
        health_check_kube_proxy: c.value(&HEALTH_CHECK_KUBE_PROXY),
        cluster_name: c.optional(&CLUSTER_NAME),
        lb_type: c.optional(&TYPE),
        ..LoadBalancerSettings::default()
    }
}

/// Whether the service controller (and `plan`) reads the TLS Secrets Services name.
pub(super) fn check_load_balancer_secrets(c: &mut Checker<'_>) -> bool {
    c.value(&TLS_SECRETS)
}

/// Which Nodes back the load balancers: the service controller's own settings type, handed
/// to it (and to `plan`) as it is.
pub(super) fn check_load_balancer_nodes(
    c: &mut Checker<'_>,
) -> cloud_provider::service::NodeFilter {
    cloud_provider::service::NodeFilter {
        exclude_cordoned: c.value(&EXCLUDE_CORDONED_NODES),
    }
}

/// Whether `class` can be a `spec.loadBalancerClass` (what the apiserver accepts: a qualified
/// name, an optional DNS subdomain prefix and a `/`, then a name of at most 63 characters);
/// a class no Service can carry is a problem, not a controller that silently handles nothing.
fn class(class: &str) -> Result<String, String> {
    let (prefix, name) = match class.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, class),
    };
    let name_ok = hcloud_provider::load_balancers::selector::valid_name(name);
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && label.starts_with(|ch: char| ch.is_ascii_lowercase() || ch.is_ascii_digit())
                    && label.ends_with(|ch: char| ch.is_ascii_lowercase() || ch.is_ascii_digit())
                    && label
                        .chars()
                        .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '-')
            })
    });
    if name_ok && prefix_ok {
        Ok(class.to_owned())
    } else {
        Err(format!(
            "{class:?} is not a valid loadBalancerClass: an optional DNS subdomain prefix and \
                 '/', then a name of at most 63 letters, digits, '-', '_' or '.' that starts and \
                 ends with a letter or digit (e.g. example.com/hcloud)"
        ))
    }
}
