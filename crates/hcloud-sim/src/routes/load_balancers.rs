//! Load balancers: CRUD and every action.

use std::net::{Ipv4Addr, Ipv6Addr};

use ipnet::Ipv6Net;

use axum::response::Response;
use chrono::Utc;
use serde_json::json;

use super::lb_parts::{
    check_service, check_services, check_target, check_target_limit, effective_targets,
    read_service, read_target,
};
use super::networks::pick_private_ip;
use super::primary_ips::{PrimaryIpSpec, insert_primary_ip};
use super::{check_name, list_reply, not_unique, rename_and_relabel, selector_param};
use crate::app::{Req, reply};
use crate::error::{ApiError, ApiResult};
use crate::input::{overwrite, parse_body, parse_body_or_empty};
use crate::ipalloc::{load_balancer_ipv4, load_balancer_ipv6};
use crate::model::{Assignee, Labels, LoadBalancer, PrimaryAddr, Res};
use crate::render;
use crate::world::{Effect, World};

const ALGORITHMS: &[&str] = &["round_robin", "least_connections"];

/// `GET /load_balancers`.
pub fn list(w: &mut World, req: &Req) -> ApiResult<Response> {
    let sel = selector_param(req)?;
    list_reply(
        req,
        "load_balancers",
        sel.as_ref(),
        w.load_balancers.values(),
        |_| true,
        |lb| render::load_balancer(w, lb),
    )
}

/// `GET /load_balancers/{id}`.
pub fn get(w: &mut World, req: &Req) -> ApiResult<Response> {
    let lb = w.load_balancer(req.id(0)?)?;
    reply(200, json!({"load_balancer": render::load_balancer(w, lb)}))
}

fn zone_of(w: &World, lb: &LoadBalancer) -> &'static str {
    w.catalog
        .location_by_id(lb.location)
        .map(|l| l.network_zone)
        .unwrap_or("eu-central")
}

/// Gives a load balancer its public IPs (when the create action finishes, or at once for a
/// seed): the Primary IPs given on create, new ones (deleted with the load balancer) else.
pub fn assign_public_ips(w: &mut World, id: i64) {
    let Some(lb) = w.load_balancers.get(&id) else {
        return;
    };
    let (v4_id, v6_id, location) = (lb.ipv4_id, lb.ipv6_id, lb.location);
    let given = |w: &World, pid: Option<i64>| pid.and_then(|p| w.primary_ips.get(&p)).map(|p| p.ip);
    let (given_v4, given_v6) = (given(w, v4_id), given(w, v6_id));
    let needs_new = !matches!(given_v4, Some(PrimaryAddr::V4(_)))
        || !matches!(given_v6, Some(PrimaryAddr::V6(_)));
    let seq = w.lb_ip_seq;
    if needs_new {
        w.lb_ip_seq += 1;
    }
    let new_ip = |w: &mut World, ip: PrimaryAddr| {
        insert_primary_ip(
            w,
            None,
            PrimaryIpSpec {
                name: None,
                ip,
                location,
                assignee: Some(Assignee::LoadBalancer(id)),
                auto_delete: true,
                labels: Labels::new(),
            },
        )
    };
    let (ipv4, ipv4_id) = match (given_v4, v4_id) {
        (Some(PrimaryAddr::V4(ip)), Some(pid)) => (Some(ip), Some(pid)),
        _ => match load_balancer_ipv4(seq) {
            Some(ip) => (Some(ip), Some(new_ip(w, PrimaryAddr::V4(ip)))),
            None => (None, None),
        },
    };
    let (ipv6, ipv6_id) = match (given_v6, v6_id) {
        (Some(PrimaryAddr::V6(net)), Some(pid)) => (
            Some(Ipv6Addr::from(u128::from(net.network()).saturating_add(1))),
            Some(pid),
        ),
        _ => {
            let ip = load_balancer_ipv6(seq);
            let net = Ipv6Net::new(ip, 64).map(|n| n.trunc()).unwrap_or_default();
            (Some(ip), Some(new_ip(w, PrimaryAddr::V6(net))))
        }
    };
    if let Some(lb) = w.load_balancers.get_mut(&id) {
        lb.ipv4 = ipv4;
        lb.ipv6 = ipv6;
        lb.ipv4_id = ipv4_id;
        lb.ipv6_id = ipv6_id;
        lb.ipv4_ptr = ipv4.map(|ip| format!("static.{ip}.clients.example.com"));
        lb.ipv6_ptr = ipv6.map(|_| format!("lb-{id}.example.com"));
    }
}

