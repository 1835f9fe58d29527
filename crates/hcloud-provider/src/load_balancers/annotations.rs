//! The `load-balancer.hetzner.cloud/*` Service annotations of the official Hetzner CCM, parsed
//! into typed values (pure: no defaults, no API).
//!
//! Every value error names the annotation and the rejected value. Values follow the official
//! CCM's Go parsing: booleans as Go's `strconv.ParseBool`, durations as Go's
//! `time.ParseDuration` (a bare number is also accepted, as seconds).

use std::collections::BTreeMap;
use std::fmt;
use std::net::Ipv4Addr;
use std::time::Duration;

use hcloud_api::models::{AlgorithmType, HealthCheckProtocol, ServiceProtocol};
use ipnet::Ipv4Net;

use super::selector::NodeSelector;

/// Prefix of every annotation read here.
pub const PREFIX: &str = "load-balancer.hetzner.cloud/";

/// Annotation names (full keys).
pub mod keys {
    macro_rules! keys {
        ($($(#[$doc:meta])* $name:ident = $suffix:literal,)+) => {
            $($(#[$doc])* pub const $name: &str = concat!("load-balancer.hetzner.cloud/", $suffix);)+
            /// Every annotation of the official CCM's table.
            pub const ALL: &[&str] = &[$($name,)+];
        };
    }
    keys! {
        /// LB name.
        NAME = "name",
        /// Location (mutually exclusive with network-zone).
        LOCATION = "location",
        /// Network zone (mutually exclusive with location).
        NETWORK_ZONE = "network-zone",
        /// LB type.
        TYPE = "type",
        /// round_robin / least_connections.
        ALGORITHM_TYPE = "algorithm-type",
        /// Label selector over Node labels limiting the targets.
        NODE_SELECTOR = "node-selector",
        /// Disable the public interface.
        DISABLE_PUBLIC_NETWORK = "disable-public-network",
        /// Do not report private IPs in the status.
        DISABLE_PRIVATE_INGRESS = "disable-private-ingress",
        /// Reach targets over the private network.
        USE_PRIVATE_IP = "use-private-ip",
        /// Fixed private IP of the LB.
        PRIVATE_IPV4 = "private-ipv4",
        /// Subnet to attach in.
        PRIVATE_SUBNET_IP_RANGE = "private-subnet-ip-range",
        /// Do not report the IPv6 address.
        IPV6_DISABLED = "ipv6-disabled",
        /// Report this host name instead of IPs.
        HOSTNAME = "hostname",
        /// Reverse DNS of the IPv4.
        IPV4_RDNS = "ipv4-rdns",
        /// Reverse DNS of the IPv6.
        IPV6_RDNS = "ipv6-rdns",
        /// tcp / http / https.
        PROTOCOL = "protocol",
        /// PROXY protocol to the targets.
        USES_PROXYPROTOCOL = "uses-proxyprotocol",
        /// Sticky-session cookie name.
        HTTP_COOKIE_NAME = "http-cookie-name",
        /// Sticky-session cookie lifetime.
        HTTP_COOKIE_LIFETIME = "http-cookie-lifetime",
        /// Sticky sessions.
        HTTP_STICKY_SESSIONS = "http-sticky-sessions",
        /// Idle timeout (30–300 s).
        HTTP_TIMEOUT_IDLE = "http-timeout-idle",
        /// Redirect HTTP to HTTPS.
        HTTP_REDIRECT_HTTP = "http-redirect-http",
        /// uploaded / managed.
        CERTIFICATE_TYPE = "certificate-type",
        /// Uploaded certificate IDs or names, comma separated.
        HTTP_CERTIFICATES = "http-certificates",
        /// Name of the managed certificate.
        HTTP_MANAGED_CERTIFICATE_NAME = "http-managed-certificate-name",
        /// Domains of the managed certificate, comma separated.
        HTTP_MANAGED_CERTIFICATE_DOMAINS = "http-managed-certificate-domains",
        /// tcp / http / https.
        HEALTH_CHECK_PROTOCOL = "health-check-protocol",
        /// One health check port for all services.
        HEALTH_CHECK_PORT = "health-check-port",
        /// Health check interval.
        HEALTH_CHECK_INTERVAL = "health-check-interval",
        /// Health check timeout.
        HEALTH_CHECK_TIMEOUT = "health-check-timeout",
        /// Health check retries.
        HEALTH_CHECK_RETRIES = "health-check-retries",
        /// Host header of HTTP health checks.
        HEALTH_CHECK_HTTP_DOMAIN = "health-check-http-domain",
        /// Path of HTTP health checks.
        HEALTH_CHECK_HTTP_PATH = "health-check-http-path",
        /// Validate the certificate of HTTPS health checks.
        HEALTH_CHECK_HTTP_VALIDATE_CERTIFICATE = "health-check-http-validate-certificate",
        /// Accepted status codes of HTTP health checks, comma separated.
        HEALTH_CHECK_HTTP_STATUS_CODES = "health-check-http-status-codes",
    }
}

/// One rejected annotation value (or a conflict between annotations).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AnnotationError {
    /// Full annotation key.
    pub annotation: String,
    /// The rejected value.
    pub value: String,
    /// What is wrong, e.g. `is not a duration`.
    pub reason: String,
}

impl fmt::Display for AnnotationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {:?} {}", self.annotation, self.value, self.reason)
    }
}

/// All problems found in a Service's annotations.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct AnnotationErrors(pub Vec<AnnotationError>);

impl fmt::Display for AnnotationErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, err) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{err}")?;
        }
        Ok(())
    }
}

