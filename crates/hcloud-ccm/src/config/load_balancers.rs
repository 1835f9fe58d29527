//! Load balancer defaults: `HCLOUD_LOAD_BALANCERS_*`.

use std::str::FromStr;

use ipnet::IpNet;

use super::checker::{Checker, non_empty};
use super::{Args, LoadBalancerSettings, defaults};

impl Args {
    pub(super) fn check_load_balancers(&self, c: &mut Checker) -> LoadBalancerSettings {
        let enabled = c.env_bool(
            "HCLOUD_LOAD_BALANCERS_ENABLED",
            &self.hcloud_load_balancers_enabled,
            defaults::HCLOUD_LOAD_BALANCERS_ENABLED,
        );
        let location = non_empty(self.hcloud_load_balancers_location.as_deref()).map(str::to_owned);
        let network_zone =
            non_empty(self.hcloud_load_balancers_network_zone.as_deref()).map(str::to_owned);
        if location.is_some() && network_zone.is_some() {
            c.problem(
                "HCLOUD_LOAD_BALANCERS_LOCATION/HCLOUD_LOAD_BALANCERS_NETWORK_ZONE",
                "only one of them can be set",
            );
        }
        let algorithm = non_empty(self.hcloud_load_balancers_algorithm_type.as_deref())
            .map(|v| c.parsed("HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE", v));
        // Deliberate repetition: one Checker call per `HCLOUD_LOAD_BALANCERS_*` variable, each
        // with its own name, default and result type (the same form as in the other areas).
        let disable_private_ingress = c.env_bool(
            "HCLOUD_LOAD_BALANCERS_DISABLE_PRIVATE_INGRESS",
            &self.hcloud_load_balancers_disable_private_ingress,
            defaults::HCLOUD_LOAD_BALANCERS_DISABLE_PRIVATE_INGRESS,
        );
        let use_private_ip = c.env_bool(
            "HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP",
            &self.hcloud_load_balancers_use_private_ip,
            defaults::HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP,
        );
        let disable_ipv6 = c.env_bool(
            "HCLOUD_LOAD_BALANCERS_DISABLE_IPV6",
            &self.hcloud_load_balancers_disable_ipv6,
            defaults::HCLOUD_LOAD_BALANCERS_DISABLE_IPV6,
        );
        let disable_public_network = c.opt_bool(
            "HCLOUD_LOAD_BALANCERS_DISABLE_PUBLIC_NETWORK",
            self.hcloud_load_balancers_disable_public_network.as_deref(),
        );
        let uses_proxy_protocol = c.opt_bool(
            "HCLOUD_LOAD_BALANCERS_USES_PROXYPROTOCOL",
            self.hcloud_load_balancers_uses_proxyprotocol.as_deref(),
        );
        let private_subnet_ip_range = non_empty(
            self.hcloud_load_balancers_private_subnet_ip_range
                .as_deref(),
        )
        .and_then(|v| match IpNet::from_str(v) {
            Ok(net @ IpNet::V4(_)) => Some(net),
            Ok(IpNet::V6(_)) => {
                c.problem(
                    "HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE",
                    format!(
                        "{v:?} is an IPv6 range; Hetzner Cloud subnets (and so load balancer \
                         private IPs) are IPv4"
                    ),
                );
                None
            }
            Err(_) => {
                c.problem(
                    "HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE",
                    format!("{v:?} is not a valid CIDR"),
                );
                None
            }
        });
        let health_check_interval =
            non_empty(self.hcloud_load_balancers_health_check_interval.as_deref())
                .map(|v| c.duration("HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_INTERVAL", v));
        let health_check_timeout =
            non_empty(self.hcloud_load_balancers_health_check_timeout.as_deref())
                .map(|v| c.duration("HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_TIMEOUT", v));
        let health_check_retries =
            non_empty(self.hcloud_load_balancers_health_check_retries.as_deref())
                .map(|v| c.number("HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES", v, 0u32));
        let cluster_name = self.check_cluster_name(c);
        let class = non_empty(self.load_balancer_class.as_deref())
            .filter(|v| check_class(c, v))
            .map(str::to_owned);
        LoadBalancerSettings {
            enabled,
            location,
            network_zone,
            lb_type: non_empty(self.hcloud_load_balancers_type.as_deref()).map(str::to_owned),
            algorithm,
            private_ingress_enabled: !disable_private_ingress,
            use_private_ip,
            ipv6_enabled: !disable_ipv6,
            disable_public_network,
            private_subnet_ip_range,
            uses_proxy_protocol,
            health_check_interval,
            health_check_timeout,
            health_check_retries,
            class,
            cluster_name,
        }
    }

    /// `HCLOUD_LOAD_BALANCERS_CLUSTER_NAME`: empty is unset; otherwise a label value.
    fn check_cluster_name(&self, c: &mut Checker) -> Option<String> {
        let name = non_empty(self.hcloud_load_balancers_cluster_name.as_deref())?;
        match hcloud_provider::load_balancers::cluster::check_name(name) {
            Ok(()) => Some(name.to_owned()),
            Err(why) => {
                c.problem("HCLOUD_LOAD_BALANCERS_CLUSTER_NAME", why);
                None
            }
        }
    }
}

/// The setting that names the class, for problems.
const CLASS_SETTING: &str = "--load-balancer-class/HCLOUD_LOAD_BALANCER_CLASS";

/// Whether `class` can be a `spec.loadBalancerClass` (what the apiserver accepts: a qualified
/// name, an optional DNS subdomain prefix and a `/`, then a name of at most 63 characters);
/// a class no Service can carry is a problem, not a controller that silently handles nothing.
fn check_class(c: &mut Checker, class: &str) -> bool {
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
    if !(name_ok && prefix_ok) {
        c.problem(
            CLASS_SETTING,
            format!(
                "{class:?} is not a valid loadBalancerClass: an optional DNS subdomain prefix and \
                 '/', then a name of at most 63 letters, digits, '-', '_' or '.' that starts and \
                 ends with a letter or digit (e.g. example.com/hcloud)"
            ),
        );
    }
    name_ok && prefix_ok
}