/// Checks Primary IPs given for a new load balancer in `location`: they exist, have the
/// right type, are not assigned and lie in the same location.
pub fn check_given_primary_ips(
    w: &World,
    ipv4: Option<i64>,
    ipv6: Option<i64>,
    location: i64,
) -> ApiResult<()> {
    for (field, kind, pid) in [
        ("public_net.ipv4", "ipv4", ipv4),
        ("public_net.ipv6", "ipv6", ipv6),
    ] {
        let Some(pid) = pid else { continue };
        let p = w
            .primary_ips
            .get(&pid)
            .ok_or_else(|| ApiError::field(field, format!("primary IP {pid} not found")))?;
        if p.ip.kind() != kind {
            return Err(ApiError::new(
                "primary_ip_version_mismatch",
                format!("primary IP {pid} is not an {kind} address"),
            ));
        }
        if p.assignee.is_some() {
            return Err(ApiError::new(
                "primary_ip_already_assigned",
                format!("primary IP {pid} is already assigned"),
            ));
        }
        if p.location != location {
            return Err(ApiError::field(
                field,
                format!("primary IP {pid} is in another location than the load balancer"),
            ));
        }
    }
    Ok(())
}

/// `POST /load_balancers`: 201 with the load balancer (IPs null) and the create action.
pub fn create(w: &mut World, req: &Req) -> ApiResult<Response> {
    let mut input = parse_body(&req.body)?;
    let name = input.req_str("name");
    check_name(&mut input, &name);
    let lb_type = input.req_id_or_name("load_balancer_type");
    let location = input.opt_id_or_name("location");
    let zone = input.opt_str("network_zone");
    let algorithm = match input.opt_obj("algorithm") {
        Some(mut a) => {
            let t = a.req_str("type");
            if let Some(t) = &t
                && !ALGORITHMS.contains(&t.as_str())
            {
                a.error("type", "Must be one of: round_robin, least_connections.");
            }
            input.absorb(a);
            t
        }
        None => None,
    };
    let labels = input.opt_labels("labels").unwrap_or_default();
    let public = input.opt_bool("public_interface").unwrap_or(true);
    let network = input.opt_i64("network");
    let (mut given_v4, mut given_v6) = (None, None);
    if let Some(mut pn) = input.opt_obj("public_net") {
        given_v4 = pn.opt_i64("ipv4");
        given_v6 = pn.opt_i64("ipv6");
        input.absorb(pn);
    }
    let mut services = Vec::new();
    for mut s in input.opt_obj_list("services").unwrap_or_default() {
        if let Some(svc) = read_service(&mut s, None) {
            services.push(svc);
        }
        input.absorb(s);
    }
    let mut targets = Vec::new();
    for mut t in input.opt_obj_list("targets").unwrap_or_default() {
        if let Some(target) = read_target(&mut t) {
            targets.push(target);
        }
        input.absorb(t);
    }
    if location.is_some() && zone.is_some() {
        input.error(
            "location",
            "Only one of location and network_zone may be given.",
        );
    }
    if location.is_none() && zone.is_none() {
        input.error("location", "One of location and network_zone is required.");
    }
    input.finish()?;
    let (Some(name), Some(lb_type)) = (name, lb_type) else {
        return Err(ApiError::field("name", "Missing data for required field."));
    };
    if w.load_balancers.values().any(|lb| lb.name == name) {
        return Err(not_unique("name"));
    }
    let t = w
        .catalog
        .lb_type(&lb_type)
        .ok_or_else(|| ApiError::field("load_balancer_type", "load balancer type not found"))?
        .clone();
    let loc = match (&location, &zone) {
        (Some(l), _) => w
            .catalog
            .location(l)
            .ok_or_else(|| ApiError::field("location", "location not found"))?
            .clone(),
        (None, Some(z)) => w
            .catalog
            .locations
            .iter()
            .find(|l| l.network_zone == z)
            .ok_or_else(|| ApiError::field("network_zone", "unknown network zone"))?
            .clone(),
        (None, None) => return Err(ApiError::field("location", "Missing data.")),
    };
    if let Some(n) = network {
        w.network(n)
            .map_err(|_| ApiError::field("network", format!("network {n} not found")))?;
    }
    for svc in &services {
        check_service(w, svc)?;
    }
    check_services(&services, &t)?;
    check_given_primary_ips(w, given_v4, given_v6, loc.id)?;
    let mut lb = LoadBalancer {
        id: 0,
        name,
        labels,
        created: Utc::now(),
        location: loc.id,
        lb_type: t.id,
        algorithm: algorithm.unwrap_or_else(|| "round_robin".to_string()),
        public_enabled: public,
        ipv4_id: given_v4,
        ipv6_id: given_v6,
        ipv4: None,
        ipv4_ptr: None,
        ipv6: None,
        ipv6_ptr: None,
        private_net: Vec::new(),
        services,
        targets: Vec::new(),
        protect_delete: false,
    };
    let nets: Vec<i64> = network.into_iter().collect();
    for target in targets {
        check_target(w, &lb, &nets, &lb.targets, &target)?;
        lb.targets.push(target);
    }
    check_target_limit(w, &lb.targets, &t)?;
    let private_ip = match network {
        Some(n) => Some((n, pick_private_ip(w, n, loc.network_zone, None, None)?)),
        None => None,
    };
    let id = w.lb_ids.take();
    lb.id = id;
    w.load_balancers.insert(id, lb);
    if let Some(res) = private_ip {
        w.reserved_ips.insert(res);
    }
    // Given Primary IPs are taken at once, so no one else can have them meanwhile.
    let given: Vec<i64> = given_v4.into_iter().chain(given_v6).collect();
    for pid in &given {
        if let Some(p) = w.primary_ips.get_mut(pid) {
            p.assignee = Some(Assignee::LoadBalancer(id));
        }
    }
    let on_success: Effect = Box::new(move |w: &mut World| {
        assign_public_ips(w, id);
        if let Some((n, ip)) = private_ip {
            w.reserved_ips.remove(&(n, ip));
            if w.networks.contains_key(&n)
                && let Some(lb) = w.load_balancers.get_mut(&id)
            {
                lb.private_net.push((n, ip));
            }
        }
    });
    let on_error: Effect = Box::new(move |w: &mut World| {
        if let Some(r) = private_ip {
            w.reserved_ips.remove(&r);
        }
        for pid in &given {
            if let Some(p) = w.primary_ips.get_mut(pid) {
                p.assignee = None;
            }
        }
        if let Some(lb) = w.load_balancers.get_mut(&id) {
            lb.ipv4_id = None;
            lb.ipv6_id = None;
        }
    });
    let action = w.start_action(
        "create_load_balancer",
        vec![Res::LoadBalancer(id)],
        req.fail(),
        Some(on_success),
        Some(on_error),
    );
    let lb = w.load_balancer(id)?;
    reply(
        201,
        json!({
            "load_balancer": render::load_balancer(w, lb),
            "action": render::action_by_id(w, action),
        }),
    )
}