/// `uploaded` or `managed` certificates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CertificateType {
    /// Certificates uploaded by the user, named by `http-certificates`.
    #[default]
    Uploaded,
    /// A certificate Hetzner issues for `http-managed-certificate-domains`.
    Managed,
}

/// The annotations as typed values; `None` / empty means "not set".
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Annotations {
    /// `name`.
    pub name: Option<String>,
    /// `location`.
    pub location: Option<String>,
    /// `network-zone`.
    pub network_zone: Option<String>,
    /// `type`.
    pub lb_type: Option<String>,
    /// `algorithm-type`.
    pub algorithm: Option<AlgorithmType>,
    /// `node-selector`.
    pub node_selector: Option<NodeSelector>,
    /// `disable-public-network`.
    pub disable_public_network: Option<bool>,
    /// `disable-private-ingress`.
    pub disable_private_ingress: Option<bool>,
    /// `use-private-ip`.
    pub use_private_ip: Option<bool>,
    /// `private-ipv4`.
    pub private_ipv4: Option<Ipv4Addr>,
    /// `private-subnet-ip-range`.
    pub private_subnet_ip_range: Option<Ipv4Net>,
    /// `ipv6-disabled`.
    pub ipv6_disabled: Option<bool>,
    /// `hostname`.
    pub hostname: Option<String>,
    /// `ipv4-rdns`.
    pub ipv4_rdns: Option<String>,
    /// `ipv6-rdns`.
    pub ipv6_rdns: Option<String>,
    /// `protocol`.
    pub protocol: Option<ServiceProtocol>,
    /// `uses-proxyprotocol`.
    pub uses_proxyprotocol: Option<bool>,
    /// `http-cookie-name`.
    pub http_cookie_name: Option<String>,
    /// `http-cookie-lifetime`, in seconds.
    pub http_cookie_lifetime: Option<u32>,
    /// `http-sticky-sessions`.
    pub http_sticky_sessions: Option<bool>,
    /// `http-timeout-idle`, in seconds.
    pub http_timeout_idle: Option<u32>,
    /// `http-redirect-http`.
    pub http_redirect_http: Option<bool>,
    /// `certificate-type`.
    pub certificate_type: Option<CertificateType>,
    /// `http-certificates` (IDs or names).
    pub http_certificates: Vec<String>,
    /// `http-managed-certificate-name`.
    pub http_managed_certificate_name: Option<String>,
    /// `http-managed-certificate-domains`.
    pub http_managed_certificate_domains: Vec<String>,
    /// `health-check-protocol`.
    pub health_check_protocol: Option<HealthCheckProtocol>,
    /// `health-check-port`.
    pub health_check_port: Option<u16>,
    /// `health-check-interval`, in seconds.
    pub health_check_interval: Option<u32>,
    /// `health-check-timeout`, in seconds.
    pub health_check_timeout: Option<u32>,
    /// `health-check-retries`.
    pub health_check_retries: Option<u32>,
    /// `health-check-http-domain`.
    pub health_check_http_domain: Option<String>,
    /// `health-check-http-path`.
    pub health_check_http_path: Option<String>,
    /// `health-check-http-validate-certificate`.
    pub health_check_http_validate_certificate: Option<bool>,
    /// `health-check-http-status-codes`.
    pub health_check_http_status_codes: Vec<String>,
}

