//! Networks: CRUD, subnets, routes and their actions.

use std::net::Ipv4Addr;

use axum::response::Response;
use chrono::Utc;
use ipnet::Ipv4Net;
use serde_json::json;

use super::{check_name, list_reply, not_unique, rename_and_relabel, selector_param};
use crate::app::{Req, no_content, reply};
use crate::error::{ApiError, ApiResult};
use crate::input::{Input, overwrite, parse_body, parse_body_or_empty};
use crate::ipalloc::{
    RESERVED_GATEWAY, allocate_private_ip, assignable, first_free_subnet, is_rfc1918,
    network_gateway, overlaps,
};
use crate::limits;
use crate::model::{Labels, Network, Res, Route, Subnet};
use crate::render;
use crate::world::World;

/// Network zones that exist.
pub const NETWORK_ZONES: &[&str] = &["eu-central", "us-east", "us-west", "ap-southeast"];

/// `GET /networks`.
pub fn list(w: &mut World, req: &Req) -> ApiResult<Response> {
    let sel = selector_param(req)?;
    list_reply(
        req,
        "networks",
        sel.as_ref(),
        w.networks.values(),
        |_| true,
        |n| render::network(w, n),
    )
}

/// `GET /networks/{id}`.
pub fn get(w: &mut World, req: &Req) -> ApiResult<Response> {
    let n = w.network(req.id(0)?)?;
    reply(200, json!({"network": render::network(w, n)}))
}

fn parse_net(input: &mut Input, key: &str, raw: Option<String>) -> Option<Ipv4Net> {
    let raw = raw?;
    match raw.parse::<Ipv4Net>() {
        Ok(n) if n.trunc() == n => Some(n),
        Ok(_) => {
            input.error(
                key,
                format!("{raw} is not a network address (host bits set)"),
            );
            None
        }
        Err(_) => {
            input.error(key, format!("{raw} is not a valid IPv4 CIDR"));
            None
        }
    }
}

fn parse_ip(input: &mut Input, key: &str, raw: Option<String>) -> Option<Ipv4Addr> {
    let raw = raw?;
    match raw.parse::<Ipv4Addr>() {
        Ok(ip) => Some(ip),
        Err(_) => {
            input.error(key, format!("{raw} is not a valid IPv4 address"));
            None
        }
    }
}

/// Reads a subnet object; `ip_range` may be left out (auto-assigned later).
fn read_subnet(input: &mut Input) -> Option<(String, Option<Ipv4Net>, String, Option<i64>)> {
    let kind = input.req_str("type");
    let raw_range = input.opt_str("ip_range");
    let range = parse_net(input, "ip_range", raw_range);
    let zone = input.req_str("network_zone");
    let vswitch_id = input.opt_i64("vswitch_id");
    if let Some(k) = &kind
        && !["cloud", "server", "vswitch"].contains(&k.as_str())
    {
        input.error("type", "Must be one of: cloud, server, vswitch.");
    }
    if let Some(z) = &zone
        && !NETWORK_ZONES.contains(&z.as_str())
    {
        input.error("network_zone", format!("unknown network zone {z:?}"));
    }
    if kind.as_deref() == Some("vswitch") && vswitch_id.is_none() {
        input.error("vswitch_id", "Required for subnets of type vswitch.");
    }
    Some((kind?, range, zone?, vswitch_id))
}

/// Checks a subnet against its network; returns the range to use.
fn place_subnet(net: &Network, range: Option<Ipv4Net>) -> ApiResult<Ipv4Net> {
    let taken: Vec<Ipv4Net> = net
        .subnets
        .iter()
        .map(|s| s.ip_range)
        .chain(
            net.routes
                .iter()
                .filter(|r| r.destination.prefix_len() > 0)
                .map(|r| r.destination),
        )
        .collect();
    let range = match range {
        Some(r) => r,
        None => first_free_subnet(net.ip_range, 24.max(net.ip_range.prefix_len()), &taken)
            .ok_or_else(|| ApiError::field("ip_range", "no free /24 left in the network"))?,
    };
    if !net.ip_range.contains(&range) {
        return Err(ApiError::field(
            "ip_range",
            format!("{range} is not inside the network range {}", net.ip_range),
        ));
    }
    if taken.iter().any(|t| overlaps(*t, range)) {
        return Err(ApiError::field(
            "ip_range",
            format!("{range} overlaps an existing subnet or route"),
        ));
    }
    Ok(range)
}

