//! `GET /actions…` and the per-resource action views.

use std::cmp::Ordering;

use axum::response::Response;
use serde_json::json;

use crate::app::{Req, reply};
use crate::error::{ApiError, ApiResult};
use crate::model::Action;
use crate::pagination::{Query, page_request, paginate};
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

/// A field action lists sort by: the API's `sort` enum for actions (`id`, `command`, `status`,
/// `started`, `finished`, each with `:asc` or `:desc`), which differs from the resources'
/// `id`/`name`/`created`. The official Go client's action waiter sends `sort=status&sort=id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ActionSortField {
    Id,
    Command,
    Status,
    Started,
    Finished,
}

/// Reads the repeatable `sort` parameter of an action list.
fn action_sort_keys(q: &Query) -> ApiResult<Vec<(ActionSortField, bool)>> {
    crate::pagination::parse_sort(q, |field| match field {
        "id" => Some(ActionSortField::Id),
        "command" => Some(ActionSortField::Command),
        "status" => Some(ActionSortField::Status),
        "started" => Some(ActionSortField::Started),
        "finished" => Some(ActionSortField::Finished),
        _ => None,
    })
}

/// Sorts by the keys, then by ID.
fn sort_actions(items: &mut [&Action], keys: &[(ActionSortField, bool)]) {
    items.sort_by(|a, b| {
        for &(field, desc) in keys {
            let ord = match field {
                ActionSortField::Id => a.id.cmp(&b.id),
                ActionSortField::Command => a.command.cmp(&b.command),
                ActionSortField::Status => a.status.cmp(&b.status),
                ActionSortField::Started => a.started.cmp(&b.started),
                ActionSortField::Finished => a.finished.cmp(&b.finished),
            };
            let ord = if desc { ord.reverse() } else { ord };
            if ord != Ordering::Equal {
                return ord;
            }
        }
        a.id.cmp(&b.id)
    });
}

fn list_where(w: &World, req: &Req, keep: impl Fn(&Action) -> bool) -> ApiResult<Response> {
    let ids = ids_filter(req)?;
    let statuses = req.query.all("status");
    let keys = action_sort_keys(&req.query)?;
    let page = page_request(&req.query)?;
    let mut items: Vec<&Action> = w
        .actions
        .values()
        .filter(|a| ids.is_empty() || ids.contains(&a.id))
        .filter(|a| statuses.is_empty() || statuses.contains(&a.status.as_str()))
        .filter(|a| keep(a))
        .collect();
    sort_actions(&mut items, &keys);
    let (items, info) = paginate(items, page);
    let items = items.into_iter().map(render::action).collect();
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
