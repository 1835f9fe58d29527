//! Servers: CRUD and actions.

use std::net::Ipv4Addr;

use axum::response::Response;
use chrono::Utc;
use rand::Rng;
use rand::distr::Alphanumeric;
use serde_json::json;

use super::networks::pick_private_ip;
use super::primary_ips::{PrimaryIpSpec, insert_primary_ip};
use super::{list_reply, not_unique, rename_and_relabel, selector_param};
use crate::app::{Req, reply};
use crate::error::{ApiError, ApiResult};
use crate::input::{IdOrName, Input, overwrite, parse_body, parse_body_or_empty};
use crate::ipalloc::{server_ipv4, server_ipv6_net};
use crate::limits;
use crate::model::{Assignee, Labels, PrimaryAddr, PublicIpv4, PublicIpv6, Res, Server, ServerNet};
use crate::render;
use crate::world::World;

/// Every status a server can have.
pub const STATUSES: &[&str] = &[
    "initializing",
    "starting",
    "running",
    "stopping",
    "off",
    "deleting",
    "migrating",
    "rebuilding",
    "unknown",
];

/// Whether `name` is a valid hostname (RFC 1123).
pub fn is_hostname(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// The name rule of a server: a hostname.
fn check_hostname(input: &mut Input, name: &Option<String>) {
    if let Some(n) = name
        && !is_hostname(n)
    {
        input.error("name", "Must be a valid hostname (RFC 1123).");
    }
}

/// What a server is created from (API body or seed).
#[derive(Debug, Clone)]
pub struct ServerSpec {
    /// Name.
    pub name: String,
    /// Server type.
    pub server_type: IdOrName,
    /// Location (first location of the type when unset).
    pub location: Option<IdOrName>,
    /// Image (ubuntu-24.04 when unset).
    pub image: Option<IdOrName>,
    /// Labels.
    pub labels: Labels,
    /// Status after creation.
    pub status: String,
    /// Public IPv4.
    pub ipv4: bool,
    /// Public IPv6.
    pub ipv6: bool,
    /// Networks to attach.
    pub networks: Vec<IdOrName>,
}

/// Creates a server after checking every rule; returns its ID.
pub fn create_server(w: &mut World, spec: ServerSpec) -> ApiResult<i64> {
    if !is_hostname(&spec.name) {
        return Err(ApiError::field(
            "name",
            "Must be a valid hostname (RFC 1123).",
        ));
    }
    if w.servers.values().any(|s| s.name == spec.name) {
        return Err(not_unique("name"));
    }
    let stype = w
        .catalog
        .server_type(&spec.server_type)
        .ok_or_else(|| ApiError::field("server_type", "server type not found"))?
        .clone();
    let location = match &spec.location {
        Some(l) => w
            .catalog
            .location(l)
            .ok_or_else(|| ApiError::field("location", "location not found"))?
            .clone(),
        None => w
            .catalog
            .locations
            .iter()
            .find(|l| stype.locations.contains(&l.name))
            .ok_or_else(|| ApiError::field("location", "no location for the server type"))?
            .clone(),
    };
    if !stype.locations.contains(&location.name) {
        return Err(ApiError::field(
            "server_type",
            format!(
                "server type {} is not available in {}",
                stype.name, location.name
            ),
        ));
    }
    let image_ref = spec
        .image
        .clone()
        .unwrap_or_else(|| IdOrName::Name("ubuntu-24.04".to_string()));
    let image = w
        .catalog
        .image(&image_ref, stype.architecture)
        .ok_or_else(|| ApiError::field("image", "image not found"))?;
    if image.architecture != stype.architecture {
        return Err(ApiError::field(
            "image",
            "image architecture does not match the server type",
        ));
    }
    let image_id = image.id;
    if !STATUSES.contains(&spec.status.as_str()) {
        return Err(ApiError::field("status", "unknown server status"));
    }
    let mut nets = Vec::new();
    for n in &spec.networks {
        let id = w
            .network_id(n)
            .ok_or_else(|| ApiError::field("networks", format!("network {n:?} not found")))?;
        if !nets.contains(&id) {
            nets.push(id);
        }
    }
    // Private IPs, one per network.
    for (i, net) in nets.iter().enumerate() {
        limits::check_attachment(w, None, i, *net)?;
    }
    let mut private_net = Vec::new();
    for net in nets {
        let ip = pick_private_ip(w, net, location.network_zone, None, None)?;
        let mac = w.new_mac();
        // Reserve while allocating the others.
        w.reserved_ips.insert((net, ip));
        private_net.push(ServerNet {
            network: net,
            ip,
            alias_ips: Vec::new(),
            mac_address: mac,
        });
    }
    for pn in &private_net {
        w.reserved_ips.remove(&(pn.network, pn.ip));
    }
    let ipv4 = if spec.ipv4 {
        let ip = server_ipv4(w.server_ipv4_seq)
            .ok_or_else(|| ApiError::new("resource_unavailable", "no public IPv4 left"))?;
        w.server_ipv4_seq += 1;
        Some(PublicIpv4 {
            id: w.primary_ip_ids.take(),
            ip,
            dns_ptr: format!("static.{}.clients.example.com", reverse(ip)),
        })
    } else {
        None
    };
    let ipv6 = if spec.ipv6 {
        let net = server_ipv6_net(w.server_ipv6_seq);
        w.server_ipv6_seq += 1;
        Some(PublicIpv6 {
            id: w.primary_ip_ids.take(),
            net,
        })
    } else {
        None
    };
    let addresses: Vec<(i64, PrimaryAddr)> = ipv4
        .iter()
        .map(|v4| (v4.id, PrimaryAddr::V4(v4.ip)))
        .chain(ipv6.iter().map(|v6| (v6.id, PrimaryAddr::V6(v6.net))))
        .collect();
    let id = w.server_ids.take();
    for (ip_id, ip) in addresses {
        insert_primary_ip(
            w,
            Some(ip_id),
            PrimaryIpSpec {
                name: None,
                ip,
                location: location.id,
                assignee: Some(Assignee::Server(id)),
                auto_delete: true,
                labels: Labels::new(),
            },
        );
    }
    w.servers.insert(
        id,
        Server {
            id,
            name: spec.name,
            status: spec.status,
            created: Utc::now(),
            labels: spec.labels,
            location: location.id,
            server_type: stype.id,
            image: Some(image_id),
            ipv4,
            ipv6,
            private_net,
            protect_delete: false,
            protect_rebuild: false,
        },
    );
    Ok(id)
}

fn reverse(ip: Ipv4Addr) -> String {
    let o = ip.octets();
    format!("{}.{}.{}.{}", o[3], o[2], o[1], o[0])
}

/// `GET /servers` (`name`, `label_selector`, `status`, `sort`, pages).
pub fn list(w: &mut World, req: &Req) -> ApiResult<Response> {
    let sel = selector_param(req)?;
    let statuses = req.query.all("status");
    if let Some(bad) = statuses.iter().find(|s| !STATUSES.contains(s)) {
        return Err(ApiError::field("status", format!("invalid status {bad:?}")));
    }
    list_reply(
        req,
        "servers",
        sel.as_ref(),
        w.servers.values(),
        |s| statuses.is_empty() || statuses.contains(&s.status.as_str()),
        |s| render::server(w, s),
    )
}

/// `GET /servers/{id}`.
pub fn get(w: &mut World, req: &Req) -> ApiResult<Response> {
    let s = w.server(req.id(0)?)?;
    reply(200, json!({"server": render::server(w, s)}))
}

/// `POST /servers`: 201 with `server`, `action`, `next_actions`, `root_password`.
pub fn create(w: &mut World, req: &Req) -> ApiResult<Response> {
    let mut input = parse_body(&req.body)?;
    let name = input.req_str("name");
    let server_type = input.req_id_or_name("server_type");
    let image = input.req_id_or_name("image");
    let mut location = input.opt_id_or_name("location");
    if location.is_none()
        && let Some(dc) = input.opt_str("datacenter")
    {
        // Legacy datacenter names (fsn1-dc14) map to their location.
        let loc = dc.split('-').next().unwrap_or("").to_string();
        location = Some(IdOrName::Name(loc));
    }
    let labels = input.opt_labels("labels").unwrap_or_default();
    let start = input.opt_bool("start_after_create").unwrap_or(true);
    let networks = input.opt_i64_list("networks").unwrap_or_default();
    let ssh_keys = input.opt_raw_list_len("ssh_keys");
    let (mut ipv4, mut ipv6) = (true, true);
    if let Some(mut pn) = input.opt_obj("public_net") {
        ipv4 = pn.opt_bool("enable_ipv4").unwrap_or(true);
        ipv6 = pn.opt_bool("enable_ipv6").unwrap_or(true);
        input.absorb(pn);
    }
    let _ = input.opt_str("user_data");
    input.finish()?;
    let (Some(name), Some(server_type), Some(image)) = (name, server_type, image) else {
        return Err(ApiError::field("name", "Missing data for required field."));
    };
    let id = create_server(
        w,
        ServerSpec {
            name,
            server_type,
            location,
            image: Some(image),
            labels,
            status: "initializing".to_string(),
            ipv4,
            ipv6,
            networks: networks.into_iter().map(IdOrName::Id).collect(),
        },
    )?;
    let final_status = if start { "running" } else { "off" };
    let action = w.start_action(
        "create_server",
        vec![Res::Server(id)],
        req.fail(),
        Some(Box::new(move |w: &mut World| {
            if let Some(s) = w.servers.get_mut(&id) {
                s.status = final_status.to_string();
            }
        })),
        Some(Box::new(move |w: &mut World| {
            if let Some(s) = w.servers.get_mut(&id) {
                s.status = "off".to_string();
            }
        })),
    );
    let next: Vec<serde_json::Value> = if start {
        let a = w.start_action("start_server", vec![Res::Server(id)], None, None, None);
        vec![render::action_by_id(w, a)]
    } else {
        Vec::new()
    };
    let root_password = if ssh_keys > 0 {
        serde_json::Value::Null
    } else {
        let pw: String = rand::rng()
            .sample_iter(&Alphanumeric)
            .take(20)
            .map(char::from)
            .collect();
        json!(pw)
    };
    let s = w.server(id)?;
    reply(
        201,
        json!({
            "server": render::server(w, s),
            "action": render::action_by_id(w, action),
            "next_actions": next,
            "root_password": root_password,
        }),
    )
}

/// `PUT /servers/{id}`: name and labels.
pub fn update(w: &mut World, req: &Req) -> ApiResult<Response> {
    let id = req.id(0)?;
    w.server(id)?;
    rename_and_relabel(&mut w.servers, id, &req.body, check_hostname, |_| ())?;
    let s = w.server(id)?;
    reply(200, json!({"server": render::server(w, s)}))
}

/// `DELETE /servers/{id}`: 200 with the delete action.
pub fn delete(w: &mut World, req: &Req) -> ApiResult<Response> {
    let id = req.id(0)?;
    let s = w.server(id)?;
    if s.protect_delete {
        return Err(ApiError::new("protected", "server is delete protected"));
    }
    w.ensure_unlocked(Res::Server(id))?;
    let a = w.start_action(
        "delete_server",
        vec![Res::Server(id)],
        req.fail(),
        Some(Box::new(move |w: &mut World| w.remove_server(id))),
        None,
    );
    reply(200, json!({"action": render::action_by_id(w, a)}))
}

fn set_status(id: i64, status: &'static str) -> crate::world::Effect {
    Box::new(move |w: &mut World| {
        if let Some(s) = w.servers.get_mut(&id) {
            s.status = status.to_string();
        }
    })
}

/// The `network` of an attach or detach body, once the whole body is read: it must be given
/// and exist, and the server (`me`) must not be locked.
fn body_network(w: &World, input: &Input, network: Option<i64>, me: Res) -> ApiResult<i64> {
    input.finish()?;
    let network =
        network.ok_or_else(|| ApiError::field("network", "Missing data for required field."))?;
    w.network(network)?;
    w.ensure_unlocked(me)?;
    Ok(network)
}

/// `POST /servers/{id}/actions/{action}`.
pub fn action(w: &mut World, req: &Req) -> ApiResult<Response> {
    let id = req.id(0)?;
    let server = w.server(id)?.clone();
    let name = req.params.get(1).cloned().unwrap_or_default();
    let mut input = parse_body_or_empty(&req.body)?;
    let me = Res::Server(id);
    let (command, resources, effect, on_error): (
        &str,
        Vec<Res>,
        Option<crate::world::Effect>,
        Option<crate::world::Effect>,
    ) = match name.as_str() {
        "poweron" => (
            "start_server",
            vec![me],
            Some(set_status(id, "running")),
            None,
        ),
        "poweroff" => ("stop_server", vec![me], Some(set_status(id, "off")), None),
        "shutdown" => (
            "shutdown_server",
            vec![me],
            Some(set_status(id, "off")),
            None,
        ),
        "reset" => (
            "reset_server",
            vec![me],
            Some(set_status(id, "running")),
            None,
        ),
        "reboot" => (
            "reboot_server",
            vec![me],
            Some(set_status(id, "running")),
            None,
        ),
        "attach_to_network" => {
            let network = input.req_i64("network");
            let ip = input.opt_str("ip");
            let ip_range = input.opt_str("ip_range");
            let alias = input.opt_str_list("alias_ips").unwrap_or_default();
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
            let mut alias_ips = Vec::new();
            for a in alias {
                match a.parse::<Ipv4Addr>() {
                    Ok(ip) => alias_ips.push(ip),
                    Err(_) => input.error("alias_ips", format!("{a} is not a valid IPv4 address")),
                }
            }
            let network = body_network(w, &input, network, me)?;
            if server.private_net.iter().any(|pn| pn.network == network) {
                return Err(ApiError::new(
                    "server_already_attached",
                    "server is already attached to the network",
                ));
            }
            limits::check_attachment(w, Some(id), 0, network)?;
            let zone = w
                .catalog
                .location_by_id(server.location)
                .map(|l| l.network_zone)
                .unwrap_or("eu-central");
            let ip = pick_private_ip(w, network, zone, ip, ip_range)?;
            let used = w.used_private_ips(network);
            if let Some(bad) = alias_ips.iter().find(|a| used.contains(a) || **a == ip) {
                return Err(ApiError::new(
                    "ip_not_available",
                    format!("alias IP {bad} is not available"),
                ));
            }
            w.reserved_ips.insert((network, ip));
            for a in &alias_ips {
                w.reserved_ips.insert((network, *a));
            }
            let mac = w.new_mac();
            let reserved: Vec<Ipv4Addr> = std::iter::once(ip).chain(alias_ips.clone()).collect();
            let reserved2 = reserved.clone();
            let success: crate::world::Effect = Box::new(move |w: &mut World| {
                for r in &reserved {
                    w.reserved_ips.remove(&(network, *r));
                }
                if w.networks.contains_key(&network)
                    && let Some(s) = w.servers.get_mut(&id)
                {
                    s.private_net.push(ServerNet {
                        network,
                        ip,
                        alias_ips,
                        mac_address: mac,
                    });
                }
            });
            let failure: crate::world::Effect = Box::new(move |w: &mut World| {
                for r in &reserved2 {
                    w.reserved_ips.remove(&(network, *r));
                }
            });
            (
                "attach_to_network",
                vec![me, Res::Network(network)],
                Some(success),
                Some(failure),
            )
        }
        "detach_from_network" => {
            let network = input.req_i64("network");
            let network = body_network(w, &input, network, me)?;
            if !server.private_net.iter().any(|pn| pn.network == network) {
                return Err(ApiError::new(
                    "server_not_attached_to_network",
                    "server is not attached to the network",
                ));
            }
            let effect: crate::world::Effect = Box::new(move |w: &mut World| {
                if let Some(s) = w.servers.get_mut(&id) {
                    s.private_net.retain(|pn| pn.network != network);
                }
            });
            (
                "detach_from_network",
                vec![me, Res::Network(network)],
                Some(effect),
                None,
            )
        }
        "change_protection" => {
            let delete = input.opt_bool("delete");
            let rebuild = input.opt_bool("rebuild");
            input.finish()?;
            let effect: crate::world::Effect = Box::new(move |w: &mut World| {
                if let Some(s) = w.servers.get_mut(&id) {
                    overwrite(&mut s.protect_delete, delete);
                    overwrite(&mut s.protect_rebuild, rebuild);
                }
            });
            ("change_protection", vec![me], Some(effect), None)
        }
        "change_dns_ptr" => {
            let ip = input.req_str("ip");
            let ptr = input.opt_nullable_str("dns_ptr").flatten();
            input.finish()?;
            let ip = ip.unwrap_or_default();
            let is_v4 = server
                .ipv4
                .as_ref()
                .is_some_and(|v4| v4.ip.to_string() == ip);
            let is_v6 = server.ipv6.as_ref().is_some_and(|v6| {
                ip.parse::<std::net::Ipv6Addr>()
                    .is_ok_and(|a| v6.net.contains(&a))
            });
            if !is_v4 && !is_v6 {
                return Err(ApiError::field("ip", "IP does not belong to the server"));
            }
            let effect: crate::world::Effect = Box::new(move |w: &mut World| {
                if is_v4 && let Some(v4) = w.servers.get_mut(&id).and_then(|s| s.ipv4.as_mut()) {
                    v4.dns_ptr = ptr.unwrap_or_default();
                }
            });
            ("change_dns_ptr", vec![me], Some(effect), None)
        }
        _ => return Err(ApiError::not_found("action")),
    };
    w.ensure_unlocked(me)?;
    let a = w.start_action(command, resources, req.fail(), effect, on_error);
    reply(201, json!({"action": render::action_by_id(w, a)}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostnames() {
        assert!(is_hostname("node-1"));
        assert!(is_hostname("node-1.example.com"));
        assert!(!is_hostname("node_1"));
        assert!(!is_hostname("-node"));
        assert!(!is_hostname(""));
    }
}
