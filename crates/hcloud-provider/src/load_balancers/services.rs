//! The desired state of one load balancer service (a listen port) and how it is compared with,
//! and merged into, what the load balancer has (pure).
//!
//! Only what an annotation or an `HCLOUD_LOAD_BALANCERS_*` variable sets is wanted; everything
//! else is `None` and stays as the load balancer has it. An update therefore sends the current
//! value of every unset field, and a new service sends the API's defaults (interval 15 s,
//! timeout 10 s, 3 retries, path `/`, status codes `2??,3??`, no PROXY protocol, no sticky
//! sessions or redirect), which is what the API would pick if the field were left out.
//!
//! The `Desired*` structs follow the API's service models field by field (each one an
//! `Option`); merging and comparing name each field, since the fields differ in type and
//! default.

use hcloud_api::models::{
    HealthCheck, HealthCheckHttp, HealthCheckProtocol, LoadBalancerService, ServiceHttp,
    ServiceProtocol, ServiceSpec, ServiceUpdate,
};

/// The API's health-check defaults, used where a service has none yet.
const DEFAULT_INTERVAL: u32 = 15;
const DEFAULT_TIMEOUT: u32 = 10;
const DEFAULT_RETRIES: u32 = 3;

/// HTTP settings of an http/https service; `None` = leave as is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DesiredHttp {
    /// `http-cookie-name`.
    pub cookie_name: Option<String>,
    /// `http-cookie-lifetime`, seconds.
    pub cookie_lifetime: Option<u32>,
    /// Certificate IDs (https; uploaded by name/ID or the managed certificate).
    pub certificates: Option<Vec<i64>>,
    /// `http-redirect-http`.
    pub redirect_http: Option<bool>,
    /// `http-sticky-sessions`.
    pub sticky_sessions: Option<bool>,
    /// `http-timeout-idle`, seconds.
    pub timeout_idle: Option<u32>,
}

/// HTTP settings of an http/https health check; `None` = leave as is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DesiredHealthCheckHttp {
    /// `health-check-http-domain`.
    pub domain: Option<String>,
    /// `health-check-http-path`.
    pub path: Option<String>,
    /// `http-status-codes`.
    pub status_codes: Option<Vec<String>>,
    /// `health-check-http-validate-certificate`.
    pub tls: Option<bool>,
}

/// The health check: protocol and port always; the rest only when set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DesiredHealthCheck {
    /// Protocol (TCP unless a health-check setting makes it follow the service protocol).
    pub protocol: HealthCheckProtocol,
    /// Port (`health-check-port`, else the NodePort).
    pub port: u16,
    /// Interval, seconds.
    pub interval: Option<u32>,
    /// Timeout, seconds.
    pub timeout: Option<u32>,
    /// Retries.
    pub retries: Option<u32>,
    /// HTTP settings (http/https checks only).
    pub http: Option<DesiredHealthCheckHttp>,
}

/// One load balancer service as the Service asks for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DesiredService {
    /// The Service port.
    pub listen_port: u16,
    /// The NodePort.
    pub destination_port: u16,
    /// `protocol` (tcp when unset, as officially).
    pub protocol: ServiceProtocol,
    /// `uses-proxyprotocol` / `HCLOUD_LOAD_BALANCERS_USES_PROXYPROTOCOL`.
    pub proxyprotocol: Option<bool>,
    /// HTTP settings; `Some` exactly for http/https.
    pub http: Option<DesiredHttp>,
    /// Health check.
    pub health_check: DesiredHealthCheck,
}

fn merge_http(want: &DesiredHttp, current: Option<&ServiceHttp>) -> ServiceHttp {
    let base = current.cloned().unwrap_or_default();
    ServiceHttp {
        cookie_name: want.cookie_name.clone().or(base.cookie_name),
        cookie_lifetime: want.cookie_lifetime.or(base.cookie_lifetime),
        certificates: want.certificates.clone().unwrap_or(base.certificates),
        redirect_http: want.redirect_http.unwrap_or(base.redirect_http),
        sticky_sessions: want.sticky_sessions.unwrap_or(base.sticky_sessions),
        timeout_idle: want.timeout_idle.or(base.timeout_idle),
    }
}

fn merge_health_check(want: &DesiredHealthCheck, current: Option<&HealthCheck>) -> HealthCheck {
    let base = current.cloned().unwrap_or(HealthCheck {
        protocol: HealthCheckProtocol::Tcp,
        port: want.port,
        interval: DEFAULT_INTERVAL,
        timeout: DEFAULT_TIMEOUT,
        retries: DEFAULT_RETRIES,
        http: None,
    });
    let http = (want.protocol != HealthCheckProtocol::Tcp).then(|| {
        let b = base.http.clone().unwrap_or_else(|| HealthCheckHttp {
            domain: None,
            path: Some("/".to_owned()),
            response: None,
            status_codes: vec!["2??".to_owned(), "3??".to_owned()],
            tls: false,
        });
        let w = want.http.clone().unwrap_or_default();
        HealthCheckHttp {
            domain: w.domain.or(b.domain),
            path: w.path.or(b.path),
            response: b.response,
            status_codes: w.status_codes.unwrap_or(b.status_codes),
            tls: w.tls.unwrap_or(b.tls),
        }
    });
    HealthCheck {
        protocol: want.protocol.clone(),
        port: want.port,
        interval: want.interval.unwrap_or(base.interval),
        timeout: want.timeout.unwrap_or(base.timeout),
        retries: want.retries.unwrap_or(base.retries),
        http,
    }
}

