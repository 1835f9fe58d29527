//! The `load-balancer.hetzner.cloud/*` Service annotations of the official Hetzner CCM, read
//! into typed values (pure: no defaults, no API).
//!
//! Values are read **lazily**: [`Annotations`] keeps the raw strings and every accessor parses
//! one annotation when the desired state needs it, as the official CCM does. A bad value in an annotation
//! the current configuration does not use (an HTTP health-check field while the check is TCP,
//! `http-*` settings of a TCP service, `private-ipv4` without a network) therefore never fails a
//! sync; a bad value that is used is an [`AnnotationError`] naming the annotation and the value.
//!
//! Parsing follows the official CCM's Go code: booleans as Go's `strconv.ParseBool`, durations as
//! Go's `time.ParseDuration` (a bare number is also accepted, as seconds), enum values (protocol,
//! algorithm, health-check protocol, certificate type) case-insensitively.

use std::collections::BTreeMap;
use std::fmt;
use std::net::Ipv4Addr;
use std::time::Duration;

use hcloud_api::models::{AlgorithmType, HealthCheckProtocol, ServiceProtocol};
use ipnet::Ipv4Net;
use k8s_openapi::api::core::v1::Service;

use super::selector::NodeSelector;

/// Prefix of every annotation read here.
pub const PREFIX: &str = "load-balancer.hetzner.cloud/";

/// Annotation names (full keys).
pub mod keys {
    macro_rules! keys {
        ($($(#[$doc:meta])* $name:ident = $suffix:literal,)+) => {
            $($(#[$doc])* pub const $name: &str = concat!("load-balancer.hetzner.cloud/", $suffix);)+
            /// Every annotation read by this CCM.
            pub const ALL: &[&str] = &[$($name,)+];
        };
    }
    keys! {
        /// LB name.
        NAME = "name",
        /// Location (beats network-zone).
        LOCATION = "location",
        /// Network zone (used when no location is given).
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
        /// Hetzner-internal: issue the managed certificate from Let's Encrypt staging.
        HTTP_MANAGED_CERTIFICATE_ACME_STAGING = "http-managed-certificate-acme-staging",
        /// Beyond the official CCM: a `kubernetes.io/tls` Secret of the Service's namespace,
        /// uploaded as the https services' certificate and uploaded again when it changes
        /// (see `read.rs`).
        HTTP_CERTIFICATE_SECRET = "http-certificate-secret",
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
        /// Accepted status codes of HTTP health checks, comma separated (the official key has
        /// no `health-check-` prefix).
        HTTP_STATUS_CODES = "http-status-codes",
        /// Beyond the official CCM: `false` keeps the official health check for a Service
        /// with `externalTrafficPolicy: Local` (see `local_traffic.rs`).
        HEALTH_CHECK_LOCAL_TRAFFIC = "health-check-local-traffic",
        /// Beyond the official CCM: `true` checks kube-proxy's own `/healthz` (port 10256)
        /// for a Service with `externalTrafficPolicy: Cluster`, which fails on a Node being
        /// deleted, so it leaves the rotation first (see `local_traffic.rs`).
        HEALTH_CHECK_KUBE_PROXY = "health-check-kube-proxy",
        /// Beyond the official CCM: user labels of the load balancer, `key=value` comma
        /// separated, `key-` removes (see `user_labels.rs`).
        LABELS = "labels",
        /// Beyond the official CCM: delete protection of the load balancer.
        PROTECTION_DELETE = "protection-delete",
        /// Beyond the official CCM: the name of a load balancer several Services share, each
        /// owning its ports (see `shared.rs`).
        SHARED_LOAD_BALANCER = "shared-load-balancer",
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

impl AnnotationError {
    fn new(key: &str, value: &str, reason: impl Into<String>) -> Self {
        Self {
            annotation: key.to_owned(),
            value: value.to_owned(),
            reason: reason.into(),
        }
    }
}

impl fmt::Display for AnnotationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {:?} {}", self.annotation, self.value, self.reason)
    }
}

/// All problems found in the annotations the desired state used.
#[derive(Clone, Debug, Default, PartialEq, Eq, thiserror::Error)]
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

/// A parsed annotation: `Ok(None)` when not set.
pub type Parsed<T> = Result<Option<T>, AnnotationError>;

/// A Service's `load-balancer.hetzner.cloud/*` annotations, parsed on use.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Annotations {
    values: BTreeMap<String, String>,
}

pub use cloud_provider::go::parse_bool;

/// A duration annotation: Go's `time.ParseDuration` (e.g. `15s`, `1m30s`, `1.5h`, `500ms`),
/// and, unlike Go and the binary's flags, a bare non-negative number read as seconds, the unit
/// of the API's fields (the official CCM passes a bare number on, and the API rejects it).
pub fn parse_duration(value: &str) -> Option<Duration> {
    let s = value.trim();
    if let Ok(secs) = s.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    cloud_provider::go::parse_duration(s).ok()
}

/// Keys under [`PREFIX`] that old official CCMs wrote as read-only information (the addresses
/// and the ID of the load balancer) and no CCM reads: present on Services that were switched
/// over, never reported as unknown.
pub const LEGACY_KEYS: &[&str] = &[
    "load-balancer.hetzner.cloud/ipv4",
    "load-balancer.hetzner.cloud/ipv6",
    "load-balancer.hetzner.cloud/id",
];

/// The Levenshtein distance of `a` and `b` (insertions, deletions and substitutions of
/// characters), in one row of `b.len() + 1` counts.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substituted = diagonal + usize::from(ca != *cb);
            diagonal = row[j + 1];
            row[j + 1] = substituted.min(row[j] + 1).min(diagonal + 1);
        }
    }
    row[b.len()]
}

