//! [`LoadBalancerSettings`]: the `HCLOUD_LOAD_BALANCERS_*` defaults.

use std::time::Duration;

use hcloud_api::models::AlgorithmType;
use ipnet::Ipv4Net;

use super::annotations::{parse_bool, parse_duration};

/// Type used when neither the `type` annotation nor `HCLOUD_LOAD_BALANCERS_TYPE` names one.
pub const DEFAULT_LB_TYPE: &str = "lb11";

/// Defaults for every Service's load balancer (the `HCLOUD_LOAD_BALANCERS_*` variables; an
/// annotation on the Service always wins) plus timing knobs of the implementation.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadBalancerSettings {
    /// `HCLOUD_LOAD_BALANCERS_LOCATION`.
    pub location: Option<String>,
    /// `HCLOUD_LOAD_BALANCERS_NETWORK_ZONE`.
    pub network_zone: Option<String>,
    /// `HCLOUD_LOAD_BALANCERS_TYPE`; `None` means [`DEFAULT_LB_TYPE`].
    pub lb_type: Option<String>,
    /// `HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE` (default round_robin).
    pub algorithm: AlgorithmType,
    /// `HCLOUD_LOAD_BALANCERS_DISABLE_PRIVATE_INGRESS`.
    pub disable_private_ingress: bool,
    /// `HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP`.
    pub use_private_ip: bool,
    /// `HCLOUD_LOAD_BALANCERS_DISABLE_IPV6`.
    pub disable_ipv6: bool,
    /// `HCLOUD_LOAD_BALANCERS_DISABLE_PUBLIC_NETWORK`.
    pub disable_public_network: bool,
    /// `HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE`.
    pub private_subnet_ip_range: Option<Ipv4Net>,
    /// `HCLOUD_LOAD_BALANCERS_USES_PROXYPROTOCOL`.
    pub uses_proxyprotocol: bool,
    /// `HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_INTERVAL` (default 15 s, the API's default).
    pub health_check_interval: Duration,
    /// `HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_TIMEOUT` (default 10 s).
    pub health_check_timeout: Duration,
    /// `HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES` (default 3).
    pub health_check_retries: u32,
    /// Not from the environment: how long one ensure waits for one action (default 2 min)
    /// before answering with a [`cloud_provider::Error::Retry`].
    pub action_timeout: Duration,
    /// Not from the environment: the fixed delay of the [`cloud_provider::Error::Retry`]
    /// returned when the load balancer is locked by another actor's action or still being
    /// created (default 5 s).
    pub retry_after: Duration,
}

impl Default for LoadBalancerSettings {
    fn default() -> Self {
        Self {
            location: None,
            network_zone: None,
            lb_type: None,
            algorithm: AlgorithmType::RoundRobin,
            disable_private_ingress: false,
            use_private_ip: false,
            disable_ipv6: false,
            disable_public_network: false,
            private_subnet_ip_range: None,
            uses_proxyprotocol: false,
            health_check_interval: Duration::from_secs(15),
            health_check_timeout: Duration::from_secs(10),
            health_check_retries: 3,
            action_timeout: Duration::from_secs(120),
            retry_after: Duration::from_secs(5),
        }
    }
}

