//! Load balancer services and targets: reading them from request bodies and checking them
//! against the load balancer, its type and the rest of the project.

use std::net::IpAddr;

use crate::error::{ApiError, ApiResult};
use crate::input::{Input, overwrite};
use crate::label_selector::Selector;
use crate::model::{
    HealthCheck, HealthCheckHttp, LbType, LoadBalancer, Service, ServiceHttp, Target, TargetKind,
};
use crate::world::World;

const PROTOCOLS: &[&str] = &["tcp", "http", "https"];

fn default_http() -> ServiceHttp {
    ServiceHttp {
        cookie_name: "HCLBSTICKY".to_string(),
        cookie_lifetime: 300,
        certificates: Vec::new(),
        redirect_http: false,
        sticky_sessions: false,
        timeout_idle: 60,
    }
}

fn read_http(input: &mut Input, mut http: ServiceHttp) -> ServiceHttp {
    let Some(mut h) = input.opt_obj("http") else {
        return http;
    };
    overwrite(&mut http.cookie_name, h.opt_str("cookie_name"));
    overwrite(
        &mut http.cookie_lifetime,
        h.opt_int_in("cookie_lifetime", 1, 86_400 * 365),
    );
    overwrite(&mut http.certificates, h.opt_i64_list("certificates"));
    overwrite(&mut http.redirect_http, h.opt_bool("redirect_http"));
    overwrite(&mut http.sticky_sessions, h.opt_bool("sticky_sessions"));
    overwrite(
        &mut http.timeout_idle,
        h.opt_int_in("timeout_idle", 30, 300),
    );
    input.absorb(h);
    http
}

fn read_health_check(input: &mut Input, mut hc: HealthCheck) -> HealthCheck {
    let Some(mut h) = input.opt_obj("health_check") else {
        return hc;
    };
    if let Some(p) = h.opt_str("protocol") {
        if PROTOCOLS.contains(&p.as_str()) {
            hc.protocol = p;
        } else {
            h.error("protocol", "Must be one of: tcp, http, https.");
        }
    }
    overwrite(&mut hc.port, h.opt_port("port"));
    overwrite(&mut hc.interval, h.opt_int_in("interval", 3, 60));
    overwrite(&mut hc.timeout, h.opt_int_in("timeout", 1, 60));
    overwrite(&mut hc.retries, h.opt_int_in("retries", 0, 5));
    if hc.protocol == "tcp" {
        hc.http = None;
    } else {
        let mut http = hc.http.take().unwrap_or(HealthCheckHttp {
            domain: None,
            path: "/".to_string(),
            response: None,
            status_codes: vec!["2??".to_string(), "3??".to_string()],
            tls: false,
        });
        if let Some(mut hh) = h.opt_obj("http") {
            overwrite(&mut http.domain, hh.opt_nullable_str("domain"));
            overwrite(&mut http.path, hh.opt_str("path"));
            overwrite(&mut http.response, hh.opt_nullable_str("response"));
            overwrite(&mut http.status_codes, hh.opt_str_list("status_codes"));
            overwrite(&mut http.tls, hh.opt_bool("tls"));
            h.absorb(hh);
        }
        hc.http = Some(http);
    }
    input.absorb(h);
    hc
}