/// Route rules: destination private (or 0.0.0.0/0) and overlapping no subnet or route;
/// gateway inside the network, neither its first IP nor 172.31.1.1.
pub fn check_route(net: &Network, route: &Route) -> ApiResult<()> {
    let mut errors = Vec::new();
    let dest = route.destination;
    let default_route = dest.prefix_len() == 0;
    if !default_route && !is_rfc1918(dest) {
        errors.push((
            "destination".to_string(),
            "Must be a private (RFC 1918) range or 0.0.0.0/0.".to_string(),
        ));
    } else if !default_route && net.subnets.iter().any(|s| overlaps(s.ip_range, dest)) {
        errors.push((
            "destination".to_string(),
            format!("{dest} overlaps a subnet of the network"),
        ));
    }
    if net.routes.iter().any(|r| {
        (default_route && r.destination.prefix_len() == 0)
            || (!default_route && r.destination.prefix_len() > 0 && overlaps(r.destination, dest))
    }) {
        errors.push((
            "destination".to_string(),
            format!("{dest} overlaps an existing route"),
        ));
    }
    let gw = route.gateway;
    if gw == network_gateway(net.ip_range) || gw == RESERVED_GATEWAY {
        errors.push(("gateway".to_string(), format!("{gw} is a reserved address")));
    } else if !net.ip_range.contains(&gw) {
        errors.push((
            "gateway".to_string(),
            format!("{gw} is not inside the network range {}", net.ip_range),
        ));
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid_input(&errors))
    }
}

/// Picks (or checks) a private IP for a resource in `zone`.
pub fn pick_private_ip(
    w: &World,
    network: i64,
    zone: &str,
    requested: Option<Ipv4Addr>,
    ip_range: Option<Ipv4Net>,
) -> ApiResult<Ipv4Addr> {
    let net = w.network(network)?;
    let gateway = network_gateway(net.ip_range);
    let used = w.used_private_ips(network);
    let candidates: Vec<&Subnet> = net
        .subnets
        .iter()
        .filter(|s| s.kind != "vswitch" && s.network_zone == zone)
        .filter(|s| ip_range.is_none_or(|r| r == s.ip_range))
        .collect();
    if candidates.is_empty() {
        return Err(ApiError::new(
            "no_subnet_available",
            format!("no subnet in network zone {zone} available in network {network}"),
        ));
    }
    match requested {
        Some(ip) => {
            let fits = candidates
                .iter()
                .any(|s| assignable(s.ip_range, gateway, ip));
            if !fits || used.contains(&ip) {
                return Err(ApiError::new(
                    "ip_not_available",
                    format!("IP {ip} is not available in network {network}"),
                ));
            }
            Ok(ip)
        }
        None => candidates
            .iter()
            .find_map(|s| allocate_private_ip(s.ip_range, gateway, &used))
            .ok_or_else(|| {
                ApiError::new(
                    "no_subnet_available",
                    format!("no free IP left in network {network} for zone {zone}"),
                )
            }),
    }
}

/// What a network is created from (API body or seed).
#[derive(Debug, Clone, Default)]
pub struct NetworkSpec {
    /// Name.
    pub name: String,
    /// Range.
    pub ip_range: Ipv4Net,
    /// Subnets: (type, range, zone, vswitch).
    pub subnets: Vec<(String, Option<Ipv4Net>, String, Option<i64>)>,
    /// Routes.
    pub routes: Vec<Route>,
    /// Labels.
    pub labels: Labels,
    /// Expose routes to the vSwitch.
    pub expose_routes_to_vswitch: bool,
}

/// Creates a network after checking every rule; returns its ID.
pub fn create_network(w: &mut World, spec: NetworkSpec) -> ApiResult<i64> {
    if w.networks.values().any(|n| n.name == spec.name) {
        return Err(not_unique("name"));
    }
    if !is_rfc1918(spec.ip_range) {
        return Err(ApiError::field(
            "ip_range",
            "Must be inside a private (RFC 1918) range.",
        ));
    }
    let mut net = Network {
        id: 0,
        name: spec.name,
        ip_range: spec.ip_range,
        subnets: Vec::new(),
        routes: Vec::new(),
        labels: spec.labels,
        protect_delete: false,
        expose_routes_to_vswitch: spec.expose_routes_to_vswitch,
        created: Utc::now(),
    };
    for (kind, range, zone, vswitch_id) in spec.subnets {
        limits::check_subnets(w, net.subnets.len())?;
        let range = place_subnet(&net, range)?;
        net.subnets.push(Subnet {
            kind,
            ip_range: range,
            network_zone: zone,
            vswitch_id,
        });
    }
    for route in spec.routes {
        check_route(&net, &route)?;
        limits::check_routes(w, net.routes.len())?;
        net.routes.push(route);
    }
    net.id = w.network_ids.take();
    let id = net.id;
    w.networks.insert(id, net);
    Ok(id)
}