impl LoadBalancerSettings {
    /// Read the `HCLOUD_LOAD_BALANCERS_*` variables through `lookup` (e.g.
    /// `|k| std::env::var(k).ok()`); unset or empty variables keep the defaults. All problems
    /// are reported together. `HCLOUD_LOAD_BALANCERS_ENABLED` is not read here: it decides
    /// whether the binary sets `ProviderSettings::load_balancers` at all.
    pub fn from_lookup<F>(lookup: F) -> Result<Self, Vec<String>>
    where
        F: Fn(&str) -> Option<String>,
    {
        let get = |name: &str| {
            lookup(&format!("HCLOUD_LOAD_BALANCERS_{name}"))
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let mut errors = Vec::new();
        let mut s = Self::default();
        let mut fail = |name: &str, value: &str, what: &str| {
            errors.push(format!(
                "HCLOUD_LOAD_BALANCERS_{name}: {value:?} is not {what}"
            ));
        };
        s.location = get("LOCATION");
        s.network_zone = get("NETWORK_ZONE");
        s.lb_type = get("TYPE");
        if let Some(v) = get("ALGORITHM_TYPE") {
            match v.as_str() {
                "round_robin" => s.algorithm = AlgorithmType::RoundRobin,
                "least_connections" => s.algorithm = AlgorithmType::LeastConnections,
                _ => fail(
                    "ALGORITHM_TYPE",
                    &v,
                    "one of round_robin, least_connections",
                ),
            }
        }
        for (name, field) in [
            ("DISABLE_PRIVATE_INGRESS", &mut s.disable_private_ingress),
            ("USE_PRIVATE_IP", &mut s.use_private_ip),
            ("DISABLE_IPV6", &mut s.disable_ipv6),
            ("DISABLE_PUBLIC_NETWORK", &mut s.disable_public_network),
            ("USES_PROXYPROTOCOL", &mut s.uses_proxyprotocol),
        ] {
            if let Some(v) = get(name) {
                match parse_bool(&v) {
                    Some(b) => *field = b,
                    None => fail(name, &v, "a boolean"),
                }
            }
        }
        if let Some(v) = get("PRIVATE_SUBNET_IP_RANGE") {
            match v.parse() {
                Ok(net) => s.private_subnet_ip_range = Some(net),
                Err(_) => fail("PRIVATE_SUBNET_IP_RANGE", &v, "an IPv4 CIDR"),
            }
        }
        for (name, field) in [
            ("HEALTH_CHECK_INTERVAL", &mut s.health_check_interval),
            ("HEALTH_CHECK_TIMEOUT", &mut s.health_check_timeout),
        ] {
            if let Some(v) = get(name) {
                match parse_duration(&v) {
                    Some(d) => *field = d,
                    None => fail(name, &v, "a duration"),
                }
            }
        }
        if let Some(v) = get("HEALTH_CHECK_RETRIES") {
            match v.parse() {
                Ok(n) => s.health_check_retries = n,
                Err(_) => fail("HEALTH_CHECK_RETRIES", &v, "a number"),
            }
        }
        if s.location.is_some() && s.network_zone.is_some() {
            errors.push(
                "HCLOUD_LOAD_BALANCERS_LOCATION and HCLOUD_LOAD_BALANCERS_NETWORK_ZONE are mutually exclusive"
                    .to_owned(),
            );
        }
        if errors.is_empty() {
            Ok(s)
        } else {
            Err(errors)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn from(pairs: &[(&str, &str)]) -> Result<LoadBalancerSettings, Vec<String>> {
        let env: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (format!("HCLOUD_LOAD_BALANCERS_{k}"), (*v).to_owned()))
            .collect();
        LoadBalancerSettings::from_lookup(|k| env.get(k).cloned())
    }

    #[test]
    fn defaults_when_nothing_is_set() {
        assert_eq!(from(&[]).unwrap(), LoadBalancerSettings::default());
    }

    #[test]
    fn every_variable_is_read() {
        let s = from(&[
            ("NETWORK_ZONE", "eu-central"),
            ("TYPE", "lb21"),
            ("ALGORITHM_TYPE", "least_connections"),
            ("DISABLE_PRIVATE_INGRESS", "true"),
            ("USE_PRIVATE_IP", "true"),
            ("DISABLE_IPV6", "1"),
            ("DISABLE_PUBLIC_NETWORK", "t"),
            ("PRIVATE_SUBNET_IP_RANGE", "10.0.1.0/24"),
            ("USES_PROXYPROTOCOL", "true"),
            ("HEALTH_CHECK_INTERVAL", "5s"),
            ("HEALTH_CHECK_TIMEOUT", "3s"),
            ("HEALTH_CHECK_RETRIES", "1"),
        ])
        .unwrap();
        assert_eq!(s.network_zone.as_deref(), Some("eu-central"));
        assert_eq!(s.lb_type.as_deref(), Some("lb21"));
        assert_eq!(s.algorithm, AlgorithmType::LeastConnections);
        assert!(s.disable_private_ingress && s.use_private_ip && s.disable_ipv6);
        assert!(s.disable_public_network && s.uses_proxyprotocol);
        assert_eq!(s.private_subnet_ip_range, "10.0.1.0/24".parse().ok());
        assert_eq!(s.health_check_interval, Duration::from_secs(5));
        assert_eq!(s.health_check_timeout, Duration::from_secs(3));
        assert_eq!(s.health_check_retries, 1);
    }

    #[test]
    fn all_errors_are_collected() {
        let errors = from(&[
            ("LOCATION", "fsn1"),
            ("NETWORK_ZONE", "eu-central"),
            ("USE_PRIVATE_IP", "yes"),
            ("HEALTH_CHECK_INTERVAL", "abc"),
        ])
        .unwrap_err();
        assert_eq!(errors.len(), 3, "{errors:?}");
        assert!(errors[0].contains("HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP: \"yes\""));
        assert!(errors[1].contains("HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_INTERVAL: \"abc\""));
        assert!(errors[2].contains("mutually exclusive"));
    }
}
