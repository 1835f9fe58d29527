//! Per-port settings (beyond the official CCM): one Service, several ports, each with its own
//! protocol, certificates, PROXY protocol, HTTP settings and health check.
//!
//! A per-port annotation is a Service-wide one with the port in front:
//! `load-balancer.hetzner.cloud/port-<port>.<setting>`, where `<port>` is the Service port's
//! number (`port-443.protocol`) or its name (`port-https.protocol`) and `<setting>` one of
//! [`SETTINGS`]. For that port its value beats the Service-wide annotation, which beats the
//! `HCLOUD_LOAD_BALANCERS_*` variable; everything a port does not set for itself comes from the
//! Service, read exactly as the Service-wide annotations are read.
//!
//! A Service without any `port-*` annotation is read exactly as the official CCM reads it:
//! nothing here changes it. With one (the opt-in), a few combinations the API would refuse are
//! checked per port, and each gives an `InvalidPortAnnotation` Warning naming the annotation
//! instead of failing the whole Service:
//!
//! - a per-port annotation for a port the Service does not have, or for a setting that is not
//!   per port: ignored;
//! - a bad per-port value, or an HTTPS port without a certificate: that port is left as the
//!   load balancer has it (not added, not changed, not deleted) until it is fixed; the other
//!   ports are reconciled;
//! - `http-redirect-http` on a port that is not HTTPS, on port 80 itself, or on a second HTTPS
//!   port: the redirect is not set there.
//!
//! An HTTPS port that redirects takes port 80 of the load balancer (the API answers
//! `source_port_already_used` to any other service on it): a Service port 80 is then not
//! forwarded but redirected, which is what a Service with ports 80 and 443 and a redirect asks
//! for.

use std::collections::{BTreeMap, BTreeSet};

use hcloud_api::models::ServiceProtocol;
use k8s_openapi::api::core::v1::{Service, ServicePort};

use super::annotations::{AnnotationError, Annotations, Errors, PREFIX, keys};
use super::desired::{Certificates, Notice, PortCertificates};
use super::services::{DesiredHealthCheck, DesiredHttp, DesiredService};

/// The prefix of every per-port annotation; the port and the setting follow.
pub const PORT_PREFIX: &str = "load-balancer.hetzner.cloud/port-";

/// Warning reason (this CCM only): a per-port annotation is ignored, or its port left as it is.
pub const INVALID_PORT_ANNOTATION: &str = "InvalidPortAnnotation";

/// The Service-wide annotations a port can set for itself.
pub const SETTINGS: &[&str] = &[
    keys::PROTOCOL,
    keys::USES_PROXYPROTOCOL,
    keys::CERTIFICATE_TYPE,
    keys::HTTP_CERTIFICATES,
    keys::HTTP_REDIRECT_HTTP,
    keys::HTTP_STICKY_SESSIONS,
    keys::HTTP_COOKIE_NAME,
    keys::HTTP_COOKIE_LIFETIME,
    keys::HTTP_TIMEOUT_IDLE,
    keys::HEALTH_CHECK_PROTOCOL,
    keys::HEALTH_CHECK_PORT,
    keys::HEALTH_CHECK_INTERVAL,
    keys::HEALTH_CHECK_TIMEOUT,
    keys::HEALTH_CHECK_RETRIES,
    keys::HEALTH_CHECK_HTTP_DOMAIN,
    keys::HEALTH_CHECK_HTTP_PATH,
    keys::HEALTH_CHECK_HTTP_VALIDATE_CERTIFICATE,
    keys::HTTP_STATUS_CODES,
];

/// What one Service port asks for, before its NodePort is known.
#[derive(Clone, Debug, PartialEq)]
pub struct PortSettings {
    /// `protocol`.
    pub protocol: ServiceProtocol,
    /// `uses-proxyprotocol`.
    pub proxyprotocol: Option<bool>,
    /// HTTP settings (http/https only).
    pub http: Option<DesiredHttp>,
    /// Where the certificates of an https port come from.
    pub certificates: Certificates,
    /// The health check; its port is [`PortSettings::health_check_port`] or the NodePort.
    pub health_check: DesiredHealthCheck,
    /// `health-check-port`.
    pub health_check_port: Option<u16>,
}

