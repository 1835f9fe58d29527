//! Primary IPs: the public addresses of servers and load balancers, and unassigned ones
//! created by users (or seeds) to be given to a new load balancer.

use axum::response::Response;
use chrono::Utc;
use serde_json::{Value, json};

use super::{check_name, list_reply, not_unique, selector_param};
use crate::app::{Req, no_content, reply};
use crate::error::{ApiError, ApiResult};
use crate::input::{IdOrName, parse_body};
use crate::ipalloc::{server_ipv4, server_ipv6_net};
use crate::model::{Assignee, Labels, PrimaryAddr, PrimaryIp};
use crate::render;
use crate::world::World;

/// What a Primary IP is created from (API body, seed, or a resource that gets one).
#[derive(Debug, Clone)]
pub struct PrimaryIpSpec {
    /// Name; `None`: `primary_ip-<id>`.
    pub name: Option<String>,
    /// The address.
    pub ip: PrimaryAddr,
    /// Location ID.
    pub location: i64,
    /// Assigned to.
    pub assignee: Option<Assignee>,
    /// Deleted with its assignee.
    pub auto_delete: bool,
    /// Labels.
    pub labels: Labels,
}

/// Records a Primary IP; returns its ID. `id` is used when the caller already reserved one.
pub fn insert_primary_ip(w: &mut World, id: Option<i64>, spec: PrimaryIpSpec) -> i64 {
    let id = id.unwrap_or_else(|| w.primary_ip_ids.take());
    w.primary_ips.insert(
        id,
        PrimaryIp {
            id,
            name: spec.name.unwrap_or_else(|| format!("primary_ip-{id}")),
            labels: spec.labels,
            created: Utc::now(),
            ip: spec.ip,
            location: spec.location,
            assignee: spec.assignee,
            auto_delete: spec.auto_delete,
            protect_delete: false,
            dns_ptr: None,
        },
    );
    id
}

/// A fresh address of the given type (`ipv4` or `ipv6`) from the pool of unassigned ones.
pub fn fresh_address(w: &mut World, kind: &str) -> ApiResult<PrimaryAddr> {
    match kind {
        "ipv4" => {
            let ip = server_ipv4(w.server_ipv4_seq)
                .ok_or_else(|| ApiError::new("resource_unavailable", "no public IPv4 left"))?;
            w.server_ipv4_seq += 1;
            Ok(PrimaryAddr::V4(ip))
        }
        _ => {
            let net = server_ipv6_net(w.server_ipv6_seq);
            w.server_ipv6_seq += 1;
            Ok(PrimaryAddr::V6(net))
        }
    }
}

/// Creates an unassigned Primary IP (API and seeds); returns its ID.
pub fn create_unassigned(
    w: &mut World,
    name: String,
    kind: &str,
    location: &IdOrName,
    auto_delete: bool,
    labels: Labels,
) -> ApiResult<i64> {
    if name.trim().is_empty() || name.len() > 128 {
        return Err(ApiError::field(
            "name",
            "Must be between 1 and 128 characters.",
        ));
    }
    if !["ipv4", "ipv6"].contains(&kind) {
        return Err(ApiError::field("type", "Must be one of: ipv4, ipv6."));
    }
    if w.primary_ips.values().any(|p| p.name == name) {
        return Err(not_unique("name"));
    }
    let location = w
        .catalog
        .location(location)
        .ok_or_else(|| ApiError::field("location", "location not found"))?
        .id;
    let ip = fresh_address(w, kind)?;
    Ok(insert_primary_ip(
        w,
        None,
        PrimaryIpSpec {
            name: Some(name),
            ip,
            location,
            assignee: None,
            auto_delete,
            labels,
        },
    ))
}

/// `GET /primary_ips` (`name`, `label_selector`, `ip`, `sort`, pages).
pub fn list(w: &mut World, req: &Req) -> ApiResult<Response> {
    let sel = selector_param(req)?;
    let ip = req.query.get("ip");
    list_reply(
        req,
        "primary_ips",
        sel.as_ref(),
        w.primary_ips.values(),
        |p| ip.is_none_or(|ip| render::primary_address(p.ip) == ip),
        |p| render::primary_ip(w, p),
    )
}

/// `GET /primary_ips/{id}`.
pub fn get(w: &mut World, req: &Req) -> ApiResult<Response> {
    let p = w.primary_ip(req.id(0)?)?;
    reply(200, json!({"primary_ip": render::primary_ip(w, p)}))
}

/// `POST /primary_ips`: an unassigned Primary IP in a location (201, `action: null`).
/// Assigning on create (`assignee_id`) is not simulated.
pub fn create(w: &mut World, req: &Req) -> ApiResult<Response> {
    let mut input = parse_body(&req.body)?;
    let name = input.req_str("name");
    check_name(&mut input, &name);
    let kind = input.req_str("type");
    if let Some(k) = &kind
        && !["ipv4", "ipv6"].contains(&k.as_str())
    {
        input.error("type", "Must be one of: ipv4, ipv6.");
    }
    let assignee_type = input.opt_str("assignee_type");
    if let Some(t) = &assignee_type
        && !["server", "unassigned"].contains(&t.as_str())
    {
        input.error("assignee_type", "Must be one of: server, unassigned.");
    }
    let assignee_id = input.opt_i64("assignee_id");
    let location = input.opt_id_or_name("location");
    let _ = input.opt_str("datacenter");
    let auto_delete = input.opt_bool("auto_delete").unwrap_or(false);
    let labels = input.opt_labels("labels").unwrap_or_default();
    if location.is_none() && assignee_id.is_none() {
        input.error("location", "Missing data for required field.");
    }
    input.finish()?;
    if assignee_id.is_some() {
        return Err(ApiError::new(
            "unsupported_error",
            "the simulator creates unassigned Primary IPs only",
        ));
    }
    let (Some(name), Some(kind), Some(location)) = (name, kind, location) else {
        return Err(ApiError::field("name", "Missing data for required field."));
    };
    let id = create_unassigned(w, name, &kind, &location, auto_delete, labels)?;
    let p = w.primary_ip(id)?;
    reply(
        201,
        json!({"primary_ip": render::primary_ip(w, p), "action": Value::Null}),
    )
}

/// `DELETE /primary_ips/{id}` (204): only unassigned and unprotected ones.
pub fn delete(w: &mut World, req: &Req) -> ApiResult<Response> {
    let id = req.id(0)?;
    let p = w.primary_ip(id)?;
    if p.protect_delete {
        return Err(ApiError::new("protected", "primary IP is delete protected"));
    }
    if p.assignee.is_some() {
        return Err(ApiError::new(
            "primary_ip_assigned",
            "the primary IP is assigned; unassign it first",
        ));
    }
    w.primary_ips.remove(&id);
    no_content()
}