/// The known key (of [`keys::ALL`]) closest to `key` by [`edit_distance`] of the parts after
/// [`PREFIX`]; the first in the table's order among equally close ones.
pub fn closest_key(key: &str) -> &'static str {
    let suffix = key.strip_prefix(PREFIX).unwrap_or(key);
    keys::ALL
        .iter()
        .copied()
        .min_by_key(|known| edit_distance(suffix, known.trim_start_matches(PREFIX)))
        .unwrap_or(keys::NAME)
}

fn comma_list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Case-insensitive lookup of `value` among `choices`.
fn one_of<T: Clone>(key: &str, raw: &str, choices: &[(&str, T)]) -> Result<T, AnnotationError> {
    let value = raw.trim();
    if let Some((_, v)) = choices
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(value))
    {
        return Ok(v.clone());
    }
    let names: Vec<&str> = choices.iter().map(|(name, _)| *name).collect();
    Err(AnnotationError::new(
        key,
        raw,
        format!("is not one of {}", names.join(", ")),
    ))
}

const PROTOCOLS: [(&str, ServiceProtocol); 3] = [
    ("tcp", ServiceProtocol::Tcp),
    ("http", ServiceProtocol::Http),
    ("https", ServiceProtocol::Https),
];

const HC_PROTOCOLS: [(&str, HealthCheckProtocol); 3] = [
    ("tcp", HealthCheckProtocol::Tcp),
    ("http", HealthCheckProtocol::Http),
    ("https", HealthCheckProtocol::Https),
];

const ALGORITHMS: [(&str, AlgorithmType); 2] = [
    ("round_robin", AlgorithmType::RoundRobin),
    ("least_connections", AlgorithmType::LeastConnections),
];

const CERTIFICATE_TYPES: [(&str, CertificateType); 2] = [
    ("uploaded", CertificateType::Uploaded),
    ("managed", CertificateType::Managed),
];

impl Annotations {
    /// The `load-balancer.hetzner.cloud/*` entries of `annotations` (others are ignored).
    pub fn new(annotations: &BTreeMap<String, String>) -> Self {
        Self {
            values: annotations
                .iter()
                .filter(|(k, _)| k.starts_with(PREFIX))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        }
    }

