//! JSON views of the resources, as the API shows them.

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Value, json};

use crate::label_selector::Selector;
use crate::model::{
    Action, Assignee, Certificate, Image, LbType, LoadBalancer, Location, Network, PrimaryAddr,
    PrimaryIp, Server, ServerType, Service, Target, TargetKind,
};
use crate::world::World;

/// RFC 3339 with seconds, `Z` suffix.
pub fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// Traffic included with a server or load balancer, in bytes (20 TiB).
const INCLUDED_TRAFFIC: i64 = 21_990_232_555_520;

fn price(net: f64) -> Value {
    json!({"net": format!("{net:.4}"), "gross": format!("{:.4}", net * 1.19)})
}

/// The prices of a server or load balancer type in one location.
fn location_prices(location: &str, price_monthly: f64) -> Value {
    json!({
        "location": location,
        "price_hourly": price(price_monthly / 730.0),
        "price_monthly": price(price_monthly),
        "included_traffic": INCLUDED_TRAFFIC,
        "price_per_tb_traffic": price(1.0),
    })
}

/// The location with ID `id` (null if unknown).
fn location_by_id(w: &World, id: i64) -> Value {
    w.catalog
        .location_by_id(id)
        .map(location)
        .unwrap_or(Value::Null)
}

/// The `error` of an action or a certificate: `{code, message}` or null.
fn error(e: &Option<(String, String)>) -> Value {
    e.as_ref().map_or(
        Value::Null,
        |(code, message)| json!({"code": code, "message": message}),
    )
}

/// Location.
pub fn location(l: &Location) -> Value {
    json!({
        "id": l.id, "name": l.name, "description": l.description, "country": l.country,
        "city": l.city, "latitude": l.latitude, "longitude": l.longitude,
        "network_zone": l.network_zone,
    })
}

/// Server type.
pub fn server_type(w: &World, t: &ServerType) -> Value {
    let deprecation = if t.deprecated {
        json!({"announced": "2025-09-01T00:00:00Z", "unavailable_after": "2026-12-01T00:00:00Z"})
    } else {
        Value::Null
    };
    // Every location is listed; `available` says where the type can be ordered, and
    // `recommended` is set where it can be ordered and is not deprecated.
    let locations: Vec<Value> = w
        .catalog
        .locations
        .iter()
        .map(|l| {
            let available = t.locations.contains(&l.name);
            json!({
                "id": l.id, "name": l.name, "deprecation": deprecation,
                "available": available, "recommended": available && !t.deprecated,
            })
        })
        .collect();
    let prices: Vec<Value> = t
        .locations
        .iter()
        .map(|l| location_prices(l, t.price_monthly))
        .collect();
    json!({
        "id": t.id, "name": t.name, "description": t.description.to_uppercase(),
        "cores": t.cores, "memory": t.memory, "disk": t.disk, "cpu_type": t.cpu_type,
        "architecture": t.architecture, "category": t.category, "storage_type": "local",
        "deprecated": t.deprecated, "deprecation": deprecation,
        "locations": locations, "prices": prices,
    })
}

/// Load balancer type.
pub fn lb_type(w: &World, t: &LbType) -> Value {
    let prices: Vec<Value> = w
        .catalog
        .locations
        .iter()
        .map(|l| location_prices(l.name, t.price_monthly))
        .collect();
    json!({
        "id": t.id, "name": t.name, "description": t.description,
        "max_connections": t.max_connections, "max_services": t.max_services,
        "max_targets": t.max_targets, "max_assigned_certificates": t.max_assigned_certificates,
        "deprecated": null, "deprecation": null, "prices": prices,
    })
}

/// Image.
pub fn image(i: &Image) -> Value {
    json!({
        "id": i.id, "type": "system", "status": "available", "name": i.name,
        "description": i.description, "image_size": null, "disk_size": 5,
        "created": ts(i.created), "created_from": null, "bound_to": null,
        "os_flavor": i.os_flavor, "os_version": i.os_version, "rapid_deploy": true,
        "protection": {"delete": false}, "deprecated": null, "deleted": null,
        "labels": {}, "architecture": i.architecture,
    })
}