/// Go's `strconv.ParseBool`.
pub fn parse_bool(value: &str) -> Option<bool> {
    match value {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// Go's `time.ParseDuration` (e.g. `15s`, `1m30s`, `1.5h`, `500ms`); a bare non-negative
/// number is read as seconds.
pub fn parse_duration(value: &str) -> Option<Duration> {
    let s = value.trim();
    if s.is_empty() {
        return None;
    }
    if let Ok(secs) = s.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let mut rest = s.strip_prefix('+').unwrap_or(s);
    if rest == "0" {
        return Some(Duration::ZERO);
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if number_len == 0 {
            return None;
        }
        let number: f64 = rest[..number_len].parse().ok()?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let nanos = match &rest[..unit_len] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += number * nanos;
    }
    if !total.is_finite() || total > u64::MAX as f64 {
        return None;
    }
    Some(Duration::from_nanos(total as u64))
}

fn comma_list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Collects parse results and errors.
struct Reader<'a> {
    annotations: &'a BTreeMap<String, String>,
    errors: Vec<AnnotationError>,
}

impl Reader<'_> {
    fn raw(&self, key: &str) -> Option<&str> {
        self.annotations.get(key).map(String::as_str)
    }

    fn fail<T>(&mut self, key: &str, value: &str, reason: impl Into<String>) -> Option<T> {
        self.errors.push(AnnotationError {
            annotation: key.to_owned(),
            value: value.to_owned(),
            reason: reason.into(),
        });
        None
    }

    /// A trimmed, non-empty string.
    fn string(&mut self, key: &str) -> Option<String> {
        let value = self.raw(key)?.trim().to_owned();
        if value.is_empty() {
            return self.fail(key, &value, "must not be empty");
        }
        Some(value)
    }

    fn parsed<T>(
        &mut self,
        key: &str,
        reason: &str,
        parse: impl FnOnce(&str) -> Option<T>,
    ) -> Option<T> {
        let raw = self.raw(key)?.to_owned();
        match parse(raw.trim()) {
            Some(v) => Some(v),
            None => self.fail(key, &raw, reason),
        }
    }

    fn bool(&mut self, key: &str) -> Option<bool> {
        self.parsed(key, "is not a boolean (true or false)", parse_bool)
    }

    /// A duration in whole seconds within `min..=max`.
    fn seconds(&mut self, key: &str, min: u32, max: u32) -> Option<u32> {
        let raw = self.raw(key)?.to_owned();
        let Some(duration) = parse_duration(&raw) else {
            return self.fail(key, &raw, "is not a duration (e.g. 15s)");
        };
        let secs = duration.as_secs();
        if duration.subsec_nanos() != 0 || secs < u64::from(min) || secs > u64::from(max) {
            return self.fail(
                key,
                &raw,
                format!("must be whole seconds between {min}s and {max}s"),
            );
        }
        u32::try_from(secs).ok()
    }

    fn number(&mut self, key: &str, min: u32, max: u32) -> Option<u32> {
        let raw = self.raw(key)?.to_owned();
        match raw.trim().parse::<u32>() {
            Ok(n) if (min..=max).contains(&n) => Some(n),
            Ok(_) => self.fail(key, &raw, format!("must be between {min} and {max}")),
            Err(_) => self.fail(key, &raw, "is not a number"),
        }
    }

    fn one_of<T>(&mut self, key: &str, choices: &[(&str, T)]) -> Option<T>
    where
        T: Clone,
    {
        let raw = self.raw(key)?.to_owned();
        let value = raw.trim();
        if let Some((_, v)) = choices.iter().find(|(name, _)| *name == value) {
            return Some(v.clone());
        }
        let names: Vec<&str> = choices.iter().map(|(name, _)| *name).collect();
        self.fail(key, &raw, format!("is not one of {}", names.join(", ")))
    }

    fn list(&mut self, key: &str) -> Vec<String> {
        self.raw(key).map(comma_list).unwrap_or_default()
    }
}