/// Reads a service. With `base`, fields not given keep their value (update_service).
pub fn read_service(input: &mut Input, base: Option<&Service>) -> Option<Service> {
    let listen_port = input.req_port("listen_port");
    let protocol = if base.is_none() {
        input.req_str("protocol")
    } else {
        input.opt_str("protocol")
    };
    if let Some(p) = &protocol
        && !PROTOCOLS.contains(&p.as_str())
    {
        input.error("protocol", "Must be one of: tcp, http, https.");
    }
    let destination_port = input.opt_port("destination_port");
    let proxyprotocol = input.opt_bool("proxyprotocol");
    let listen_port = listen_port?;
    let mut svc = match base {
        Some(b) => b.clone(),
        None => {
            let protocol = protocol.clone().unwrap_or_else(|| "tcp".to_string());
            let dest =
                destination_port.unwrap_or(if protocol == "https" { 80 } else { listen_port });
            Service {
                protocol,
                listen_port,
                destination_port: dest,
                proxyprotocol: false,
                http: None,
                health_check: HealthCheck {
                    protocol: "tcp".to_string(),
                    port: dest,
                    interval: 15,
                    timeout: 10,
                    retries: 3,
                    http: None,
                },
            }
        }
    };
    overwrite(&mut svc.protocol, protocol);
    overwrite(&mut svc.destination_port, destination_port);
    overwrite(&mut svc.proxyprotocol, proxyprotocol);
    if svc.protocol == "tcp" {
        svc.http = None;
        if input.has("http") {
            input.error("http", "Only allowed for protocols http and https.");
        }
    } else {
        let http = svc.http.take().unwrap_or_else(default_http);
        svc.http = Some(read_http(input, http));
    }
    svc.health_check = read_health_check(input, svc.health_check.clone());
    if input.has_errors() {
        return None;
    }
    Some(svc)
}

/// Checks a service against the project (certificates exist, https has one).
pub fn check_service(w: &World, svc: &Service) -> ApiResult<()> {
    if let Some(http) = &svc.http {
        if svc.protocol == "https" && http.certificates.is_empty() {
            return Err(ApiError::field(
                "http.certificates",
                "At least one certificate is required for https.",
            ));
        }
        if let Some(missing) = http
            .certificates
            .iter()
            .find(|c| !w.certificates.contains_key(c))
        {
            return Err(ApiError::field(
                "http.certificates",
                format!("certificate {missing} not found"),
            ));
        }
    }
    Ok(())
}

/// 403 `resource_limit_exceeded`: load balancer type `t` allows `max` of `what`.
fn type_limit(t: &LbType, max: usize, what: &str) -> ApiError {
    crate::limits::exceeded(&format!(
        "load balancer type {} allows {max} {what}",
        t.name
    ))
}

/// Checks a whole service list against the type's limits and for duplicate ports.
pub fn check_services(services: &[Service], t: &LbType) -> ApiResult<()> {
    for (i, s) in services.iter().enumerate() {
        if services[..i].iter().any(|o| o.listen_port == s.listen_port) {
            return Err(ApiError::new(
                "source_port_already_used",
                format!(
                    "listen port {} is already used by another service",
                    s.listen_port
                ),
            ));
        }
    }
    // An https service that redirects HTTP listens on port 80 as well.
    let redirects = services
        .iter()
        .any(|s| s.protocol == "https" && s.http.as_ref().is_some_and(|h| h.redirect_http));
    if redirects && services.iter().any(|s| s.listen_port == 80) {
        return Err(ApiError::new(
            "source_port_already_used",
            "port 80 is busy, redirect_http is enabled on another service",
        ));
    }
    if services.len() > t.max_services {
        return Err(type_limit(t, t.max_services, "services"));
    }
    let certs: usize = services
        .iter()
        .filter_map(|s| s.http.as_ref())
        .map(|h| h.certificates.len())
        .sum();
    if certs > t.max_assigned_certificates {
        return Err(type_limit(t, t.max_assigned_certificates, "certificates"));
    }
    Ok(())
}

/// Reads the required object `key` of `input` with `read`.
fn nested<T>(
    input: &mut Input,
    key: &str,
    read: impl FnOnce(&mut Input) -> Option<T>,
) -> Option<T> {
    let Some(mut obj) = input.opt_obj(key) else {
        input.error(key, "Missing data for required field.");
        return None;
    };
    let value = read(&mut obj);
    input.absorb(obj);
    value
}