fn sorted(ids: &[i64]) -> Vec<i64> {
    let mut ids = ids.to_vec();
    ids.sort_unstable();
    ids
}

fn opt<T: std::fmt::Debug>(v: &Option<T>) -> String {
    match v {
        Some(v) => format!("{v:?}"),
        None => "unset".to_owned(),
    }
}

/// The differences between `current` and `wanted`, each as `what old -> new`.
fn changes(current: &LoadBalancerService, wanted: &ServiceSpec) -> Vec<String> {
    let mut out = Vec::new();
    let mut cmp = |what: &str, old: String, new: String| {
        if old != new {
            out.push(format!("{what} {old} -> {new}"));
        }
    };
    cmp(
        "protocol",
        current.protocol.to_string(),
        wanted.protocol.to_string(),
    );
    cmp(
        "destination port",
        current.destination_port.to_string(),
        wanted.destination_port.to_string(),
    );
    cmp(
        "proxy protocol",
        current.proxyprotocol.to_string(),
        wanted.proxyprotocol.to_string(),
    );
    if let Some(w) = &wanted.http {
        let c = current.http.clone().unwrap_or_default();
        cmp("cookie name", opt(&c.cookie_name), opt(&w.cookie_name));
        cmp(
            "cookie lifetime",
            opt(&c.cookie_lifetime),
            opt(&w.cookie_lifetime),
        );
        cmp(
            "certificates",
            certificate_ids(&c.certificates),
            certificate_ids(&w.certificates),
        );
        cmp(
            "redirect http",
            c.redirect_http.to_string(),
            w.redirect_http.to_string(),
        );
        cmp(
            "sticky sessions",
            c.sticky_sessions.to_string(),
            w.sticky_sessions.to_string(),
        );
        cmp("idle timeout", opt(&c.timeout_idle), opt(&w.timeout_idle));
    }
    if let Some(w) = &wanted.health_check {
        match &current.health_check {
            None => cmp("health check", "none".to_owned(), w.protocol.to_string()),
            Some(c) => {
                cmp(
                    "health check protocol",
                    c.protocol.to_string(),
                    w.protocol.to_string(),
                );
                cmp("health check port", c.port.to_string(), w.port.to_string());
                cmp(
                    "health check interval",
                    format!("{}s", c.interval),
                    format!("{}s", w.interval),
                );
                cmp(
                    "health check timeout",
                    format!("{}s", c.timeout),
                    format!("{}s", w.timeout),
                );
                cmp(
                    "health check retries",
                    c.retries.to_string(),
                    w.retries.to_string(),
                );
                if let Some(wh) = &w.http {
                    let ch = c.http.clone().unwrap_or_default();
                    cmp("health check domain", opt(&ch.domain), opt(&wh.domain));
                    cmp("health check path", opt(&ch.path), opt(&wh.path));
                    cmp(
                        "health check status codes",
                        format!("{:?}", ch.status_codes),
                        format!("{:?}", wh.status_codes),
                    );
                    cmp(
                        "health check certificate validation",
                        ch.tls.to_string(),
                        wh.tls.to_string(),
                    );
                }
            }
        }
    }
    out
}

impl DesiredService {
    /// The service as `current` would become (or, without `current`, as it is created).
    pub fn merged(&self, current: Option<&LoadBalancerService>) -> ServiceSpec {
        ServiceSpec {
            protocol: self.protocol.clone(),
            listen_port: self.listen_port,
            destination_port: self.destination_port,
            proxyprotocol: self
                .proxyprotocol
                .unwrap_or_else(|| current.is_some_and(|c| c.proxyprotocol)),
            http: self
                .http
                .as_ref()
                .map(|w| merge_http(w, current.and_then(|c| c.http.as_ref()))),
            health_check: Some(merge_health_check(
                &self.health_check,
                current.and_then(|c| c.health_check.as_ref()),
            )),
        }
    }

    /// `add_service` / creation body.
    pub fn spec(&self) -> ServiceSpec {
        self.merged(None)
    }

    /// What an update of `current` would change (`what old -> new`); empty when nothing.
    pub fn changes(&self, current: &LoadBalancerService) -> Vec<String> {
        changes(current, &self.merged(Some(current)))
    }

    /// `update_service` body for `current`: every field the desired state sets, the rest as it is.
    pub fn update(&self, current: &LoadBalancerService) -> ServiceUpdate {
        let merged = self.merged(Some(current));
        ServiceUpdate {
            listen_port: self.listen_port,
            protocol: Some(merged.protocol),
            destination_port: Some(merged.destination_port),
            proxyprotocol: self.proxyprotocol,
            http: merged.http,
            health_check: merged.health_check,
        }
    }
}

