//! Applying seeds: each creates its resources at once, complete (no actions), with the same
//! checks as the API.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use chrono::Utc;
use ipnet::Ipv4Net;

use super::{
    CertificateSeed, LoadBalancerSeed, NetworkRef, NetworkSeed, PrimaryIpSeed, ResourceRef,
    SeedFile, ServerSeed, ServiceSeed, TargetSeed,
};
use crate::error::{ApiError, ApiResult};
use crate::input::{IdOrName, Input};
use crate::label_selector::Selector;
use crate::model::{CertStatus, Certificate, LoadBalancer, Route, Service, Target, TargetKind};
use crate::pagination::Sortable;
use crate::routes::certificates::{fake_pem, fingerprint};
use crate::routes::lb_parts::{
    check_service, check_services, check_target, check_target_limit, read_service,
};
use crate::routes::load_balancers::assign_public_ips;
use crate::routes::networks::{NETWORK_ZONES, NetworkSpec, create_network, pick_private_ip};
use crate::routes::primary_ips::create_unassigned;
use crate::routes::servers::{ServerSpec, create_server};
use crate::world::World;

/// The IPv4 CIDR `text` of seed field `field`.
fn cidr(text: &str, field: &str) -> ApiResult<Ipv4Net> {
    text.parse()
        .map_err(|_| ApiError::field(field, "Not a valid IPv4 CIDR."))
}

/// The IPv4 address `text` of seed field `field`.
fn ipv4(text: &str, field: &str) -> ApiResult<Ipv4Addr> {
    text.parse()
        .map_err(|_| ApiError::field(field, "Not a valid IPv4 address."))
}

/// Creates a seeded network; returns its ID.
pub fn apply_network(w: &mut World, seed: &NetworkSeed) -> ApiResult<i64> {
    if seed.name.trim().is_empty() {
        return Err(ApiError::field("name", "Missing data for required field."));
    }
    let ip_range = cidr(&seed.ip_range, "ip_range")?;
    let mut subnets = Vec::new();
    for s in &seed.subnets {
        let range = cidr(&s.ip_range, "subnets.ip_range")?;
        if !NETWORK_ZONES.contains(&s.network_zone.as_str()) {
            return Err(ApiError::field(
                "subnets.network_zone",
                "unknown network zone",
            ));
        }
        subnets.push((s.kind.clone(), Some(range), s.network_zone.clone(), None));
    }
    let mut routes = Vec::new();
    for r in &seed.routes {
        routes.push(Route {
            destination: cidr(&r.destination, "routes.destination")?,
            gateway: ipv4(&r.gateway, "routes.gateway")?,
        });
    }
    create_network(
        w,
        NetworkSpec {
            name: seed.name.clone(),
            ip_range,
            subnets,
            routes,
            labels: seed.labels.clone(),
            expose_routes_to_vswitch: false,
        },
    )
}

/// Creates a seeded server; returns its ID.
pub fn apply_server(w: &mut World, seed: &ServerSeed) -> ApiResult<i64> {
    check_labels(&seed.labels)?;
    create_server(
        w,
        ServerSpec {
            name: seed.name.clone(),
            server_type: IdOrName::parse(&seed.server_type),
            location: Some(IdOrName::parse(&seed.location)),
            image: Some(IdOrName::parse(&seed.image)),
            labels: seed.labels.clone(),
            status: seed.status.clone(),
            ipv4: seed.public_ipv4,
            ipv6: seed.public_ipv6,
            networks: seed.networks.iter().map(to_id_or_name).collect(),
        },
    )
}

fn check_labels(labels: &BTreeMap<String, String>) -> ApiResult<()> {
    for (k, v) in labels {
        if !crate::label_selector::is_label_key(k) || !crate::label_selector::is_label_value(v) {
            return Err(ApiError::field("labels", format!("invalid label {k}={v}")));
        }
    }
    Ok(())
}

/// The name (1 to 128 characters), the labels, then that the name is not one of `taken`.
fn check_name_and_labels<'a>(
    name: &str,
    labels: &BTreeMap<String, String>,
    mut taken: impl Iterator<Item = &'a str>,
) -> ApiResult<()> {
    if name.trim().is_empty() || name.len() > 128 {
        return Err(ApiError::field(
            "name",
            "Must be between 1 and 128 characters.",
        ));
    }
    check_labels(labels)?;
    if taken.any(|t| t == name) {
        return Err(crate::routes::not_unique("name"));
    }
    Ok(())
}

fn to_id_or_name(r: &NetworkRef) -> IdOrName {
    match r {
        NetworkRef::Id(id) => IdOrName::Id(*id),
        NetworkRef::Name(name) => IdOrName::Name(name.clone()),
    }
}

/// Creates a seeded, unassigned Primary IP; returns its ID.
pub fn apply_primary_ip(w: &mut World, seed: &PrimaryIpSeed) -> ApiResult<i64> {
    check_labels(&seed.labels)?;
    create_unassigned(
        w,
        seed.name.clone(),
        &seed.kind,
        &IdOrName::parse(&seed.location),
        seed.auto_delete,
        seed.labels.clone(),
    )
}