/// `POST /networks` (201, no action).
pub fn create(w: &mut World, req: &Req) -> ApiResult<Response> {
    let mut input = parse_body(&req.body)?;
    let name = input.req_str("name");
    check_name(&mut input, &name);
    let raw_range = input.req_str("ip_range");
    let ip_range = parse_net(&mut input, "ip_range", raw_range);
    let labels = input.opt_labels("labels").unwrap_or_default();
    let expose = input.opt_bool("expose_routes_to_vswitch").unwrap_or(false);
    let mut subnets = Vec::new();
    for mut s in input.opt_obj_list("subnets").unwrap_or_default() {
        if let Some(sub) = read_subnet(&mut s) {
            subnets.push(sub);
        }
        input.absorb(s);
    }
    let mut routes = Vec::new();
    for mut r in input.opt_obj_list("routes").unwrap_or_default() {
        let d = r.req_str("destination");
        let g = r.req_str("gateway");
        let d = parse_net(&mut r, "destination", d);
        let g = parse_ip(&mut r, "gateway", g);
        if let (Some(destination), Some(gateway)) = (d, g) {
            routes.push(Route {
                destination,
                gateway,
            });
        }
        input.absorb(r);
    }
    input.finish()?;
    let (Some(name), Some(ip_range)) = (name, ip_range) else {
        return Err(ApiError::field("name", "Missing data for required field."));
    };
    let id = create_network(
        w,
        NetworkSpec {
            name,
            ip_range,
            subnets,
            routes,
            labels,
            expose_routes_to_vswitch: expose,
        },
    )?;
    let n = w.network(id)?;
    reply(201, json!({"network": render::network(w, n)}))
}

/// `PUT /networks/{id}`: name, labels, expose_routes_to_vswitch.
pub fn update(w: &mut World, req: &Req) -> ApiResult<Response> {
    let id = req.id(0)?;
    w.network(id)?;
    let expose = rename_and_relabel(&mut w.networks, id, &req.body, check_name, |input| {
        input.opt_bool("expose_routes_to_vswitch")
    })?;
    if let (Some(net), Some(e)) = (w.networks.get_mut(&id), expose) {
        net.expose_routes_to_vswitch = e;
    }
    let n = w.network(id)?;
    reply(200, json!({"network": render::network(w, n)}))
}

/// `DELETE /networks/{id}` (204).
pub fn delete(w: &mut World, req: &Req) -> ApiResult<Response> {
    let id = req.id(0)?;
    let net = w.network(id)?;
    if net.protect_delete {
        return Err(ApiError::new("protected", "network is delete protected"));
    }
    w.ensure_unlocked(Res::Network(id))?;
    w.remove_network(id);
    no_content()
}

/// Starts the action `command` on network `id` that applies `change` to the network when it
/// succeeds (if the network is still there); answers 201 with the action.
fn network_action(
    w: &mut World,
    req: &Req,
    id: i64,
    command: &str,
    change: impl FnOnce(&mut Network) + Send + 'static,
) -> ApiResult<Response> {
    let a = w.start_action(
        command,
        vec![Res::Network(id)],
        req.fail(),
        Some(Box::new(move |w: &mut World| {
            if let Some(n) = w.networks.get_mut(&id) {
                change(n);
            }
        })),
        None,
    );
    reply(201, json!({"action": render::action_by_id(w, a)}))
}

/// The one field of an action body that takes a required CIDR `key`.
fn finish_with_net(mut input: Input, key: &str) -> ApiResult<Ipv4Net> {
    let raw = input.req_str(key);
    let net = parse_net(&mut input, key, raw);
    input.finish()?;
    net.ok_or_else(|| ApiError::field(key, "Missing data for required field."))
}