    /// The annotations of `service`.
    pub fn of(service: &Service) -> Self {
        service
            .metadata
            .annotations
            .as_ref()
            .map(Self::new)
            .unwrap_or_default()
    }

    /// The raw value of `key` (untrimmed), if set.
    pub fn raw(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(String::as_str)
    }

    /// Every `load-balancer.hetzner.cloud/*` entry as `(key, raw value)`, sorted by key.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &str)> {
        self.values.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Whether `key` is set (even to an empty value).
    pub fn is_set(&self, key: &str) -> bool {
        self.values.contains_key(key)
    }

    fn parsed<T>(&self, key: &str, parse: impl FnOnce(&str) -> Result<T, String>) -> Parsed<T> {
        match self.raw(key) {
            None => Ok(None),
            Some(raw) => parse(raw.trim())
                .map(Some)
                .map_err(|reason| AnnotationError::new(key, raw, reason)),
        }
    }

    /// A trimmed, non-empty string.
    pub fn string(&self, key: &str) -> Parsed<String> {
        self.parsed(key, |v| {
            if v.is_empty() {
                Err("must not be empty".to_owned())
            } else {
                Ok(v.to_owned())
            }
        })
    }

    /// A trimmed string that may be empty (e.g. `location: ""` clears the default location).
    pub fn string_or_empty(&self, key: &str) -> Option<String> {
        self.raw(key).map(|v| v.trim().to_owned())
    }

    /// A Go boolean.
    pub fn bool(&self, key: &str) -> Parsed<bool> {
        self.parsed(key, |v| {
            parse_bool(v).ok_or_else(|| "is not a boolean (true or false)".to_owned())
        })
    }

    /// A duration in whole seconds within `min..=max`.
    pub fn seconds(&self, key: &str, min: u32, max: u32) -> Parsed<u32> {
        self.parsed(key, |v| {
            let duration =
                parse_duration(v).ok_or_else(|| "is not a duration (e.g. 15s)".to_owned())?;
            let secs = duration.as_secs();
            if duration.subsec_nanos() != 0 || secs < u64::from(min) || secs > u64::from(max) {
                return Err(format!("must be whole seconds between {min}s and {max}s"));
            }
            u32::try_from(secs)
                .map_err(|_| format!("must be whole seconds between {min}s and {max}s"))
        })
    }

    /// A whole number within `min..=max`.
    pub fn number(&self, key: &str, min: u32, max: u32) -> Parsed<u32> {
        self.parsed(key, |v| match v.parse::<u32>() {
            Ok(n) if (min..=max).contains(&n) => Ok(n),
            Ok(_) => Err(format!("must be between {min} and {max}")),
            Err(_) => Err("is not a number".to_owned()),
        })
    }

    /// A comma separated list (blank entries dropped); empty when not set.
    pub fn list(&self, key: &str) -> Vec<String> {
        self.raw(key).map(comma_list).unwrap_or_default()
    }

    /// The value of `key` among `choices` (see [`one_of`]).
    fn choice<T: Clone>(&self, key: &str, choices: &[(&str, T)]) -> Parsed<T> {
        self.raw(key)
            .map(|raw| one_of(key, raw, choices))
            .transpose()
    }

    /// `protocol`: tcp / http / https, any case.
    pub fn protocol(&self) -> Parsed<ServiceProtocol> {
        self.choice(keys::PROTOCOL, &PROTOCOLS)
    }

    /// `health-check-protocol`: tcp / http / https, any case.
    pub fn health_check_protocol(&self) -> Parsed<HealthCheckProtocol> {
        self.choice(keys::HEALTH_CHECK_PROTOCOL, &HC_PROTOCOLS)
    }

    /// `algorithm-type`: round_robin / least_connections, any case.
    pub fn algorithm(&self) -> Parsed<AlgorithmType> {
        self.choice(keys::ALGORITHM_TYPE, &ALGORITHMS)
    }