impl PortSettings {
    /// The load balancer service for `listen_port`, forwarding to `node_port`.
    pub fn service(&self, listen_port: u16, node_port: u16) -> DesiredService {
        DesiredService {
            listen_port,
            destination_port: node_port,
            protocol: self.protocol.clone(),
            proxyprotocol: self.proxyprotocol,
            http: self.http.clone(),
            health_check: DesiredHealthCheck {
                port: self.health_check_port.unwrap_or(node_port),
                ..self.health_check.clone()
            },
        }
    }
}

/// One port's own values: Service-wide key -> (per-port key, value).
type PortValues = BTreeMap<String, (String, String)>;

/// The per-port annotations of one Service and what resolving them found.
#[derive(Debug, Default)]
pub struct PerPort {
    /// Whether the Service has any per-port annotation (the opt-in).
    active: bool,
    /// The Service-wide annotations.
    wide: BTreeMap<String, String>,
    /// Each Service port's own values, by Service port number.
    ports: BTreeMap<i32, PortValues>,
    /// Where each https port's certificates come from, and the annotation that names them,
    /// by listen port.
    certificates: BTreeMap<u16, (Certificates, String)>,
    /// The https ports that redirect port 80, with the annotation that asks for it.
    redirects: BTreeMap<u16, String>,
    /// Warnings about per-port annotations.
    pub notices: Vec<Notice>,
}

fn ignored(key: &str, why: impl std::fmt::Display) -> Notice {
    Notice::warn(INVALID_PORT_ANNOTATION, format!("{key}: {why}"))
}

fn tcp_ports(service: &Service) -> Vec<&ServicePort> {
    service
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter(|p| p.protocol.as_deref().unwrap_or("TCP") == "TCP")
        .collect()
}

impl PerPort {
    /// The per-port annotations of `service` among `a`; those that name no TCP port of the
    /// Service or no per-port setting are left out with a Warning.
    pub fn read(service: &Service, a: &Annotations) -> Self {
        let ports = tcp_ports(service);
        let mut out = Self::default();
        for (key, value) in a.entries() {
            let Some(rest) = key.strip_prefix(PORT_PREFIX) else {
                out.wide.insert(key.to_owned(), value.to_owned());
                continue;
            };
            out.active = true;
            let Some((port, setting)) = rest.split_once('.') else {
                out.notices.push(ignored(
                    key,
                    format!("is not of the form {PORT_PREFIX}<port>.<setting>; ignored"),
                ));
                continue;
            };
            let setting = format!("{PREFIX}{setting}");
            if !SETTINGS.contains(&setting.as_str()) {
                let names: Vec<&str> = SETTINGS
                    .iter()
                    .filter_map(|s| s.strip_prefix(PREFIX))
                    .collect();
                out.notices.push(ignored(
                    key,
                    format!(
                        "{setting} cannot be set per port (these can: {}); ignored",
                        names.join(", ")
                    ),
                ));
                continue;
            }
            let found = ports.iter().find(|p| match port.parse::<i32>() {
                Ok(number) => p.port == number,
                Err(_) => p.name.as_deref() == Some(port),
            });
            let Some(found) = found else {
                out.notices.push(ignored(
                    key,
                    format!("the Service has no TCP port {port:?} (by number or name); ignored"),
                ));
                continue;
            };
            let values = out.ports.entry(found.port).or_default();
            match values.get(&setting) {
                Some((other, used)) if used != value => out.notices.push(ignored(
                    key,
                    format!(
                        "port {} sets this already with {other}, which is used; ignored",
                        found.port
                    ),
                )),
                Some(_) => {}
                None => {
                    values.insert(setting, (key.to_owned(), value.to_owned()));
                }
            }
        }
        out
    }