/// Reads a target (`type` plus `server.id`, `label_selector.selector` or `ip.ip`).
pub fn read_target(input: &mut Input) -> Option<Target> {
    let kind = input.req_str("type");
    let use_private_ip = input.opt_bool("use_private_ip").unwrap_or(false);
    let target = match kind.as_deref() {
        Some("server") => nested(input, "server", |s| s.req_i64("id")).map(TargetKind::Server),
        Some("label_selector") => {
            let sel = nested(input, "label_selector", |s| s.req_str("selector"));
            if let Some(sel) = &sel
                && let Err(e) = Selector::parse(sel)
            {
                input.error("label_selector.selector", e);
            }
            sel.map(TargetKind::LabelSelector)
        }
        Some("ip") => {
            let ip = nested(input, "ip", |s| s.req_str("ip"));
            if let Some(ip) = &ip
                && ip.parse::<IpAddr>().is_err()
            {
                input.error("ip.ip", "Not a valid IP address.");
            }
            ip.map(TargetKind::Ip)
        }
        Some(_) => {
            input.error("type", "Must be one of: server, label_selector, ip.");
            None
        }
        None => None,
    };
    let kind = target?;
    let use_private_ip = !matches!(kind, TargetKind::Ip(_)) && use_private_ip;
    Some(Target {
        kind,
        use_private_ip,
    })
}

/// Number of targets counted against the type's limit (selectors count their servers).
pub fn effective_targets(w: &World, targets: &[Target]) -> usize {
    targets
        .iter()
        .map(|t| match &t.kind {
            TargetKind::LabelSelector(sel) => Selector::parse(sel)
                .map(|s| w.servers_matching(&s).len())
                .unwrap_or(0),
            _ => 1,
        })
        .sum()
}

/// Checks a new target against the load balancer. `networks` are the networks the load
/// balancer is (or will be, on create) attached to.
pub fn check_target(
    w: &World,
    lb: &LoadBalancer,
    networks: &[i64],
    existing: &[Target],
    t: &Target,
) -> ApiResult<()> {
    if existing.iter().any(|e| e.kind == t.kind) {
        return Err(ApiError::new(
            "target_already_defined",
            "the target is already defined",
        ));
    }
    if t.use_private_ip && networks.is_empty() {
        return Err(ApiError::new(
            "load_balancer_not_attached_to_network",
            "the load balancer is not attached to a network",
        ));
    }
    if !t.use_private_ip && !lb.public_enabled {
        return Err(ApiError::new(
            "load_balancer_public_interface_disabled",
            "the load balancer's public interface is disabled",
        ));
    }
    match &t.kind {
        TargetKind::Server(id) => {
            let s = w
                .servers
                .get(id)
                .ok_or_else(|| ApiError::not_found("server"))?;
            if t.use_private_ip {
                if !s
                    .private_net
                    .iter()
                    .any(|pn| networks.contains(&pn.network))
                {
                    return Err(ApiError::new(
                        "server_not_attached_to_network",
                        format!("server {id} is not attached to the load balancer's network"),
                    ));
                }
            } else if s.ipv4.is_none() {
                return Err(ApiError::new(
                    "missing_ipv4",
                    format!("server {id} has no public IPv4"),
                ));
            }
        }
        TargetKind::Ip(ip) => {
            let cloud = w
                .servers
                .values()
                .any(|s| s.ipv4.as_ref().is_some_and(|v4| v4.ip.to_string() == *ip))
                || w.load_balancers
                    .values()
                    .any(|l| l.ipv4.is_some_and(|v4| v4.to_string() == *ip));
            if cloud {
                return Err(ApiError::new(
                    "cloud_resource_ip_not_allowed",
                    format!("{ip} belongs to a Hetzner Cloud resource"),
                ));
            }
        }
        TargetKind::LabelSelector(_) => {}
    }
    Ok(())
}

/// Checks the target count against the type's limit.
pub fn check_target_limit(w: &World, targets: &[Target], t: &LbType) -> ApiResult<()> {
    let n = effective_targets(w, targets);
    if n > t.max_targets {
        return Err(type_limit(t, t.max_targets, &format!("targets, got {n}")));
    }
    Ok(())
}