/// IDs of load balancers that target a server (directly or by label selector).
pub fn load_balancers_of_server(w: &World, s: &Server) -> Vec<i64> {
    w.load_balancers
        .values()
        .filter(|lb| {
            lb.targets.iter().any(|t| match &t.kind {
                TargetKind::Server(id) => *id == s.id,
                TargetKind::LabelSelector(sel) => {
                    Selector::parse(sel).is_ok_and(|sel| sel.matches(&s.labels))
                }
                TargetKind::Ip(_) => false,
            })
        })
        .map(|lb| lb.id)
        .collect()
}

/// Server.
pub fn server(w: &World, s: &Server) -> Value {
    let location_v = location_by_id(w, s.location);
    let type_v = w
        .catalog
        .server_type_by_id(s.server_type)
        .map(|t| server_type(w, t))
        .unwrap_or(Value::Null);
    let image_v = s
        .image
        .and_then(|id| w.catalog.image_by_id(id))
        .map(image)
        .unwrap_or(Value::Null);
    let disk = w
        .catalog
        .server_type_by_id(s.server_type)
        .map(|t| t.disk)
        .unwrap_or(0);
    let ipv4 = s.ipv4.as_ref().map(
        |ip| json!({"id": ip.id, "ip": ip.ip.to_string(), "blocked": false, "dns_ptr": ip.dns_ptr}),
    );
    let ipv6 = s
        .ipv6
        .as_ref()
        .map(|ip| json!({"id": ip.id, "ip": ip.net.to_string(), "blocked": false, "dns_ptr": []}));
    let private_net: Vec<Value> = s
        .private_net
        .iter()
        .map(|pn| {
            json!({
                "network": pn.network, "ip": pn.ip.to_string(),
                "alias_ips": pn.alias_ips.iter().map(ToString::to_string).collect::<Vec<_>>(),
                "mac_address": pn.mac_address,
            })
        })
        .collect();
    json!({
        "id": s.id, "name": s.name, "status": s.status, "created": ts(s.created),
        "labels": s.labels, "locked": false,
        "protection": {"delete": s.protect_delete, "rebuild": s.protect_rebuild},
        "server_type": type_v, "location": location_v, "image": image_v, "iso": null,
        "public_net": {"ipv4": ipv4, "ipv6": ipv6, "floating_ips": [], "firewalls": []},
        "private_net": private_net,
        "load_balancers": load_balancers_of_server(w, s),
        "volumes": [], "placement_group": null, "backup_window": null,
        "rescue_enabled": false, "primary_disk_size": disk,
        "included_traffic": INCLUDED_TRAFFIC, "ingoing_traffic": 0, "outgoing_traffic": 0,
    })
}

/// Network.
pub fn network(w: &World, n: &Network) -> Value {
    let gateway = crate::ipalloc::network_gateway(n.ip_range).to_string();
    let subnets: Vec<Value> = n
        .subnets
        .iter()
        .map(|s| {
            json!({
                "type": s.kind, "ip_range": s.ip_range.to_string(),
                "network_zone": s.network_zone, "gateway": gateway,
                "vswitch_id": s.vswitch_id,
            })
        })
        .collect();
    let routes: Vec<Value> = n
        .routes
        .iter()
        .map(
            |r| json!({"destination": r.destination.to_string(), "gateway": r.gateway.to_string()}),
        )
        .collect();
    let servers: Vec<i64> = w
        .servers
        .values()
        .filter(|s| s.private_net.iter().any(|pn| pn.network == n.id))
        .map(|s| s.id)
        .collect();
    let lbs: Vec<i64> = w
        .load_balancers
        .values()
        .filter(|lb| lb.private_net.iter().any(|(net, _)| *net == n.id))
        .map(|lb| lb.id)
        .collect();
    json!({
        "id": n.id, "name": n.name, "ip_range": n.ip_range.to_string(),
        "subnets": subnets, "routes": routes, "servers": servers, "load_balancers": lbs,
        "labels": n.labels, "protection": {"delete": n.protect_delete},
        "expose_routes_to_vswitch": n.expose_routes_to_vswitch, "created": ts(n.created),
    })
}