    /// What `port` (listening on `listen_port`) asks for: `wide` (the Service-wide settings)
    /// unless the port has values of its own, then `read` of the Service's annotations with
    /// the port's values over them. `None`: the port is left as the load balancer has it (a
    /// Warning says why). Bad Service-wide values are errors of the Service, added to `errors`.
    pub fn settings(
        &mut self,
        port: &ServicePort,
        listen_port: u16,
        wide: &PortSettings,
        errors: &mut Errors,
        read: impl Fn(&Annotations, &mut Errors) -> PortSettings,
    ) -> Option<PortSettings> {
        if !self.active {
            return Some(wide.clone());
        }
        let own = self.ports.get(&port.port).cloned().unwrap_or_default();
        let mut settings = if own.is_empty() {
            wide.clone()
        } else {
            let mut values = self.wide.clone();
            for (setting, (_, value)) in &own {
                values.insert(setting.clone(), value.clone());
            }
            let mut local = Errors::default();
            let settings = read(&Annotations::new(&values), &mut local);
            let mut bad = false;
            for err in local.0 {
                match own.get(&err.annotation) {
                    Some((key, _)) => {
                        bad = true;
                        let err = AnnotationError {
                            annotation: key.clone(),
                            ..err
                        };
                        self.notices.push(ignored(
                            &err.annotation,
                            format!(
                                "{:?} {}; port {} is left as the load balancer has it",
                                err.value, err.reason, port.port
                            ),
                        ));
                    }
                    None if !errors.0.contains(&err) => errors.0.push(err),
                    None => {}
                }
            }
            if bad {
                return None;
            }
            settings
        };
        let key_of = |setting: &str| {
            own.get(setting)
                .map_or_else(|| setting.to_owned(), |(key, _)| key.clone())
        };
        if settings.protocol == ServiceProtocol::Https {
            if settings.certificates == Certificates::Unset {
                self.notices.push(ignored(
                    &key_of(keys::PROTOCOL),
                    format!(
                        "port {} is https but has no certificate: set {PORT_PREFIX}{}.http-certificates (or {}); the port is left as the load balancer has it",
                        port.port,
                        port.port,
                        keys::HTTP_CERTIFICATES
                    ),
                ));
                return None;
            }
            self.certificates.insert(
                listen_port,
                (
                    settings.certificates.clone(),
                    key_of(keys::HTTP_CERTIFICATES),
                ),
            );
        }
        if let Some(http) = &mut settings.http
            && http.redirect_http == Some(true)
        {
            let key = key_of(keys::HTTP_REDIRECT_HTTP);
            if settings.protocol != ServiceProtocol::Https {
                self.notices.push(ignored(
                    &key,
                    format!(
                        "port {} is not https: only an https port redirects (port 80) to itself; set it on the https port, e.g. {PORT_PREFIX}443.http-redirect-http; ignored",
                        port.port
                    ),
                ));
                http.redirect_http = None;
            } else if listen_port == 80 {
                self.notices.push(ignored(
                    &key,
                    "port 80 cannot redirect to itself: the redirect listens on port 80; not set",
                ));
                http.redirect_http = Some(false);
            } else {
                self.redirects.insert(listen_port, key);
            }
        }
        Some(settings)
    }

    /// The checks across ports, once every port's settings are known: one redirect per load
    /// balancer, and the Service's port 80 given to it; then the certificates: the one for
    /// the https ports without their own (`wide` unless per-port annotations are used) and
    /// the uploaded ones of each https port that has them.
    pub fn finish(
        &mut self,
        services: &mut BTreeMap<u16, DesiredService>,
        kept: &mut BTreeSet<u16>,
        wide: Certificates,
    ) -> (Certificates, BTreeMap<u16, PortCertificates>) {
        if !self.active {
            return (wide, BTreeMap::new());
        }
        let mut holder: Option<(u16, String)> = None;
        for (port, key) in std::mem::take(&mut self.redirects) {
            match &holder {
                None => holder = Some((port, key)),
                Some((first, first_key)) => {
                    self.notices.push(ignored(
                        &key,
                        format!(
                            "only one https port can redirect port 80, and port {first} does ({first_key}); not set on port {port}"
                        ),
                    ));
                    if let Some(http) = services.get_mut(&port).and_then(|s| s.http.as_mut()) {
                        http.redirect_http = Some(false);
                    }
                }
            }
        }
        match &holder {
            Some((port, key)) if services.remove(&80).is_some() || kept.remove(&80) => {
                self.notices.push(Notice::log(format!(
                    "the Service's port 80 is not forwarded: the load balancer redirects it to https port {port} ({key})"
                )));
            }
            // Port 80 is forwarded: no redirect may hold it, also not one set before.
            None if services.contains_key(&80) => {
                for service in services.values_mut() {
                    if service.protocol == ServiceProtocol::Https
                        && let Some(http) = &mut service.http
                    {
                        http.redirect_http.get_or_insert(false);
                    }
                }
            }
            _ => {}
        }
        // A managed certificate or a Secret is Service-wide: the same for every port.
        let mut shared = Certificates::Unset;
        let mut uploaded = BTreeMap::new();
        for (port, (certificates, key)) in std::mem::take(&mut self.certificates) {
            if !services.contains_key(&port) {
                continue;
            }
            match certificates {
                Certificates::Managed(_) | Certificates::Secret(_) => shared = certificates,
                Certificates::Uploaded(refs) => {
                    uploaded.insert(port, PortCertificates { key, refs });
                }
                Certificates::Unset => {}
            }
        }
        (shared, uploaded)
    }
}

