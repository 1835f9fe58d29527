//! `GET /actions…` and the per-resource action views.

use axum::response::Response;
use serde_json::json;

use super::page_of;
use crate::app::{Req, reply};
use crate::error::{ApiError, ApiResult};
use crate::model::Action;
use crate::render;
use crate::world::World;

fn kind_of(req: &Req) -> &'static str {
    let first = req
        .ctx
        .path
        .trim_start_matches('/')
        .split('/')
        .next()
        .unwrap_or("");
    match first {
        "servers" => "server",
        "networks" => "network",
        "load_balancers" => "load_balancer",
        "certificates" => "certificate",
        _ => "",
    }
}

fn ids_filter(req: &Req) -> ApiResult<Vec<i64>> {
    req.query
        .all("id")
        .into_iter()
        .map(|v| {
            v.parse::<i64>()
                .map_err(|_| ApiError::field("id", format!("invalid ID {v:?}")))
        })
        .collect()
}

fn list_where(w: &World, req: &Req, keep: impl Fn(&Action) -> bool) -> ApiResult<Response> {
    let ids = ids_filter(req)?;
    let statuses = req.query.all("status");
    let items: Vec<&Action> = w
        .actions
        .values()
        .filter(|a| ids.is_empty() || ids.contains(&a.id))
        .filter(|a| statuses.is_empty() || statuses.contains(&a.status.as_str()))
        .filter(|a| keep(a))
        .collect();
    let (items, info) = page_of(req, items, render::action)?;
    Ok(req.list("actions", items, info))
}

/// `GET /actions?id=…` (at least one `id` is required).
pub fn list(w: &mut World, req: &Req) -> ApiResult<Response> {
    if req.query.all("id").is_empty() {
        return Err(ApiError::field("id", "Missing data for required field."));
    }
    list_where(w, req, |_| true)
}

/// `GET /actions/{id}`.
pub fn get(w: &mut World, req: &Req) -> ApiResult<Response> {
    let id = req.id(0)?;
    let a = w
        .actions
        .get(&id)
        .ok_or_else(|| ApiError::not_found("action"))?;
    reply(200, json!({"action": render::action(a)}))
}

fn involves_kind(a: &Action, kind: &str) -> bool {
    a.resources.iter().any(|r| r.parts().1 == kind)
}

fn involves(a: &Action, kind: &str, id: i64) -> bool {
    a.resources.iter().any(|r| r.parts() == (id, kind))
}

fn resource_exists(w: &World, kind: &str, id: i64) -> bool {
    match kind {
        "server" => w.servers.contains_key(&id),
        "network" => w.networks.contains_key(&id),
        "load_balancer" => w.load_balancers.contains_key(&id),
        "certificate" => w.certificates.contains_key(&id),
        _ => false,
    }
}

/// `GET /{kind}/actions`.
pub fn list_for_kind(w: &mut World, req: &Req) -> ApiResult<Response> {
    let kind = kind_of(req);
    list_where(w, req, |a| involves_kind(a, kind))
}

/// `GET /{kind}/actions/{id}`.
pub fn get_for_kind(w: &mut World, req: &Req) -> ApiResult<Response> {
    let kind = kind_of(req);
    let id = req.id(0)?;
    let a = w
        .actions
        .get(&id)
        .filter(|a| involves_kind(a, kind))
        .ok_or_else(|| ApiError::not_found("action"))?;
    reply(200, json!({"action": render::action(a)}))
}

/// `GET /{kind}/{id}/actions`.
pub fn list_for_resource(w: &mut World, req: &Req) -> ApiResult<Response> {
    let kind = kind_of(req);
    let id = req.id(0)?;
    if !resource_exists(w, kind, id) {
        return Err(ApiError::not_found(kind));
    }
    list_where(w, req, |a| involves(a, kind, id))
}

/// `GET /{kind}/{id}/actions/{action_id}`.
pub fn get_for_resource(w: &mut World, req: &Req) -> ApiResult<Response> {
    let kind = kind_of(req);
    let id = req.id(0)?;
    let action_id = req.id(1)?;
    let a = w
        .actions
        .get(&action_id)
        .filter(|a| involves(a, kind, id))
        .ok_or_else(|| ApiError::not_found("action"))?;
    reply(200, json!({"action": render::action(a)}))
}