/// `PUT /load_balancers/{id}`: name and labels.
pub fn update(w: &mut World, req: &Req) -> ApiResult<Response> {
    let id = req.id(0)?;
    w.load_balancer(id)?;
    rename_and_relabel(&mut w.load_balancers, id, &req.body, check_name, |_| ())?;
    let lb = w.load_balancer(id)?;
    reply(200, json!({"load_balancer": render::load_balancer(w, lb)}))
}

/// `DELETE /load_balancers/{id}`: 200 with the `delete_load_balancer` action (since
/// 2026-10-05). The load balancer stays, locked, until the action finished.
pub fn delete(w: &mut World, req: &Req) -> ApiResult<Response> {
    let id = req.id(0)?;
    let lb = w.load_balancer(id)?;
    if lb.protect_delete {
        return Err(ApiError::new(
            "protected",
            "load balancer is delete protected",
        ));
    }
    w.ensure_unlocked(Res::LoadBalancer(id))?;
    let on_success: Effect = Box::new(move |w: &mut World| w.remove_load_balancer(id));
    let a = w.start_action(
        "delete_load_balancer",
        vec![Res::LoadBalancer(id)],
        req.fail(),
        Some(on_success),
        None,
    );
    reply(200, json!({"action": render::action_by_id(w, a)}))
}