    /// `certificate-type`: uploaded / managed, any case.
    pub fn certificate_type(&self) -> Parsed<CertificateType> {
        self.choice(keys::CERTIFICATE_TYPE, &CERTIFICATE_TYPES)
    }

    /// `node-selector`.
    pub fn node_selector(&self) -> Parsed<NodeSelector> {
        match self.raw(keys::NODE_SELECTOR) {
            None => Ok(None),
            Some(raw) => NodeSelector::parse(raw).map(Some).map_err(|why| {
                AnnotationError::new(
                    keys::NODE_SELECTOR,
                    raw,
                    format!("is not a label selector: {why}"),
                )
            }),
        }
    }

    /// `private-ipv4`.
    pub fn private_ipv4(&self) -> Parsed<Ipv4Addr> {
        self.parsed(keys::PRIVATE_IPV4, |v| {
            v.parse().map_err(|_| "is not an IPv4 address".to_owned())
        })
    }

    /// `private-subnet-ip-range`.
    pub fn private_subnet_ip_range(&self) -> Parsed<Ipv4Net> {
        self.parsed(keys::PRIVATE_SUBNET_IP_RANGE, |v| {
            v.parse()
                .map_err(|_| "is not an IPv4 CIDR (e.g. 10.0.1.0/24)".to_owned())
        })
    }

    /// `health-check-port`.
    pub fn health_check_port(&self) -> Parsed<u16> {
        self.number(keys::HEALTH_CHECK_PORT, 1, 65_535)
            .map(|p| p.and_then(|p| u16::try_from(p).ok()))
    }

    /// The `name` annotation when it is usable (for places that cannot fail, e.g. the name the
    /// service controller logs): an empty value counts as unset there.
    pub fn name_lenient(&self) -> Option<String> {
        self.string(keys::NAME).ok().flatten()
    }
}

/// Collects the errors of the annotations the desired state reads, so that all are reported together.
#[derive(Debug, Default)]
pub struct Errors(pub Vec<AnnotationError>);

impl Errors {
    /// The value, or `None` with the error kept.
    pub fn take<T>(&mut self, parsed: Parsed<T>) -> Option<T> {
        match parsed {
            Ok(v) => v,
            Err(err) => {
                self.0.push(err);
                None
            }
        }
    }

    /// `Err` with every collected error, if any.
    pub fn finish(self) -> Result<(), AnnotationErrors> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(AnnotationErrors(self.0))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::test_support::annotations as ann;

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