/// Creates a seeded certificate (issued, pending or failed as the seed says); returns its ID.
pub fn apply_certificate(w: &mut World, seed: &CertificateSeed) -> ApiResult<i64> {
    let taken = w.certificates.values().map(|c| c.name.as_str());
    check_name_and_labels(&seed.name, &seed.labels, taken)?;
    let now = Utc::now();
    let (pem, status) = match seed.kind.as_str() {
        "uploaded" => (
            Some(
                seed.certificate
                    .clone()
                    .unwrap_or_else(|| fake_pem(&seed.domain_names)),
            ),
            None,
        ),
        "managed" => {
            if seed.domain_names.is_empty() {
                return Err(ApiError::field(
                    "domain_names",
                    "At least one domain name is required.",
                ));
            }
            let status = match seed.issuance.as_str() {
                "completed" => CertStatus {
                    issuance: "completed".to_string(),
                    renewal: "scheduled".to_string(),
                    error: None,
                },
                "pending" => CertStatus {
                    issuance: "pending".to_string(),
                    renewal: "unavailable".to_string(),
                    error: None,
                },
                "failed" => CertStatus {
                    issuance: "failed".to_string(),
                    renewal: "unavailable".to_string(),
                    error: Some((
                        "ca_dns_validation_failed".to_string(),
                        "Certificate Authority: DNS validation failed".to_string(),
                    )),
                },
                _ => {
                    return Err(ApiError::field(
                        "issuance",
                        "Must be one of: completed, pending, failed.",
                    ));
                }
            };
            let pem = (status.issuance == "completed").then(|| fake_pem(&seed.domain_names));
            (pem, Some(status))
        }
        _ => {
            return Err(ApiError::field(
                "type",
                "Must be one of: uploaded, managed.",
            ));
        }
    };
    let id = w.cert_ids.take();
    w.certificates.insert(
        id,
        Certificate {
            id,
            name: seed.name.clone(),
            labels: seed.labels.clone(),
            kind: seed.kind.clone(),
            fingerprint: pem.as_deref().map(|p| fingerprint(&format!("{p}{id}"))),
            not_valid_before: pem.as_ref().map(|_| now),
            not_valid_after: pem.as_ref().map(|_| now + chrono::Duration::days(90)),
            certificate: pem,
            domain_names: seed.domain_names.clone(),
            created: now,
            status,
        },
    );
    Ok(id)
}

/// The ID of the resource of `items` that `r` names; an error on `field` when there is none.
fn resource_id<T: Sortable>(
    items: &BTreeMap<i64, T>,
    r: &ResourceRef,
    field: &str,
    what: &str,
) -> ApiResult<i64> {
    let found = match r {
        NetworkRef::Id(id) => items.contains_key(id).then_some(*id),
        NetworkRef::Name(n) => items.values().find(|x| x.sort_name() == n).map(T::sort_id),
    };
    found.ok_or_else(|| ApiError::field(field, format!("{what} {r:?} not found")))
}

/// A seeded service, read like an `add_service` body (same defaults and checks).
fn service_of(w: &World, i: usize, seed: &ServiceSeed) -> ApiResult<Service> {
    let mut value = serde_json::to_value(seed)
        .map_err(|e| ApiError::field("services", format!("cannot read service: {e}")))?;
    if let Some(http) = &seed.http {
        let ids = http
            .certificates
            .iter()
            .map(|c| resource_id(&w.certificates, c, "http.certificates", "certificate"))
            .collect::<ApiResult<Vec<i64>>>()?;
        value["http"]["certificates"] = serde_json::json!(ids);
    }
    let mut input = Input::from_value(&value, format!("services[{i}]"))
        .map_err(|(name, message)| ApiError::field(&name, message))?;
    let svc = read_service(&mut input, None);
    input.finish()?;
    svc.ok_or_else(|| ApiError::field("services", "invalid service"))
}

fn target_of(w: &World, seed: &TargetSeed) -> ApiResult<Target> {
    let kind_and_private = match seed {
        TargetSeed::Server {
            server,
            use_private_ip,
        } => {
            let id = resource_id(&w.servers, server, "targets.server", "server")?;
            (TargetKind::Server(id), *use_private_ip)
        }
        TargetSeed::LabelSelector {
            label_selector,
            use_private_ip,
        } => {
            Selector::parse(label_selector)
                .map_err(|e| ApiError::field("targets.label_selector", e))?;
            (
                TargetKind::LabelSelector(label_selector.clone()),
                *use_private_ip,
            )
        }
        TargetSeed::Ip { ip } => {
            ip.parse::<std::net::IpAddr>()
                .map_err(|_| ApiError::field("targets.ip", "Not a valid IP address."))?;
            (TargetKind::Ip(ip.clone()), false)
        }
    };
    Ok(Target {
        kind: kind_and_private.0,
        use_private_ip: kind_and_private.1,
    })
}