/// Load balancer service.
pub fn service(s: &Service) -> Value {
    let http = s.http.as_ref().map(|h| {
        json!({
            "cookie_name": h.cookie_name, "cookie_lifetime": h.cookie_lifetime,
            "certificates": h.certificates, "redirect_http": h.redirect_http,
            "sticky_sessions": h.sticky_sessions, "timeout_idle": h.timeout_idle,
        })
    });
    let hc = &s.health_check;
    let hc_http = hc.http.as_ref().map(|h| {
        json!({
            "domain": h.domain, "path": h.path, "response": h.response,
            "status_codes": h.status_codes, "tls": h.tls,
        })
    });
    json!({
        "protocol": s.protocol, "listen_port": s.listen_port,
        "destination_port": s.destination_port, "proxyprotocol": s.proxyprotocol,
        "http": http,
        "health_check": {
            "protocol": hc.protocol, "port": hc.port, "interval": hc.interval,
            "timeout": hc.timeout, "retries": hc.retries, "http": hc_http,
        },
    })
}

/// Health of one (resolved) target for every service of the LB.
fn health(w: &World, lb: &LoadBalancer, key: &TargetKind) -> Vec<Value> {
    lb.services
        .iter()
        .map(|svc| {
            let status = w
                .health
                .get(&(lb.id, key.clone(), svc.listen_port))
                .cloned()
                .unwrap_or_else(|| default_health(w, key).to_string());
            json!({"listen_port": svc.listen_port, "status": status})
        })
        .collect()
}

/// Health when nobody set one: running servers and IP targets are healthy, others unhealthy.
fn default_health(w: &World, key: &TargetKind) -> &'static str {
    match key {
        TargetKind::Server(id) => match w.servers.get(id) {
            Some(s) if s.status == "running" => "healthy",
            _ => "unhealthy",
        },
        TargetKind::Ip(_) => "healthy",
        TargetKind::LabelSelector(_) => "unknown",
    }
}

/// Target, with label selectors resolved to the servers they match.
pub fn target(w: &World, lb: &LoadBalancer, t: &Target) -> Value {
    match &t.kind {
        TargetKind::Server(id) => json!({
            "type": "server", "server": {"id": id}, "use_private_ip": t.use_private_ip,
            "health_status": health(w, lb, &t.kind),
        }),
        TargetKind::Ip(ip) => json!({
            "type": "ip", "ip": {"ip": ip}, "health_status": health(w, lb, &t.kind),
        }),
        TargetKind::LabelSelector(sel) => {
            let matched = Selector::parse(sel)
                .map(|s| w.servers_matching(&s))
                .unwrap_or_default();
            let resolved: Vec<Value> = matched
                .into_iter()
                .map(|id| {
                    let k = TargetKind::Server(id);
                    json!({
                        "type": "server", "server": {"id": id},
                        "use_private_ip": t.use_private_ip, "health_status": health(w, lb, &k),
                    })
                })
                .collect();
            json!({
                "type": "label_selector", "label_selector": {"selector": sel},
                "use_private_ip": t.use_private_ip, "targets": resolved,
            })
        }
    }
}

/// Load balancer.
pub fn load_balancer(w: &World, lb: &LoadBalancer) -> Value {
    let location_v = location_by_id(w, lb.location);
    let type_v = w
        .catalog
        .lb_type_by_id(lb.lb_type)
        .map(|t| lb_type(w, t))
        .unwrap_or(Value::Null);
    json!({
        "id": lb.id, "name": lb.name, "labels": lb.labels, "created": ts(lb.created),
        "protection": {"delete": lb.protect_delete},
        "location": location_v, "load_balancer_type": type_v,
        "algorithm": {"type": lb.algorithm},
        "public_net": {
            "enabled": lb.public_enabled,
            "ipv4": {
                "id": lb.ipv4_id, "ip": lb.ipv4.map(|i| i.to_string()), "dns_ptr": lb.ipv4_ptr,
            },
            "ipv6": {
                "id": lb.ipv6_id, "ip": lb.ipv6.map(|i| i.to_string()), "dns_ptr": lb.ipv6_ptr,
            },
        },
        "private_net": lb.private_net.iter()
            .map(|(n, ip)| json!({"network": n, "ip": ip.to_string()}))
            .collect::<Vec<_>>(),
        "services": lb.services.iter().map(service).collect::<Vec<_>>(),
        "targets": lb.targets.iter().map(|t| target(w, lb, t)).collect::<Vec<_>>(),
        "included_traffic": INCLUDED_TRAFFIC, "ingoing_traffic": 0, "outgoing_traffic": 0,
    })
}