fn mutate(id: i64, f: impl FnOnce(&mut LoadBalancer) + Send + 'static) -> Effect {
    Box::new(move |w: &mut World| {
        if let Some(lb) = w.load_balancers.get_mut(&id) {
            f(lb);
        }
    })
}

fn missing(field: &str) -> ApiError {
    ApiError::field(field, "Missing data for required field.")
}

/// `POST /load_balancers/{id}/actions/{action}`.
pub fn action(w: &mut World, req: &Req) -> ApiResult<Response> {
    let id = req.id(0)?;
    let lb = w.load_balancer(id)?.clone();
    let name = req.params.get(1).cloned().unwrap_or_default();
    let mut input = parse_body_or_empty(&req.body)?;
    let me = Res::LoadBalancer(id);
    let lb_type = w
        .catalog
        .lb_type_by_id(lb.lb_type)
        .cloned()
        .ok_or_else(|| ApiError::new("server_error", "load balancer without type"))?;
    let networks: Vec<i64> = lb.private_net.iter().map(|(n, _)| *n).collect();
    let (command, resources, effect, on_error): (&str, Vec<Res>, Effect, Option<Effect>) =
        match name.as_str() {
            "add_service" => {
                let svc = read_service(&mut input, None);
                input.finish()?;
                let svc = svc.ok_or_else(|| missing("listen_port"))?;
                w.ensure_unlocked(me)?;
                check_service(w, &svc)?;
                let mut all = lb.services.clone();
                all.push(svc.clone());
                check_services(&all, &lb_type)?;
                (
                    "add_service",
                    vec![me],
                    mutate(id, move |lb| lb.services.push(svc)),
                    None,
                )
            }
            "update_service" => {
                let port = input.req_port("listen_port");
                let base = port.and_then(|p| lb.services.iter().find(|s| s.listen_port == p));
                if port.is_some() && base.is_none() {
                    input.finish()?;
                    return Err(ApiError::new("not_found", "service not found"));
                }
                let svc = read_service(&mut input, base);
                input.finish()?;
                let svc = svc.ok_or_else(|| missing("listen_port"))?;
                w.ensure_unlocked(me)?;
                check_service(w, &svc)?;
                let all: Vec<_> = lb
                    .services
                    .iter()
                    .map(|s| {
                        if s.listen_port == svc.listen_port {
                            svc.clone()
                        } else {
                            s.clone()
                        }
                    })
                    .collect();
                check_services(&all, &lb_type)?;
                (
                    "update_service",
                    vec![me],
                    mutate(id, move |lb| lb.services = all),
                    None,
                )
            }
            "delete_service" => {
                let port = input.req_port("listen_port");
                input.finish()?;
                let port = port.ok_or_else(|| missing("listen_port"))?;
                if !lb.services.iter().any(|s| s.listen_port == port) {
                    return Err(ApiError::new("not_found", "service not found"));
                }
                w.ensure_unlocked(me)?;
                let effect: Effect = Box::new(move |w: &mut World| {
                    if let Some(lb) = w.load_balancers.get_mut(&id) {
                        lb.services.retain(|s| s.listen_port != port);
                    }
                    w.health.retain(|(l, _, p), _| !(*l == id && *p == port));
                });
                ("delete_service", vec![me], effect, None)
            }
            "add_target" => {
                let target = read_target(&mut input);
                input.finish()?;
                let target = target.ok_or_else(|| missing("type"))?;
                w.ensure_unlocked(me)?;
                check_target(w, &lb, &networks, &lb.targets, &target)?;
                let mut all = lb.targets.clone();
                all.push(target.clone());
                check_target_limit(w, &all, &lb_type)?;
                (
                    "add_target",
                    vec![me],
                    mutate(id, move |lb| lb.targets.push(target)),
                    None,
                )
            }
            "remove_target" => {
                let target = read_target(&mut input);
                input.finish()?;
                let target = target.ok_or_else(|| missing("type"))?;
                if !lb.targets.iter().any(|t| t.kind == target.kind) {
                    return Err(ApiError::new("not_found", "target not found"));
                }
                w.ensure_unlocked(me)?;
                let kind = target.kind;
                let effect: Effect = Box::new(move |w: &mut World| {
                    if let Some(lb) = w.load_balancers.get_mut(&id) {
                        lb.targets.retain(|t| t.kind != kind);
                    }
                    w.health.retain(|(l, k, _), _| !(*l == id && *k == kind));
                });
                ("remove_target", vec![me], effect, None)
            }
            "attach_to_network" => {
                let network = input.req_i64("network");
                let ip = input.opt_str("ip");
                let ip_range = input.opt_str("ip_range");
                let ip = ip.and_then(|s| match s.parse::<Ipv4Addr>() {
                    Ok(ip) => Some(ip),
                    Err(_) => {
                        input.error("ip", "Not a valid IPv4 address.");
                        None
                    }
                });
                let ip_range = ip_range.and_then(|s| match s.parse::<ipnet::Ipv4Net>() {
                    Ok(r) => Some(r),
                    Err(_) => {
                        input.error("ip_range", "Not a valid IPv4 CIDR.");
                        None
                    }
                });
                input.finish()?;
                let network = network.ok_or_else(|| missing("network"))?;
                w.network(network)?;
                w.ensure_unlocked(me)?;
                if !lb.private_net.is_empty() {
                    return Err(ApiError::new(
                        "load_balancer_already_attached",
                        "the load balancer is already attached to a network",
                    ));
                }
                let ip = pick_private_ip(w, network, zone_of(w, &lb), ip, ip_range)?;
                w.reserved_ips.insert((network, ip));
                let effect: Effect = Box::new(move |w: &mut World| {
                    w.reserved_ips.remove(&(network, ip));
                    if w.networks.contains_key(&network)
                        && let Some(lb) = w.load_balancers.get_mut(&id)
                    {
                        lb.private_net.push((network, ip));
                    }
                });
                let on_error: Effect = Box::new(move |w: &mut World| {
                    w.reserved_ips.remove(&(network, ip));
                });
                (
                    "attach_to_network",
                    vec![me, Res::Network(network)],
                    effect,
                    Some(on_error),
                )
            }
            "detach_from_network" => {
                let network = input.req_i64("network");
                input.finish()?;
                let network = network.ok_or_else(|| missing("network"))?;
                w.network(network)?;
                w.ensure_unlocked(me)?;
                if !networks.contains(&network) {
                    return Err(ApiError::new(
                        "load_balancer_not_attached_to_network",
                        "the load balancer is not attached to the network",
                    ));
                }
                (
                    "detach_from_network",
                    vec![me, Res::Network(network)],
                    mutate(id, move |lb| lb.private_net.retain(|(n, _)| *n != network)),
                    None,
                )
            }
            "change_algorithm" => {
                let t = input.req_str("type");
                if let Some(t) = &t
                    && !ALGORITHMS.contains(&t.as_str())
                {
                    input.error("type", "Must be one of: round_robin, least_connections.");
                }
                input.finish()?;
                let t = t.ok_or_else(|| missing("type"))?;
                w.ensure_unlocked(me)?;
                (
                    "change_algorithm",
                    vec![me],
                    mutate(id, move |lb| lb.algorithm = t),
                    None,
                )
            }
            "change_type" => {
                let t = input.req_id_or_name("load_balancer_type");
                input.finish()?;
                let t = t.ok_or_else(|| missing("load_balancer_type"))?;
                let new_type = w.catalog.lb_type(&t).cloned().ok_or_else(|| {
                    ApiError::field("load_balancer_type", "load balancer type not found")
                })?;
                w.ensure_unlocked(me)?;
                if check_services(&lb.services, &new_type).is_err()
                    || effective_targets(w, &lb.targets) > new_type.max_targets
                {
                    return Err(ApiError::new(
                        "invalid_load_balancer_type",
                        format!(
                            "load balancer type {} does not fit the load balancer",
                            new_type.name
                        ),
                    ));
                }
                let tid = new_type.id;
                (
                    "change_load_balancer_type",
                    vec![me],
                    mutate(id, move |lb| lb.lb_type = tid),
                    None,
                )
            }
            "enable_public_interface" => {
                input.finish()?;
                w.ensure_unlocked(me)?;
                (
                    "enable_public_interface",
                    vec![me],
                    mutate(id, |lb| lb.public_enabled = true),
                    None,
                )
            }
            "disable_public_interface" => {
                input.finish()?;
                w.ensure_unlocked(me)?;
                if lb.private_net.is_empty() {
                    return Err(ApiError::new(
                        "load_balancer_not_attached_to_network",
                        "the load balancer is not attached to a network",
                    ));
                }
                if lb.targets.iter().any(|t| !t.use_private_ip) {
                    return Err(ApiError::new(
                        "targets_without_use_private_ip",
                        "the load balancer has targets that use the public IP",
                    ));
                }
                (
                    "disable_public_interface",
                    vec![me],
                    mutate(id, |lb| lb.public_enabled = false),
                    None,
                )
            }
            "change_protection" => {
                let delete = input.opt_bool("delete");
                input.finish()?;
                w.ensure_unlocked(me)?;
                (
                    "change_protection",
                    vec![me],
                    mutate(id, move |lb| {
                        overwrite(&mut lb.protect_delete, delete);
                    }),
                    None,
                )
            }
            "change_dns_ptr" => {
                let ip = input.req_str("ip");
                let ptr = input.opt_nullable_str("dns_ptr");
                if ptr.is_none() {
                    input.error("dns_ptr", "Missing data for required field.");
                }
                input.finish()?;
                let ip = ip.unwrap_or_default();
                let ptr = ptr.flatten();
                let v4 = lb.ipv4.is_some_and(|a| a.to_string() == ip);
                let v6 = lb
                    .ipv6
                    .is_some_and(|a| ip.parse::<std::net::Ipv6Addr>().is_ok_and(|p| p == a));
                if !v4 && !v6 {
                    return Err(ApiError::field(
                        "ip",
                        "IP does not belong to the load balancer",
                    ));
                }
                w.ensure_unlocked(me)?;
                (
                    "change_dns_ptr",
                    vec![me],
                    mutate(id, move |lb| {
                        if v4 {
                            lb.ipv4_ptr = ptr;
                        } else {
                            lb.ipv6_ptr = ptr;
                        }
                    }),
                    None,
                )
            }
            _ => return Err(ApiError::not_found("action")),
        };
    let a = w.start_action(command, resources, req.fail(), Some(effect), on_error);
    reply(201, json!({"action": render::action_by_id(w, a)}))
}