/// Creates a seeded load balancer, complete at once (public IPs, network, services,
/// targets); returns its ID.
pub fn apply_load_balancer(w: &mut World, seed: &LoadBalancerSeed) -> ApiResult<i64> {
    let taken = w.load_balancers.values().map(|lb| lb.name.as_str());
    check_name_and_labels(&seed.name, &seed.labels, taken)?;
    let lb_type = w
        .catalog
        .lb_type(&IdOrName::parse(&seed.load_balancer_type))
        .ok_or_else(|| ApiError::field("load_balancer_type", "load balancer type not found"))?
        .clone();
    let location = match (&seed.location, &seed.network_zone) {
        (Some(_), Some(_)) => {
            return Err(ApiError::field(
                "location",
                "Only one of location and network_zone may be given.",
            ));
        }
        (Some(l), None) => w.catalog.location(&IdOrName::parse(l)),
        (None, Some(z)) => w.catalog.locations.iter().find(|l| l.network_zone == z),
        (None, None) => w.catalog.location(&IdOrName::Name("fsn1".to_string())),
    }
    .ok_or_else(|| ApiError::field("location", "location not found"))?
    .clone();
    if !["round_robin", "least_connections"].contains(&seed.algorithm.as_str()) {
        return Err(ApiError::field(
            "algorithm",
            "Must be one of: round_robin, least_connections.",
        ));
    }
    let mut services = Vec::new();
    for (i, s) in seed.services.iter().enumerate() {
        let svc = service_of(w, i, s)?;
        check_service(w, &svc)?;
        services.push(svc);
    }
    check_services(&services, &lb_type)?;
    let attachment = match &seed.network {
        Some(n) => {
            let network = w.network_id(&to_id_or_name(&n.network)).ok_or_else(|| {
                ApiError::field("network", format!("network {:?} not found", n.network))
            })?;
            let ip =
                n.ip.as_deref()
                    .map(|ip| ipv4(ip, "network.ip"))
                    .transpose()?;
            Some((
                network,
                pick_private_ip(w, network, location.network_zone, ip, None)?,
            ))
        }
        None => None,
    };
    let mut lb = LoadBalancer {
        id: 0,
        name: seed.name.clone(),
        labels: seed.labels.clone(),
        created: Utc::now(),
        location: location.id,
        lb_type: lb_type.id,
        algorithm: seed.algorithm.clone(),
        public_enabled: seed.public_interface,
        ipv4_id: None,
        ipv6_id: None,
        ipv4: None,
        ipv4_ptr: None,
        ipv6: None,
        ipv6_ptr: None,
        private_net: attachment.into_iter().collect(),
        services,
        targets: Vec::new(),
        protect_delete: seed.protection.delete,
    };
    let networks: Vec<i64> = lb.private_net.iter().map(|(n, _)| *n).collect();
    for t in &seed.targets {
        let target = target_of(w, t)?;
        check_target(w, &lb, &networks, &lb.targets, &target)?;
        lb.targets.push(target);
    }
    check_target_limit(w, &lb.targets, &lb_type)?;
    let id = w.lb_ids.take();
    lb.id = id;
    w.load_balancers.insert(id, lb);
    assign_public_ips(w, id);
    if let Some(lb) = w.load_balancers.get_mut(&id) {
        if let Some(ptr) = &seed.dns_ptr.ipv4 {
            lb.ipv4_ptr = Some(ptr.clone());
        }
        if let Some(ptr) = &seed.dns_ptr.ipv6 {
            lb.ipv6_ptr = Some(ptr.clone());
        }
    }
    Ok(id)
}

/// Applies a whole seed file: limits, networks, servers, Primary IPs, certificates, then load
/// balancers (which may name all of those).
pub fn apply(w: &mut World, seed: &SeedFile) -> ApiResult<()> {
    if let Some(limits) = &seed.limits {
        crate::limits::apply(w, limits).map_err(|e| prefix(e, "limits"))?;
    }
    for n in &seed.networks {
        apply_network(w, n).map_err(|e| prefix(e, &format!("network {:?}", n.name)))?;
    }
    for s in &seed.servers {
        apply_server(w, s).map_err(|e| prefix(e, &format!("server {:?}", s.name)))?;
    }
    for p in &seed.primary_ips {
        apply_primary_ip(w, p).map_err(|e| prefix(e, &format!("primary IP {:?}", p.name)))?;
    }
    for c in &seed.certificates {
        apply_certificate(w, c).map_err(|e| prefix(e, &format!("certificate {:?}", c.name)))?;
    }
    for lb in &seed.load_balancers {
        apply_load_balancer(w, lb)
            .map_err(|e| prefix(e, &format!("load balancer {:?}", lb.name)))?;
    }
    for r in &seed.robot_servers {
        w.robot
            .add(r)
            .map_err(|e| prefix(e, &format!("robot server {:?}", r.name)))?;
    }
    Ok(())
}

fn prefix(mut e: ApiError, what: &str) -> ApiError {
    e.message = format!("{what}: {}", e.message);
    e
}
