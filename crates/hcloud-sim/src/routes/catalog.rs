//! Locations, server types, load balancer types, images, and the retired data centers.

use axum::response::Response;
use serde_json::{Value, json};

use super::page_of;
use crate::app::{Req, reply};
use crate::error::{ApiError, ApiResult};
use crate::input::IdOrName;
use crate::pagination::{page_request, paginate};
use crate::render;
use crate::world::World;

/// A catalog list under `key`: the entries of `items` named as the `name` parameter says (all
/// without one), in catalog order, rendered and paginated.
fn catalog_list<'a, T: 'a>(
    req: &Req,
    key: &str,
    items: impl Iterator<Item = &'a T>,
    name: impl Fn(&T) -> &str,
    render: impl Fn(&T) -> Value,
) -> ApiResult<Response> {
    let wanted = req.query.get("name");
    let items: Vec<Value> = items
        .filter(|t| wanted.is_none_or(|n| n == name(t)))
        .map(render)
        .collect();
    let (items, info) = paginate(items, page_request(&req.query)?);
    Ok(req.list(key, items, info))
}

/// A catalog entry under `key`, as `find` finds it by the ID or name in the path.
fn catalog_entry(
    req: &Req,
    key: &str,
    find: impl FnOnce(&IdOrName) -> Option<Value>,
) -> ApiResult<Response> {
    let by = IdOrName::parse(req.params.first().map_or("", String::as_str));
    let entry = find(&by).ok_or_else(|| ApiError::not_found(key))?;
    reply(200, json!({ key: entry }))
}

/// `GET /locations`.
pub fn list_locations(w: &mut World, req: &Req) -> ApiResult<Response> {
    let locations = w.catalog.locations.iter();
    catalog_list(req, "locations", locations, |l| l.name, render::location)
}

/// `GET /locations/{id}`.
pub fn get_location(w: &mut World, req: &Req) -> ApiResult<Response> {
    catalog_entry(req, "location", |by| {
        w.catalog.location(by).map(render::location)
    })
}

/// `GET /server_types`.
pub fn list_server_types(w: &mut World, req: &Req) -> ApiResult<Response> {
    let types = w.catalog.server_types.iter();
    catalog_list(
        req,
        "server_types",
        types,
        |t| t.name,
        |t| render::server_type(w, t),
    )
}

/// `GET /server_types/{id}`.
pub fn get_server_type(w: &mut World, req: &Req) -> ApiResult<Response> {
    catalog_entry(req, "server_type", |by| {
        w.catalog.server_type(by).map(|t| render::server_type(w, t))
    })
}

/// `GET /load_balancer_types`.
pub fn list_lb_types(w: &mut World, req: &Req) -> ApiResult<Response> {
    let types = w.catalog.lb_types.iter();
    catalog_list(
        req,
        "load_balancer_types",
        types,
        |t| t.name,
        |t| render::lb_type(w, t),
    )
}

/// `GET /load_balancer_types/{id}`.
pub fn get_lb_type(w: &mut World, req: &Req) -> ApiResult<Response> {
    catalog_entry(req, "load_balancer_type", |by| {
        w.catalog.lb_type(by).map(|t| render::lb_type(w, t))
    })
}

/// `GET /images` (`type`, `name`, `architecture`, `status`, `label_selector`, `sort`, pages).
pub fn list_images(w: &mut World, req: &Req) -> ApiResult<Response> {
    let types = req.query.all("type");
    for t in &types {
        if !["system", "app", "snapshot", "backup"].contains(t) {
            return Err(ApiError::field("type", format!("invalid image type {t:?}")));
        }
    }
    let sel = super::selector_param(req)?;
    let name = req.query.get("name");
    let arch = req.query.get("architecture");
    let statuses = req.query.all("status");
    let items: Vec<_> = w
        .catalog
        .images
        .iter()
        .filter(|_| types.is_empty() || types.contains(&"system"))
        .filter(|i| name.is_none_or(|n| n == i.name))
        .filter(|i| arch.is_none_or(|a| a == i.architecture))
        .filter(|_| statuses.is_empty() || statuses.contains(&"available"))
        .filter(|_| sel.as_ref().is_none_or(|s| s.matches(&Default::default())))
        .collect();
    let (items, info) = page_of(req, items, render::image)?;
    Ok(req.list("images", items, info))
}

/// `GET /images/{id}`.
pub fn get_image(w: &mut World, req: &Req) -> ApiResult<Response> {
    let id = req.id(0)?;
    let i = w
        .catalog
        .image_by_id(id)
        .ok_or_else(|| ApiError::not_found("image"))?;
    reply(200, json!({"image": render::image(i)}))
}

/// `/datacenters` is gone.
pub fn datacenters_gone(_w: &mut World, _req: &Req) -> ApiResult<Response> {
    Err(ApiError::new(
        "deprecated_api_endpoint",
        "the datacenters endpoint has been removed; use locations instead",
    ))
}