/// Certificate IDs for people, sorted; [`NEW_CERTIFICATE`] (the stand-in for a managed
/// certificate not created yet) shows as `new`.
fn certificate_ids(ids: &[i64]) -> String {
    let ids: Vec<String> = sorted(ids)
        .iter()
        .map(|&id| match id {
            NEW_CERTIFICATE => "new".to_owned(),
            id => id.to_string(),
        })
        .collect();
    format!("[{}]", ids.join(", "))
}

/// The certificate ID the decision's steps name for the managed certificate ensure creates
/// first (the API never gives out ID 0); carrying the steps out puts the created
/// certificate's ID in its place.
pub const NEW_CERTIFICATE: i64 = 0;

#[cfg(test)]
mod tests {
    use super::*;
    // The service as the load balancer has it after its spec was sent.
    use crate::load_balancers::decide::predict::service as current;

    fn tcp(port: u16, node_port: u16) -> DesiredService {
        DesiredService {
            listen_port: port,
            destination_port: node_port,
            protocol: ServiceProtocol::Tcp,
            proxyprotocol: None,
            http: None,
            health_check: DesiredHealthCheck {
                protocol: HealthCheckProtocol::Tcp,
                port: node_port,
                interval: None,
                timeout: None,
                retries: None,
                http: None,
            },
        }
    }

    #[test]
    fn a_new_service_gets_the_api_defaults() {
        let spec = tcp(80, 30080).spec();
        let hc = spec.health_check.unwrap();
        assert_eq!((hc.interval, hc.timeout, hc.retries), (15, 10, 3));
        assert_eq!(hc.port, 30080);
        assert!(!spec.proxyprotocol);
    }

    #[test]
    fn unset_fields_keep_what_the_load_balancer_has() {
        let mut lb = current(&tcp(80, 30080).spec());
        lb.proxyprotocol = true;
        let hc = lb.health_check.as_mut().unwrap();
        hc.interval = 5;
        hc.timeout = 3;
        hc.retries = 1;
        let wanted = tcp(80, 30080);
        assert!(wanted.changes(&lb).is_empty(), "{:?}", wanted.changes(&lb));
        // A changed NodePort only changes the ports; interval etc. are sent as they are.
        let moved = tcp(80, 30081);
        assert_eq!(
            moved.changes(&lb),
            vec![
                "destination port 30080 -> 30081",
                "health check port 30080 -> 30081"
            ]
        );
        let update = moved.update(&lb);
        assert_eq!(update.proxyprotocol, None);
        let hc = update.health_check.unwrap();
        assert_eq!((hc.interval, hc.timeout, hc.retries), (5, 3, 1));
    }

    #[test]
    fn set_fields_are_enforced() {
        let lb = current(&tcp(80, 30080).spec());
        let mut wanted = tcp(80, 30080);
        wanted.proxyprotocol = Some(true);
        wanted.health_check.interval = Some(5);
        assert_eq!(
            wanted.changes(&lb),
            vec![
                "proxy protocol false -> true",
                "health check interval 15s -> 5s"
            ]
        );
        assert_eq!(wanted.update(&lb).proxyprotocol, Some(true));
    }

    #[test]
    fn http_settings_merge_and_certificates_compare_unordered() {
        let mut wanted = tcp(443, 30443);
        wanted.protocol = ServiceProtocol::Https;
        wanted.http = Some(DesiredHttp {
            certificates: Some(vec![2, 1]),
            ..DesiredHttp::default()
        });
        let mut lb = current(&wanted.spec());
        let http = lb.http.as_mut().unwrap();
        http.certificates = vec![1, 2];
        http.sticky_sessions = true;
        http.cookie_name = Some("S".into());
        assert!(wanted.changes(&lb).is_empty(), "{:?}", wanted.changes(&lb));
        wanted.http.as_mut().unwrap().sticky_sessions = Some(false);
        assert_eq!(wanted.changes(&lb), vec!["sticky sessions true -> false"]);
        let http = wanted.update(&lb).http.unwrap();
        assert_eq!(http.cookie_name.as_deref(), Some("S"));
    }

    #[test]
    fn http_health_check_fields() {
        let mut wanted = tcp(80, 30080);
        wanted.health_check.protocol = HealthCheckProtocol::Http;
        wanted.health_check.http = Some(DesiredHealthCheckHttp {
            status_codes: Some(vec!["200".into()]),
            ..DesiredHealthCheckHttp::default()
        });
        let hc = wanted.spec().health_check.unwrap();
        let http = hc.http.unwrap();
        assert_eq!(http.status_codes, vec!["200"]);
        assert_eq!(http.path.as_deref(), Some("/"));
        let lb = current(&tcp(80, 30080).spec());
        assert_eq!(
            wanted.changes(&lb),
            vec![
                "health check protocol tcp -> http",
                "health check path unset -> \"/\"",
                "health check status codes [] -> [\"200\"]",
            ]
        );
    }
}