/// `POST /networks/{id}/actions/{action}`.
pub fn action(w: &mut World, req: &Req) -> ApiResult<Response> {
    let id = req.id(0)?;
    let net = w.network(id)?.clone();
    let name = req.params.get(1).cloned().unwrap_or_default();
    let mut input = parse_body_or_empty(&req.body)?;
    match name.as_str() {
        "add_route" | "delete_route" => {
            let d = input.req_str("destination");
            let g = input.req_str("gateway");
            let d = parse_net(&mut input, "destination", d);
            let g = parse_ip(&mut input, "gateway", g);
            input.finish()?;
            let (Some(destination), Some(gateway)) = (d, g) else {
                return Err(ApiError::field(
                    "destination",
                    "Missing data for required field.",
                ));
            };
            w.ensure_unlocked(Res::Network(id))?;
            let route = Route {
                destination,
                gateway,
            };
            if name == "add_route" {
                check_route(&net, &route)?;
                limits::check_routes(w, net.routes.len())?;
                network_action(w, req, id, "add_route", move |n| {
                    if !n.routes.contains(&route) {
                        n.routes.push(route);
                    }
                })
            } else {
                if !net.routes.contains(&route) {
                    return Err(ApiError::new(
                        "not_found",
                        format!("route {destination} via {gateway} not found"),
                    ));
                }
                network_action(w, req, id, "delete_route", move |n| {
                    n.routes.retain(|r| r != &route);
                })
            }
        }
        "add_subnet" => {
            let sub = read_subnet(&mut input);
            input.finish()?;
            let Some((kind, range, zone, vswitch_id)) = sub else {
                return Err(ApiError::field("type", "Missing data for required field."));
            };
            w.ensure_unlocked(Res::Network(id))?;
            let range = place_subnet(&net, range)?;
            limits::check_subnets(w, net.subnets.len())?;
            let subnet = Subnet {
                kind,
                ip_range: range,
                network_zone: zone,
                vswitch_id,
            };
            network_action(w, req, id, "add_subnet", move |n| n.subnets.push(subnet))
        }
        "delete_subnet" => {
            let range = finish_with_net(input, "ip_range")?;
            w.ensure_unlocked(Res::Network(id))?;
            if !net.subnets.iter().any(|s| s.ip_range == range) {
                return Err(ApiError::new(
                    "not_found",
                    format!("subnet {range} not found"),
                ));
            }
            if w.used_private_ips(id).iter().any(|ip| range.contains(ip)) {
                return Err(ApiError::new(
                    "conflict",
                    format!("subnet {range} still has servers or load balancers attached"),
                ));
            }
            network_action(w, req, id, "delete_subnet", move |n| {
                n.subnets.retain(|s| s.ip_range != range);
            })
        }
        "change_ip_range" => {
            let range = finish_with_net(input, "ip_range")?;
            if !range.contains(&net.ip_range) || !is_rfc1918(range) {
                return Err(ApiError::field(
                    "ip_range",
                    "The new range must be private and contain the current range.",
                ));
            }
            w.ensure_unlocked(Res::Network(id))?;
            network_action(w, req, id, "change_ip_range", move |n| n.ip_range = range)
        }
        "change_protection" => {
            let delete = input.opt_bool("delete");
            input.finish()?;
            w.ensure_unlocked(Res::Network(id))?;
            network_action(w, req, id, "change_protection", move |n| {
                overwrite(&mut n.protect_delete, delete);
            })
        }
        _ => Err(ApiError::not_found("action")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net() -> Network {
        Network {
            id: 1,
            name: "n".into(),
            ip_range: "10.0.0.0/16".parse().unwrap(),
            subnets: vec![Subnet {
                kind: "cloud".into(),
                ip_range: "10.0.0.0/24".parse().unwrap(),
                network_zone: "eu-central".into(),
                vswitch_id: None,
            }],
            routes: vec![Route {
                destination: "10.244.0.0/24".parse().unwrap(),
                gateway: "10.0.0.2".parse().unwrap(),
            }],
            labels: Labels::new(),
            protect_delete: false,
            expose_routes_to_vswitch: false,
            created: Utc::now(),
        }
    }

    fn route(d: &str, g: &str) -> Route {
        Route {
            destination: d.parse().unwrap(),
            gateway: g.parse().unwrap(),
        }
    }

    #[test]
    fn route_rules() {
        let n = net();
        assert!(check_route(&n, &route("10.244.1.0/24", "10.0.0.3")).is_ok());
        assert!(check_route(&n, &route("0.0.0.0/0", "10.0.0.3")).is_ok());
        // Public destination.
        assert!(check_route(&n, &route("8.8.8.0/24", "10.0.0.3")).is_err());
        // Overlaps the subnet.
        assert!(check_route(&n, &route("10.0.0.0/25", "10.0.0.3")).is_err());
        // Overlaps another route.
        assert!(check_route(&n, &route("10.244.0.0/16", "10.0.0.3")).is_err());
        assert!(check_route(&n, &route("10.244.0.0/24", "10.0.0.4")).is_err());
        // Gateways.
        assert!(check_route(&n, &route("10.244.1.0/24", "10.0.0.1")).is_err());
        assert!(check_route(&n, &route("10.244.1.0/24", "172.31.1.1")).is_err());
        assert!(check_route(&n, &route("10.244.1.0/24", "192.168.0.5")).is_err());
    }
}