impl Annotations {
    /// Parse the `load-balancer.hetzner.cloud/*` annotations; every bad value is reported.
    pub fn parse(annotations: &BTreeMap<String, String>) -> Result<Self, AnnotationErrors> {
        let mut r = Reader {
            annotations,
            errors: Vec::new(),
        };
        let protocols = [
            ("tcp", ServiceProtocol::Tcp),
            ("http", ServiceProtocol::Http),
            ("https", ServiceProtocol::Https),
        ];
        let hc_protocols = [
            ("tcp", HealthCheckProtocol::Tcp),
            ("http", HealthCheckProtocol::Http),
            ("https", HealthCheckProtocol::Https),
        ];
        let parsed = Self {
            name: r.string(keys::NAME),
            location: r.string(keys::LOCATION),
            network_zone: r.string(keys::NETWORK_ZONE),
            lb_type: r.string(keys::TYPE),
            algorithm: r.one_of(
                keys::ALGORITHM_TYPE,
                &[
                    ("round_robin", AlgorithmType::RoundRobin),
                    ("least_connections", AlgorithmType::LeastConnections),
                ],
            ),
            node_selector: {
                let raw = r.raw(keys::NODE_SELECTOR).map(str::to_owned);
                match raw {
                    None => None,
                    Some(raw) => match NodeSelector::parse(&raw) {
                        Ok(s) => Some(s),
                        Err(why) => r.fail(
                            keys::NODE_SELECTOR,
                            &raw,
                            format!("is not a label selector: {why}"),
                        ),
                    },
                }
            },
            disable_public_network: r.bool(keys::DISABLE_PUBLIC_NETWORK),
            disable_private_ingress: r.bool(keys::DISABLE_PRIVATE_INGRESS),
            use_private_ip: r.bool(keys::USE_PRIVATE_IP),
            private_ipv4: r.parsed(keys::PRIVATE_IPV4, "is not an IPv4 address", |v| {
                v.parse().ok()
            }),
            private_subnet_ip_range: r.parsed(
                keys::PRIVATE_SUBNET_IP_RANGE,
                "is not an IPv4 CIDR (e.g. 10.0.1.0/24)",
                |v| v.parse().ok(),
            ),
            ipv6_disabled: r.bool(keys::IPV6_DISABLED),
            hostname: r.string(keys::HOSTNAME),
            ipv4_rdns: r.string(keys::IPV4_RDNS),
            ipv6_rdns: r.string(keys::IPV6_RDNS),
            protocol: r.one_of(keys::PROTOCOL, &protocols),
            uses_proxyprotocol: r.bool(keys::USES_PROXYPROTOCOL),
            http_cookie_name: r.string(keys::HTTP_COOKIE_NAME),
            http_cookie_lifetime: r.seconds(keys::HTTP_COOKIE_LIFETIME, 1, u32::MAX),
            http_sticky_sessions: r.bool(keys::HTTP_STICKY_SESSIONS),
            http_timeout_idle: r.seconds(keys::HTTP_TIMEOUT_IDLE, 30, 300),
            http_redirect_http: r.bool(keys::HTTP_REDIRECT_HTTP),
            certificate_type: r.one_of(
                keys::CERTIFICATE_TYPE,
                &[
                    ("uploaded", CertificateType::Uploaded),
                    ("managed", CertificateType::Managed),
                ],
            ),
            http_certificates: r.list(keys::HTTP_CERTIFICATES),
            http_managed_certificate_name: r.string(keys::HTTP_MANAGED_CERTIFICATE_NAME),
            http_managed_certificate_domains: r.list(keys::HTTP_MANAGED_CERTIFICATE_DOMAINS),
            health_check_protocol: r.one_of(keys::HEALTH_CHECK_PROTOCOL, &hc_protocols),
            health_check_port: r
                .number(keys::HEALTH_CHECK_PORT, 1, 65_535)
                .and_then(|p| u16::try_from(p).ok()),
            health_check_interval: r.seconds(keys::HEALTH_CHECK_INTERVAL, 3, 60),
            health_check_timeout: r.seconds(keys::HEALTH_CHECK_TIMEOUT, 1, 60),
            health_check_retries: r.number(keys::HEALTH_CHECK_RETRIES, 0, 5),
            health_check_http_domain: r.string(keys::HEALTH_CHECK_HTTP_DOMAIN),
            health_check_http_path: r.string(keys::HEALTH_CHECK_HTTP_PATH),
            health_check_http_validate_certificate: r
                .bool(keys::HEALTH_CHECK_HTTP_VALIDATE_CERTIFICATE),
            health_check_http_status_codes: r.list(keys::HEALTH_CHECK_HTTP_STATUS_CODES),
        };
        if let (Some(location), Some(zone)) = (&parsed.location, &parsed.network_zone) {
            r.errors.push(AnnotationError {
                annotation: keys::LOCATION.to_owned(),
                value: location.clone(),
                reason: format!(
                    "conflicts with {} {zone:?}: set only one of them",
                    keys::NETWORK_ZONE
                ),
            });
        }
        if r.errors.is_empty() {
            Ok(parsed)
        } else {
            Err(AnnotationErrors(r.errors))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(pairs: &[(&str, &str)]) -> Result<Annotations, AnnotationErrors> {
        let map = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Annotations::parse(&map)
    }

    #[test]
    fn go_durations() {
        let cases = [
            ("15s", Some(15_000)),
            ("1m", Some(60_000)),
            ("1m30s", Some(90_000)),
            ("1.5s", Some(1_500)),
            ("500ms", Some(500)),
            ("0", Some(0)),
            ("20", Some(20_000)),
            ("abc", None),
            ("", None),
            ("5x", None),
            ("s", None),
            ("-5s", None),
        ];
        for (input, millis) in cases {
            assert_eq!(
                parse_duration(input).map(|d| d.as_millis() as u64),
                millis,
                "{input}"
            );
        }
    }

    #[test]
    fn go_booleans() {
        for t in ["1", "t", "T", "true", "TRUE", "True"] {
            assert_eq!(parse_bool(t), Some(true), "{t}");
        }
        for f in ["0", "f", "F", "false", "FALSE", "False"] {
            assert_eq!(parse_bool(f), Some(false), "{f}");
        }
        for bad in ["yes", "", "on", "tRuE"] {
            assert_eq!(parse_bool(bad), None, "{bad}");
        }
    }

    #[test]
    fn nothing_set_is_all_defaults() {
        assert_eq!(parse(&[]).unwrap(), Annotations::default());
        // Foreign annotations are ignored.
        assert_eq!(
            parse(&[("example.com/x", "y")]).unwrap(),
            Annotations::default()
        );
    }

    #[test]
    fn every_annotation_is_parsed() {
        let a = parse(&[
            (keys::NAME, "my-lb"),
            (keys::LOCATION, "nbg1"),
            (keys::TYPE, "lb21"),
            (keys::ALGORITHM_TYPE, "least_connections"),
            (keys::NODE_SELECTOR, "role=worker"),
            (keys::DISABLE_PUBLIC_NETWORK, "true"),
            (keys::DISABLE_PRIVATE_INGRESS, "1"),
            (keys::USE_PRIVATE_IP, "t"),
            (keys::PRIVATE_IPV4, "10.0.0.99"),
            (keys::PRIVATE_SUBNET_IP_RANGE, "10.0.1.0/24"),
            (keys::IPV6_DISABLED, "True"),
            (keys::HOSTNAME, "lb.example.com"),
            (keys::IPV4_RDNS, "v4.example.com"),
            (keys::IPV6_RDNS, "v6.example.com"),
            (keys::PROTOCOL, "http"),
            (keys::USES_PROXYPROTOCOL, "false"),
            (keys::HTTP_COOKIE_NAME, "SESSION"),
            (keys::HTTP_COOKIE_LIFETIME, "5m"),
            (keys::HTTP_STICKY_SESSIONS, "true"),
            (keys::HTTP_TIMEOUT_IDLE, "90s"),
            (keys::HTTP_REDIRECT_HTTP, "true"),
            (keys::CERTIFICATE_TYPE, "uploaded"),
            (keys::HTTP_CERTIFICATES, "12, my-cert ,"),
            (keys::HTTP_MANAGED_CERTIFICATE_NAME, "managed"),
            (
                keys::HTTP_MANAGED_CERTIFICATE_DOMAINS,
                "a.example.com,b.example.com",
            ),
            (keys::HEALTH_CHECK_PROTOCOL, "http"),
            (keys::HEALTH_CHECK_PORT, "10254"),
            (keys::HEALTH_CHECK_INTERVAL, "5s"),
            (keys::HEALTH_CHECK_TIMEOUT, "3s"),
            (keys::HEALTH_CHECK_RETRIES, "2"),
            (keys::HEALTH_CHECK_HTTP_DOMAIN, "example.com"),
            (keys::HEALTH_CHECK_HTTP_PATH, "/healthz"),
            (keys::HEALTH_CHECK_HTTP_VALIDATE_CERTIFICATE, "false"),
            (keys::HEALTH_CHECK_HTTP_STATUS_CODES, "2??,301"),
        ])
        .unwrap();
        assert_eq!(a.name.as_deref(), Some("my-lb"));
        assert_eq!(a.location.as_deref(), Some("nbg1"));
        assert_eq!(a.lb_type.as_deref(), Some("lb21"));
        assert_eq!(a.algorithm, Some(AlgorithmType::LeastConnections));
        assert!(a.node_selector.is_some());
        assert_eq!(a.disable_public_network, Some(true));
        assert_eq!(a.disable_private_ingress, Some(true));
        assert_eq!(a.use_private_ip, Some(true));
        assert_eq!(a.private_ipv4, Some(Ipv4Addr::new(10, 0, 0, 99)));
        assert_eq!(a.private_subnet_ip_range, "10.0.1.0/24".parse().ok());
        assert_eq!(a.ipv6_disabled, Some(true));
        assert_eq!(a.hostname.as_deref(), Some("lb.example.com"));
        assert_eq!(a.ipv4_rdns.as_deref(), Some("v4.example.com"));
        assert_eq!(a.ipv6_rdns.as_deref(), Some("v6.example.com"));
        assert_eq!(a.protocol, Some(ServiceProtocol::Http));
        assert_eq!(a.uses_proxyprotocol, Some(false));
        assert_eq!(a.http_cookie_name.as_deref(), Some("SESSION"));
        assert_eq!(a.http_cookie_lifetime, Some(300));
        assert_eq!(a.http_sticky_sessions, Some(true));
        assert_eq!(a.http_timeout_idle, Some(90));
        assert_eq!(a.http_redirect_http, Some(true));
        assert_eq!(a.certificate_type, Some(CertificateType::Uploaded));
        assert_eq!(a.http_certificates, vec!["12", "my-cert"]);
        assert_eq!(a.http_managed_certificate_name.as_deref(), Some("managed"));
        assert_eq!(a.http_managed_certificate_domains.len(), 2);
        assert_eq!(a.health_check_protocol, Some(HealthCheckProtocol::Http));
        assert_eq!(a.health_check_port, Some(10254));
        assert_eq!(a.health_check_interval, Some(5));
        assert_eq!(a.health_check_timeout, Some(3));
        assert_eq!(a.health_check_retries, Some(2));
        assert_eq!(a.health_check_http_domain.as_deref(), Some("example.com"));
        assert_eq!(a.health_check_http_path.as_deref(), Some("/healthz"));
        assert_eq!(a.health_check_http_validate_certificate, Some(false));
        assert_eq!(a.health_check_http_status_codes, vec!["2??", "301"]);
    }

    #[test]
    fn bad_values_name_the_annotation_and_the_value() {
        let cases: &[(&str, &str, &str)] = &[
            (
                keys::HEALTH_CHECK_INTERVAL,
                "abc",
                "load-balancer.hetzner.cloud/health-check-interval: \"abc\" is not a duration (e.g. 15s)",
            ),
            (
                keys::HEALTH_CHECK_INTERVAL,
                "2s",
                "load-balancer.hetzner.cloud/health-check-interval: \"2s\" must be whole seconds between 3s and 60s",
            ),
            (
                keys::HEALTH_CHECK_RETRIES,
                "many",
                "load-balancer.hetzner.cloud/health-check-retries: \"many\" is not a number",
            ),
            (
                keys::HEALTH_CHECK_RETRIES,
                "9",
                "load-balancer.hetzner.cloud/health-check-retries: \"9\" must be between 0 and 5",
            ),
            (
                keys::HEALTH_CHECK_PORT,
                "0",
                "load-balancer.hetzner.cloud/health-check-port: \"0\" must be between 1 and 65535",
            ),
            (
                keys::USE_PRIVATE_IP,
                "yes",
                "load-balancer.hetzner.cloud/use-private-ip: \"yes\" is not a boolean (true or false)",
            ),
            (
                keys::ALGORITHM_TYPE,
                "random",
                "load-balancer.hetzner.cloud/algorithm-type: \"random\" is not one of round_robin, least_connections",
            ),
            (
                keys::PROTOCOL,
                "udp",
                "load-balancer.hetzner.cloud/protocol: \"udp\" is not one of tcp, http, https",
            ),
            (
                keys::PRIVATE_IPV4,
                "10.0.0",
                "load-balancer.hetzner.cloud/private-ipv4: \"10.0.0\" is not an IPv4 address",
            ),
            (
                keys::PRIVATE_SUBNET_IP_RANGE,
                "10.0.1.0",
                "load-balancer.hetzner.cloud/private-subnet-ip-range: \"10.0.1.0\" is not an IPv4 CIDR (e.g. 10.0.1.0/24)",
            ),
            (
                keys::HTTP_TIMEOUT_IDLE,
                "10s",
                "load-balancer.hetzner.cloud/http-timeout-idle: \"10s\" must be whole seconds between 30s and 300s",
            ),
            (
                keys::NAME,
                " ",
                "load-balancer.hetzner.cloud/name: \"\" must not be empty",
            ),
        ];
        for (key, value, message) in cases {
            let err = parse(&[(key, value)]).unwrap_err();
            assert_eq!(err.to_string(), *message);
        }
        let err = parse(&[(keys::NODE_SELECTOR, "zone in (a")]).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("load-balancer.hetzner.cloud/node-selector: \"zone in (a\""),
            "{err}"
        );
    }

    #[test]
    fn all_errors_are_reported_together() {
        let err = parse(&[
            (keys::HEALTH_CHECK_TIMEOUT, "x"),
            (keys::IPV6_DISABLED, "maybe"),
        ])
        .unwrap_err();
        assert_eq!(err.0.len(), 2);
        assert!(err.to_string().contains("health-check-timeout"));
        assert!(err.to_string().contains("ipv6-disabled"));
    }

    #[test]
    fn location_and_network_zone_conflict() {
        let err =
            parse(&[(keys::LOCATION, "fsn1"), (keys::NETWORK_ZONE, "eu-central")]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "load-balancer.hetzner.cloud/location: \"fsn1\" conflicts with load-balancer.hetzner.cloud/network-zone \"eu-central\": set only one of them"
        );
    }

    #[test]
    fn the_key_table_is_complete() {
        assert_eq!(keys::ALL.len(), 35);
        assert!(keys::ALL.iter().all(|k| k.starts_with(PREFIX)));
    }
}
