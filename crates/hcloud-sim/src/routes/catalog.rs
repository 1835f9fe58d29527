//! Locations, server types, load balancer types, images, and the retired data centers.

use axum::response::Response;
use serde_json::json;

use super::page_of;
use crate::app::{Req, reply};
use crate::error::{ApiError, ApiResult};
use crate::input::IdOrName;
use crate::pagination::{page_request, paginate};
use crate::render;
use crate::world::World;

fn by_id_or_name(req: &Req) -> IdOrName {
    IdOrName::parse(req.params.first().map_or("", String::as_str))
}

/// `GET /locations`.
pub fn list_locations(w: &mut World, req: &Req) -> ApiResult<Response> {
    let name = req.query.get("name");
    let items: Vec<_> = w
        .catalog
        .locations
        .iter()
        .filter(|l| name.is_none_or(|n| n == l.name))
        .map(render::location)
        .collect();
    let (items, info) = paginate(items, page_request(&req.query)?);
    Ok(req.list("locations", items, info))
}

/// `GET /locations/{id}`.
pub fn get_location(w: &mut World, req: &Req) -> ApiResult<Response> {
    let l = w
        .catalog
        .location(&by_id_or_name(req))
        .ok_or_else(|| ApiError::not_found("location"))?;
    reply(200, json!({"location": render::location(l)}))
}

/// `GET /server_types`.
pub fn list_server_types(w: &mut World, req: &Req) -> ApiResult<Response> {
    let name = req.query.get("name");
    let items: Vec<_> = w
        .catalog
        .server_types
        .iter()
        .filter(|t| name.is_none_or(|n| n == t.name))
        .map(|t| render::server_type(w, t))
        .collect();
    let (items, info) = paginate(items, page_request(&req.query)?);
    Ok(req.list("server_types", items, info))
}

/// `GET /server_types/{id}`.
pub fn get_server_type(w: &mut World, req: &Req) -> ApiResult<Response> {
    let t = w
        .catalog
        .server_type(&by_id_or_name(req))
        .ok_or_else(|| ApiError::not_found("server_type"))?;
    reply(200, json!({"server_type": render::server_type(w, t)}))
}

/// `GET /load_balancer_types`.
pub fn list_lb_types(w: &mut World, req: &Req) -> ApiResult<Response> {
    let name = req.query.get("name");
    let items: Vec<_> = w
        .catalog
        .lb_types
        .iter()
        .filter(|t| name.is_none_or(|n| n == t.name))
        .map(|t| render::lb_type(w, t))
        .collect();
    let (items, info) = paginate(items, page_request(&req.query)?);
    Ok(req.list("load_balancer_types", items, info))
}

/// `GET /load_balancer_types/{id}`.
pub fn get_lb_type(w: &mut World, req: &Req) -> ApiResult<Response> {
    let t = w
        .catalog
        .lb_type(&by_id_or_name(req))
        .ok_or_else(|| ApiError::not_found("load_balancer_type"))?;
    reply(200, json!({"load_balancer_type": render::lb_type(w, t)}))
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