/// Whether a per-port annotation turns PROXY protocol on for some port (the status then says
/// `ipMode: Proxy`, so that in-cluster clients go through the load balancer too). Lenient: a
/// bad value counts as off, the port is not checked.
pub fn some_port_uses_proxyprotocol(a: &Annotations) -> bool {
    let suffix = format!(".{}", keys::USES_PROXYPROTOCOL.trim_start_matches(PREFIX));
    a.entries().any(|(key, value)| {
        key.starts_with(PORT_PREFIX)
            && key.ends_with(&suffix)
            && super::annotations::parse_bool(value.trim()) == Some(true)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load_balancers::LoadBalancerSettings;
    use crate::load_balancers::desired::{Desired, Step};
    use hcloud_api::models::{HealthCheckProtocol, LoadBalancer, LoadBalancerService};

    /// A Service with ports `(name, port)` (NodePort = 30000 + port) and these annotations
    /// (keys without the prefix).
    fn desired(ports: &[(&str, i32)], pairs: &[(&str, &str)]) -> Desired {
        read(ports, pairs).unwrap()
    }

    fn read(ports: &[(&str, i32)], pairs: &[(&str, &str)]) -> std::result::Result<Desired, String> {
        let svc = crate::test_support::web_service(
            "uid-1",
            ports.iter().map(|(name, port)| ServicePort {
                name: Some((*name).to_owned()),
                port: *port,
                node_port: Some(30_000 + port),
                ..ServicePort::default()
            }),
        );
        let map = pairs
            .iter()
            .map(|(k, v)| (format!("{PREFIX}{k}"), (*v).to_owned()))
            .collect();
        let settings = LoadBalancerSettings::default();
        Desired::new(&svc, &Annotations::new(&map), &settings, None, &[])
    }

    const WEB: &[(&str, i32)] = &[("http", 80), ("https", 443)];

    fn port(d: &Desired, listen_port: u16) -> &DesiredService {
        d.services
            .iter()
            .find(|s| s.listen_port == listen_port)
            .unwrap_or_else(|| panic!("no service {listen_port}: {:?}", d.services))
    }

    fn warnings(d: &Desired) -> Vec<&str> {
        d.notices
            .iter()
            .filter(|n| n.reason == Some(INVALID_PORT_ANNOTATION))
            .map(|n| n.message.as_str())
            .collect()
    }

    fn redirect(s: &DesiredService) -> Option<bool> {
        s.http.as_ref().and_then(|h| h.redirect_http)
    }

    #[test]
    fn without_per_port_annotations_the_service_is_read_as_officially() {
        // The official meaning, including what the API then refuses: every port https with
        // the redirect, port 80 kept.
        let d = desired(
            WEB,
            &[
                ("protocol", "https"),
                ("http-certificates", "7"),
                ("http-redirect-http", "true"),
            ],
        );
        assert_eq!(d.services.len(), 2);
        for s in &d.services {
            assert_eq!(s.protocol, ServiceProtocol::Https);
            assert_eq!(redirect(s), Some(true));
        }
        assert_eq!(d.certificates, Certificates::Uploaded(vec!["7".into()]));
        assert!(d.port_certificates.is_empty() && d.kept_ports.is_empty());
        assert!(warnings(&d).is_empty());
    }

    #[test]
    fn a_port_value_beats_the_service_wide_one() {
        let d = desired(
            &[("http", 80), ("https", 443), ("ssh", 22)],
            &[
                ("uses-proxyprotocol", "true"),
                ("port-22.uses-proxyprotocol", "false"),
                ("port-443.protocol", "https"),
                ("port-https.http-certificates", "shop-cert"),
                ("port-443.http-redirect-http", "true"),
            ],
        );
        assert!(warnings(&d).is_empty(), "{:?}", d.notices);
        let ssh = port(&d, 22);
        assert_eq!(
            (ssh.protocol.clone(), ssh.proxyprotocol),
            (ServiceProtocol::Tcp, Some(false))
        );
        let https = port(&d, 443);
        assert_eq!(https.protocol, ServiceProtocol::Https);
        assert_eq!(https.proxyprotocol, Some(true));
        assert_eq!(redirect(https), Some(true));
        // Port 80 is the redirect's: not forwarded, and said so.
        assert!(d.services.iter().all(|s| s.listen_port != 80));
        assert!(
            d.notices
                .iter()
                .any(|n| n.reason.is_none() && n.message.contains("port 80 is not forwarded"))
        );
        assert_eq!(d.certificates, Certificates::Unset);
        assert_eq!(
            d.port_certificates,
            BTreeMap::from([(
                443,
                PortCertificates {
                    key: "load-balancer.hetzner.cloud/port-https.http-certificates".to_owned(),
                    refs: vec!["shop-cert".to_owned()]
                }
            )])
        );
    }

    #[test]
    fn health_checks_per_port_over_the_service_wide_ones() {
        let d = desired(
            &[("web", 8080), ("db", 5432)],
            &[
                ("health-check-interval", "5s"),
                ("port-web.health-check-protocol", "http"),
                ("port-web.health-check-http-path", "/healthz"),
                ("port-5432.health-check-port", "9187"),
            ],
        );
        let web = &port(&d, 8080).health_check;
        assert_eq!(web.protocol, HealthCheckProtocol::Http);
        assert_eq!(web.interval, Some(5));
        assert_eq!(web.port, 38080);
        assert_eq!(
            web.http.as_ref().and_then(|h| h.path.as_deref()),
            Some("/healthz")
        );
        let db = &port(&d, 5432).health_check;
        assert_eq!(
            (db.protocol.clone(), db.port),
            (HealthCheckProtocol::Tcp, 9187)
        );
        assert_eq!(db.interval, Some(5));
    }

    #[test]
    fn invalid_per_port_annotations_warn_by_name_and_spare_the_other_ports() {
        // (annotations, the warning names, ports configured, ports left as they are)
        type Case<'a> = (Vec<(&'a str, &'a str)>, &'a str, Vec<u16>, Vec<u16>);
        let cases: Vec<Case<'_>> = vec![
            (
                vec![("port-8443.protocol", "https")],
                "port-8443.protocol: the Service has no TCP port \"8443\"",
                vec![80, 443],
                vec![],
            ),
            (
                vec![("port-443.name", "other")],
                "port-443.name: load-balancer.hetzner.cloud/name cannot be set per port",
                vec![80, 443],
                vec![],
            ),
            (
                vec![("port-443", "https")],
                "port-443: is not of the form",
                vec![80, 443],
                vec![],
            ),
            (
                vec![("port-443.protocol", "https")],
                "port-443.protocol: port 443 is https but has no certificate",
                vec![80],
                vec![443],
            ),
            (
                vec![("port-443.health-check-interval", "soon")],
                "port-443.health-check-interval: \"soon\" is not a duration",
                vec![80],
                vec![443],
            ),
            (
                vec![
                    ("port-80.protocol", "http"),
                    ("port-80.http-redirect-http", "true"),
                ],
                "port-80.http-redirect-http: port 80 is not https",
                vec![80, 443],
                vec![],
            ),
            (
                vec![("port-http.protocol", "tcp"), ("port-80.protocol", "http")],
                "port-http.protocol: port 80 sets this already with load-balancer.hetzner.cloud/port-80.protocol",
                vec![80, 443],
                vec![],
            ),
        ];
        for (pairs, warning, configured, kept) in cases {
            let d = desired(WEB, &pairs);
            let found = warnings(&d);
            assert!(
                found
                    .iter()
                    .any(|w| w.starts_with(&format!("{PREFIX}{warning}"))),
                "{pairs:?}: {found:?}"
            );
            let ports: Vec<u16> = d.services.iter().map(|s| s.listen_port).collect();
            assert_eq!(ports, configured, "{pairs:?}");
            assert_eq!(
                d.kept_ports.into_iter().collect::<Vec<_>>(),
                kept,
                "{pairs:?}"
            );
        }
        // A bad Service-wide value a port uses stays an error of the Service.
        let err = read(
            &[("https", 443)],
            &[
                ("port-443.protocol", "http"),
                ("http-sticky-sessions", "perhaps"),
            ],
        )
        .unwrap_err();
        assert!(err.contains("http-sticky-sessions: \"perhaps\""), "{err}");
    }

    #[test]
    fn a_port_with_proxy_protocol_makes_the_status_say_proxy() {
        let status = |pairs: &[(&str, &str)]| desired(WEB, pairs).status.proxy_protocol;
        assert!(!status(&[]));
        assert!(!status(&[("port-443.uses-proxyprotocol", "false")]));
        assert!(status(&[("port-443.uses-proxyprotocol", "true")]));
        assert!(status(&[("port-https.uses-proxyprotocol", "1")]));
        assert!(status(&[("uses-proxyprotocol", "true")]));
    }

    #[test]
    fn one_https_port_redirects_port_80() {
        let d = desired(
            &[("http", 80), ("https", 443), ("alt", 8443)],
            &[
                ("protocol", "https"),
                ("http-certificates", "7"),
                ("http-redirect-http", "true"),
                ("port-80.protocol", "tcp"),
            ],
        );
        assert_eq!(redirect(port(&d, 443)), Some(true));
        assert_eq!(redirect(port(&d, 8443)), Some(false));
        assert!(d.services.iter().all(|s| s.listen_port != 80));
        assert_eq!(
            warnings(&d),
            vec![
                "load-balancer.hetzner.cloud/http-redirect-http: only one https port can redirect port 80, and port 443 does (load-balancer.hetzner.cloud/http-redirect-http); not set on port 8443"
            ]
        );
    }

    fn on_lb(d: &Desired) -> LoadBalancer {
        LoadBalancer {
            services: d
                .services
                .iter()
                .map(|s| {
                    let spec = s.spec();
                    LoadBalancerService {
                        protocol: spec.protocol,
                        listen_port: spec.listen_port,
                        destination_port: spec.destination_port,
                        proxyprotocol: spec.proxyprotocol,
                        http: spec.http,
                        health_check: spec.health_check,
                    }
                })
                .collect(),
            labels: d.labels(&hcloud_api::models::Labels::new()),
            ..LoadBalancer::default()
        }
    }

    fn kinds(steps: &[Step]) -> Vec<String> {
        steps
            .iter()
            .map(|s| match s {
                Step::DeleteService(p) => format!("delete {p}"),
                Step::AddService(spec) => format!("add {}", spec.listen_port),
                Step::UpdateService { update, .. } => format!("update {}", update.listen_port),
                other => other.to_string(),
            })
            .collect()
    }

    #[test]
    fn the_redirect_frees_and_returns_port_80_in_an_order_the_api_takes() {
        let https = [
            ("port-443.protocol", "https"),
            ("port-443.http-certificates", "7"),
        ];
        let mut plain = desired(WEB, &https);
        let mut with_redirect =
            [https.as_slice(), &[("port-443.http-redirect-http", "true")]].concat();
        let mut redirected = desired(WEB, &with_redirect);
        // Certificates resolved as decide does (by hand here: the ID is given).
        for d in [&mut plain, &mut redirected] {
            for s in &mut d.services {
                if let Some(http) = &mut s.http {
                    http.certificates = Some(vec![7]);
                }
            }
        }
        // On: port 80 goes before 443 redirects.
        assert_eq!(
            kinds(&redirected.diff(&on_lb(&plain))),
            vec!["delete 80", "update 443"]
        );
        // Off again: 443 stops redirecting before port 80 comes back.
        assert_eq!(
            kinds(&plain.diff(&on_lb(&redirected))),
            vec!["update 443", "add 80"]
        );
        // A port left as it is (bad per-port value) is not deleted.
        with_redirect.push(("port-80.health-check-retries", "many"));
        with_redirect.retain(|(k, _)| *k != "port-443.http-redirect-http");
        let broken = desired(WEB, &with_redirect);
        assert_eq!(broken.kept_ports, BTreeSet::from([80]));
        assert!(
            kinds(&broken.diff(&on_lb(&plain)))
                .iter()
                .all(|s| !s.contains("80")),
            "{:?}",
            broken.diff(&on_lb(&plain))
        );
    }
}