/// Certificate.
pub fn certificate(w: &World, c: &Certificate) -> Value {
    let used_by: Vec<Value> = w
        .load_balancers
        .values()
        .filter(|lb| {
            lb.services.iter().any(|s| {
                s.http
                    .as_ref()
                    .is_some_and(|h| h.certificates.contains(&c.id))
            })
        })
        .map(|lb| json!({"id": lb.id, "type": "load_balancer"}))
        .collect();
    let status = c.status.as_ref().map(|st| {
        json!({
            "issuance": st.issuance, "renewal": st.renewal,
            "error": error(&st.error),
        })
    });
    json!({
        "id": c.id, "name": c.name, "labels": c.labels, "type": c.kind,
        "certificate": c.certificate, "created": ts(c.created),
        "not_valid_before": c.not_valid_before.map(ts), "not_valid_after": c.not_valid_after.map(ts),
        "domain_names": c.domain_names, "fingerprint": c.fingerprint,
        "status": status, "used_by": used_by,
    })
}

/// The `ip` of a Primary IP: an IPv4 address or an IPv6 network.
pub fn primary_address(ip: PrimaryAddr) -> String {
    match ip {
        PrimaryAddr::V4(v4) => v4.to_string(),
        PrimaryAddr::V6(net) => net.to_string(),
    }
}

/// Reverse DNS entries of a Primary IP: its assignee's for an assigned one.
fn primary_dns_ptr(w: &World, p: &PrimaryIp) -> Vec<Value> {
    let entry = |ip: String, ptr: &str| json!({"ip": ip, "dns_ptr": ptr});
    match (p.assignee, p.ip) {
        (Some(Assignee::Server(id)), PrimaryAddr::V4(_)) => w
            .servers
            .get(&id)
            .and_then(|s| s.ipv4.as_ref())
            .map(|v4| vec![entry(v4.ip.to_string(), &v4.dns_ptr)])
            .unwrap_or_default(),
        (Some(Assignee::LoadBalancer(id)), _) => w
            .load_balancers
            .get(&id)
            .and_then(|lb| match p.ip {
                PrimaryAddr::V4(_) => lb
                    .ipv4
                    .zip(lb.ipv4_ptr.as_deref())
                    .map(|(ip, ptr)| entry(ip.to_string(), ptr)),
                PrimaryAddr::V6(_) => lb
                    .ipv6
                    .zip(lb.ipv6_ptr.as_deref())
                    .map(|(ip, ptr)| entry(ip.to_string(), ptr)),
            })
            .into_iter()
            .collect(),
        (_, PrimaryAddr::V4(v4)) if p.assignee.is_none() => p
            .dns_ptr
            .as_deref()
            .map(|ptr| vec![entry(v4.to_string(), ptr)])
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// Primary IP. Not assigned: `assignee_id` null and `assignee_type` `unassigned`.
pub fn primary_ip(w: &World, p: &PrimaryIp) -> Value {
    let location_v = location_by_id(w, p.location);
    let (assignee_id, assignee_type) = match p.assignee {
        Some(a) => {
            let (id, kind) = a.parts();
            (json!(id), kind)
        }
        None => (Value::Null, "unassigned"),
    };
    json!({
        "id": p.id, "name": p.name, "labels": p.labels, "created": ts(p.created),
        "type": p.ip.kind(), "ip": primary_address(p.ip), "dns_ptr": primary_dns_ptr(w, p),
        "blocked": false, "assignee_id": assignee_id, "assignee_type": assignee_type,
        "auto_delete": p.auto_delete, "location": location_v,
        "protection": {"delete": p.protect_delete},
    })
}

/// Action.
pub fn action(a: &Action) -> Value {
    json!({
        "id": a.id, "command": a.command, "status": a.status, "progress": a.progress,
        "started": ts(a.started), "finished": a.finished.map(ts),
        "resources": a.resources.iter().map(|r| {
            let (id, kind) = r.parts();
            json!({"id": id, "type": kind})
        }).collect::<Vec<_>>(),
        "error": error(&a.error),
    })
}

/// Action by ID (null if unknown).
pub fn action_by_id(w: &World, id: i64) -> Value {
    w.actions.get(&id).map(action).unwrap_or(Value::Null)
}