    /// Go's spellings (the parser is `cloud_provider::go::parse_bool`, tested there) reach a
    /// boolean annotation, after the annotation's surrounding blanks are trimmed.
    #[test]
    fn boolean_annotations_take_go_spellings() {
        let read = |v: &str| ann(&[(keys::USE_PRIVATE_IP, v)]).bool(keys::USE_PRIVATE_IP);
        for (value, want) in [("1", true), (" TRUE ", true), ("t", true), ("F", false)] {
            assert_eq!(read(value), Ok(Some(want)), "{value:?}");
        }
        for bad in ["yes", "", "on", "tRuE"] {
            assert!(read(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn foreign_annotations_are_ignored_and_unset_is_none() {
        let a = ann(&[("example.com/x", "y")]);
        assert_eq!(a, Annotations::default());
        assert_eq!(a.protocol(), Ok(None));
        assert_eq!(a.bool(keys::USE_PRIVATE_IP), Ok(None));
        assert!(a.list(keys::HTTP_CERTIFICATES).is_empty());
    }

    #[test]
    fn enums_are_case_insensitive() {
        let a = ann(&[
            (keys::PROTOCOL, "HTTPS"),
            (keys::ALGORITHM_TYPE, "Least_Connections"),
            (keys::HEALTH_CHECK_PROTOCOL, "Http"),
            (keys::CERTIFICATE_TYPE, "MANAGED"),
        ]);
        assert_eq!(a.protocol(), Ok(Some(ServiceProtocol::Https)));
        assert_eq!(a.algorithm(), Ok(Some(AlgorithmType::LeastConnections)));
        assert_eq!(
            a.health_check_protocol(),
            Ok(Some(HealthCheckProtocol::Http))
        );
        assert_eq!(a.certificate_type(), Ok(Some(CertificateType::Managed)));
    }

    #[test]
    fn typed_values() {
        let a = ann(&[
            (keys::PRIVATE_IPV4, "10.0.0.99"),
            (keys::PRIVATE_SUBNET_IP_RANGE, "10.0.1.0/24"),
            (keys::HTTP_COOKIE_LIFETIME, "5m"),
            (keys::HEALTH_CHECK_PORT, "10254"),
            (keys::HTTP_CERTIFICATES, "12, my-cert ,"),
            (keys::HTTP_STATUS_CODES, "2??,301"),
            (keys::NODE_SELECTOR, "role=worker"),
            (keys::LOCATION, ""),
        ]);
        assert_eq!(a.private_ipv4(), Ok(Some(Ipv4Addr::new(10, 0, 0, 99))));
        assert_eq!(a.private_subnet_ip_range(), Ok("10.0.1.0/24".parse().ok()));
        assert_eq!(
            a.seconds(keys::HTTP_COOKIE_LIFETIME, 1, u32::MAX),
            Ok(Some(300))
        );
        assert_eq!(a.health_check_port(), Ok(Some(10254)));
        assert_eq!(a.list(keys::HTTP_CERTIFICATES), vec!["12", "my-cert"]);
        assert_eq!(a.list(keys::HTTP_STATUS_CODES), vec!["2??", "301"]);
        assert!(a.node_selector().unwrap().is_some());
        assert_eq!(a.string_or_empty(keys::LOCATION).as_deref(), Some(""));
        assert!(a.string(keys::LOCATION).is_err());
    }

    #[test]
    fn bad_values_name_the_annotation_and_the_value() {
        let cases: Vec<(Parsed<String>, &str)> = vec![
            (
                ann(&[(keys::HEALTH_CHECK_INTERVAL, "abc")])
                    .seconds(keys::HEALTH_CHECK_INTERVAL, 3, 60)
                    .map(|v| v.map(|n| n.to_string())),
                "load-balancer.hetzner.cloud/health-check-interval: \"abc\" is not a duration (e.g. 15s)",
            ),
            (
                ann(&[(keys::HEALTH_CHECK_INTERVAL, "2s")])
                    .seconds(keys::HEALTH_CHECK_INTERVAL, 3, 60)
                    .map(|v| v.map(|n| n.to_string())),
                "load-balancer.hetzner.cloud/health-check-interval: \"2s\" must be whole seconds between 3s and 60s",
            ),
            (
                ann(&[(keys::HEALTH_CHECK_RETRIES, "many")])
                    .number(keys::HEALTH_CHECK_RETRIES, 0, 5)
                    .map(|v| v.map(|n| n.to_string())),
                "load-balancer.hetzner.cloud/health-check-retries: \"many\" is not a number",
            ),
            (
                ann(&[(keys::HEALTH_CHECK_PORT, "0")])
                    .health_check_port()
                    .map(|v| v.map(|n| n.to_string())),
                "load-balancer.hetzner.cloud/health-check-port: \"0\" must be between 1 and 65535",
            ),
            (
                ann(&[(keys::USE_PRIVATE_IP, "yes")])
                    .bool(keys::USE_PRIVATE_IP)
                    .map(|v| v.map(|n| n.to_string())),
                "load-balancer.hetzner.cloud/use-private-ip: \"yes\" is not a boolean (true or false)",
            ),
            (
                ann(&[(keys::ALGORITHM_TYPE, "random")])
                    .algorithm()
                    .map(|v| v.map(|n| n.to_string())),
                "load-balancer.hetzner.cloud/algorithm-type: \"random\" is not one of round_robin, least_connections",
            ),
            (
                ann(&[(keys::PROTOCOL, "udp")])
                    .protocol()
                    .map(|v| v.map(|n| n.to_string())),
                "load-balancer.hetzner.cloud/protocol: \"udp\" is not one of tcp, http, https",
            ),
            (
                ann(&[(keys::PRIVATE_IPV4, "10.0.0")])
                    .private_ipv4()
                    .map(|v| v.map(|n| n.to_string())),
                "load-balancer.hetzner.cloud/private-ipv4: \"10.0.0\" is not an IPv4 address",
            ),
            (
                ann(&[(keys::NAME, " ")]).string(keys::NAME),
                "load-balancer.hetzner.cloud/name: \" \" must not be empty",
            ),
        ];
        for (parsed, message) in cases {
            assert_eq!(parsed.unwrap_err().to_string(), message);
        }
        let err = ann(&[(keys::NODE_SELECTOR, "zone in (a")])
            .node_selector()
            .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("load-balancer.hetzner.cloud/node-selector: \"zone in (a\""),
            "{err}"
        );
    }

    #[test]
    fn errors_are_collected() {
        let a = ann(&[
            (keys::HEALTH_CHECK_TIMEOUT, "x"),
            (keys::IPV6_DISABLED, "maybe"),
        ]);
        let mut errors = Errors::default();
        assert_eq!(
            errors.take(a.seconds(keys::HEALTH_CHECK_TIMEOUT, 1, 60)),
            None
        );
        assert_eq!(errors.take(a.bool(keys::IPV6_DISABLED)), None);
        assert_eq!(errors.take(a.bool(keys::USE_PRIVATE_IP)), None);
        let err = errors.finish().unwrap_err();
        assert_eq!(err.0.len(), 2);
        assert!(err.to_string().contains("health-check-timeout"));
        assert!(err.to_string().contains("ipv6-disabled"));
    }

    #[test]
    fn edit_distances_and_the_closest_key() {
        let cases = [
            // (a, b, distance)
            ("", "", 0),
            ("", "abc", 3),
            ("abc", "", 3),
            ("location", "location", 0),
            ("locaton", "location", 1),
            ("lcoation", "location", 2),
            ("kitten", "sitting", 3),
            ("größe", "grösse", 2),
        ];
        for (a, b, want) in cases {
            assert_eq!(edit_distance(a, b), want, "{a:?} {b:?}");
            assert_eq!(edit_distance(b, a), want, "{b:?} {a:?}");
        }
        let typos = [
            // (key as written, closest known key)
            ("load-balancer.hetzner.cloud/locaton", keys::LOCATION),
            (
                "load-balancer.hetzner.cloud/networkzone",
                keys::NETWORK_ZONE,
            ),
            (
                "load-balancer.hetzner.cloud/health-check-intervall",
                keys::HEALTH_CHECK_INTERVAL,
            ),
            (
                "load-balancer.hetzner.cloud/use-proxyprotocol",
                keys::USES_PROXYPROTOCOL,
            ),
            (
                "load-balancer.hetzner.cloud/http-status-code",
                keys::HTTP_STATUS_CODES,
            ),
            (
                "load-balancer.hetzner.cloud/ipv6-disable",
                keys::IPV6_DISABLED,
            ),
            // Edit distance counts characters, not words: a swap of words is far off.
            (
                "load-balancer.hetzner.cloud/disable-ipv6",
                keys::PRIVATE_IPV4,
            ),
            ("load-balancer.hetzner.cloud/Type", keys::TYPE),
        ];
        for (typo, want) in typos {
            assert_eq!(closest_key(typo), want, "{typo}");
        }
        assert!(LEGACY_KEYS.iter().all(|k| !keys::ALL.contains(k)));
    }

    #[test]
    fn the_key_table_has_the_official_status_codes_key() {
        assert!(keys::ALL.contains(&"load-balancer.hetzner.cloud/http-status-codes"));
        assert!(
            !keys::ALL
                .iter()
                .any(|k| k.ends_with("health-check-http-status-codes"))
        );
        assert_eq!(keys::ALL.len(), 42);
        assert!(keys::ALL.iter().all(|k| k.starts_with(PREFIX)));
    }
}
