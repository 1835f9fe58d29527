//! Public API routes (`/v1`), one module per resource.

pub mod actions;
pub mod catalog;
pub mod certificates;
pub mod lb_parts;
pub mod load_balancers;
pub mod networks;
pub mod primary_ips;
pub mod servers;

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Router;
use axum::response::Response;
use axum::routing::{get, post};
use serde_json::Value;

use crate::app::{App, Req, h};
use crate::error::{ApiError, ApiResult};
use crate::input::{Input, overwrite, parse_body};
use crate::label_selector::Selector;
use crate::model::{Labelled, Labels};
use crate::pagination::{PageInfo, Sortable, page_request, paginate, sort_items, sort_keys};

/// All `/v1` routes.
pub fn api_routes() -> Router<Arc<App>> {
    let mut router = Router::new();
    for kind in ["servers", "networks", "load_balancers", "certificates"] {
        router = router
            .route(&format!("/{kind}/actions"), get(h(actions::list_for_kind)))
            .route(
                &format!("/{kind}/actions/{{id}}"),
                get(h(actions::get_for_kind)),
            )
            .route(
                &format!("/{kind}/{{id}}/actions"),
                get(h(actions::list_for_resource)),
            );
    }
    router
        // Catalog.
        .route("/locations", get(h(catalog::list_locations)))
        .route("/locations/{id}", get(h(catalog::get_location)))
        .route("/server_types", get(h(catalog::list_server_types)))
        .route("/server_types/{id}", get(h(catalog::get_server_type)))
        .route("/load_balancer_types", get(h(catalog::list_lb_types)))
        .route("/load_balancer_types/{id}", get(h(catalog::get_lb_type)))
        .route("/images", get(h(catalog::list_images)))
        .route("/images/{id}", get(h(catalog::get_image)))
        .route("/datacenters", get(h(catalog::datacenters_gone)))
        .route("/datacenters/{id}", get(h(catalog::datacenters_gone)))
        // Actions.
        .route("/actions", get(h(actions::list)))
        .route("/actions/{id}", get(h(actions::get)))
        // Servers.
        .route("/servers", get(h(servers::list)).post(h(servers::create)))
        .route(
            "/servers/{id}",
            get(h(servers::get))
                .put(h(servers::update))
                .delete(h(servers::delete)),
        )
        .route(
            "/servers/{id}/actions/{action}",
            post(h(servers::action)).get(h(actions::get_for_resource)),
        )
        // Networks.
        .route(
            "/networks",
            get(h(networks::list)).post(h(networks::create)),
        )
        .route(
            "/networks/{id}",
            get(h(networks::get))
                .put(h(networks::update))
                .delete(h(networks::delete)),
        )
        .route(
            "/networks/{id}/actions/{action}",
            post(h(networks::action)).get(h(actions::get_for_resource)),
        )
        // Load balancers.
        .route(
            "/load_balancers",
            get(h(load_balancers::list)).post(h(load_balancers::create)),
        )
        .route(
            "/load_balancers/{id}",
            get(h(load_balancers::get))
                .put(h(load_balancers::update))
                .delete(h(load_balancers::delete)),
        )
        .route(
            "/load_balancers/{id}/actions/{action}",
            post(h(load_balancers::action)).get(h(actions::get_for_resource)),
        )
        // Primary IPs.
        .route(
            "/primary_ips",
            get(h(primary_ips::list)).post(h(primary_ips::create)),
        )
        .route(
            "/primary_ips/{id}",
            get(h(primary_ips::get)).delete(h(primary_ips::delete)),
        )
        // Certificates.
        .route(
            "/certificates",
            get(h(certificates::list)).post(h(certificates::create)),
        )
        .route(
            "/certificates/{id}",
            get(h(certificates::get))
                .put(h(certificates::update))
                .delete(h(certificates::delete)),
        )
        .route(
            "/certificates/{id}/actions/{action}",
            post(h(certificates::action)).get(h(actions::get_for_resource)),
        )
}

/// `label_selector` query parameter.
pub fn selector_param(req: &Req) -> ApiResult<Option<Selector>> {
    req.query
        .get("label_selector")
        .map(|s| Selector::parse(s).map_err(|e| ApiError::field("label_selector", e)))
        .transpose()
}

/// Sorts and paginates, then renders.
pub fn page_of<T: Sortable>(
    req: &Req,
    mut items: Vec<&T>,
    render: impl Fn(&T) -> Value,
) -> ApiResult<(Vec<Value>, PageInfo)> {
    let keys = sort_keys(&req.query)?;
    let page = page_request(&req.query)?;
    sort_items(&mut items, &keys);
    let (items, info) = paginate(items, page);
    Ok((items.into_iter().map(render).collect(), info))
}

/// Whether a resource passes `name` and `label_selector` filters.
pub fn passes(name: &str, labels: &Labels, req: &Req, sel: Option<&Selector>) -> bool {
    req.query.get("name").is_none_or(|n| n == name) && sel.is_none_or(|s| s.matches(labels))
}

/// The answer of a `GET` list under `key`: the resources of `items` that pass the `name` and
/// `label_selector` (`sel`) filters and `keep`, sorted, paginated and rendered.
pub fn list_reply<'a, T: Labelled + 'a>(
    req: &Req,
    key: &str,
    sel: Option<&Selector>,
    items: impl Iterator<Item = &'a T>,
    keep: impl Fn(&T) -> bool,
    render: impl Fn(&T) -> Value,
) -> ApiResult<Response> {
    let items: Vec<&T> = items
        .filter(|x| passes(x.sort_name(), x.labels(), req, sel) && keep(x))
        .collect();
    let (items, info) = page_of(req, items, render)?;
    Ok(req.list(key, items, info))
}

/// The change of a `PUT` to resource `id` of `items`: reads `name` (checked by `name_rule`),
/// `labels` and what `extra` takes from the request `body`; once the whole body is valid and
/// no other resource of `items` has that name, resource `id` gets the name and labels given.
/// Returns what `extra` read, for the caller to apply.
pub fn rename_and_relabel<T: Labelled, X>(
    items: &mut BTreeMap<i64, T>,
    id: i64,
    body: &[u8],
    name_rule: fn(&mut Input, &Option<String>),
    extra: impl FnOnce(&mut Input) -> X,
) -> ApiResult<X> {
    let mut input = parse_body(body)?;
    let name = input.opt_str("name");
    name_rule(&mut input, &name);
    let labels = input.opt_labels("labels");
    let extra = extra(&mut input);
    input.finish()?;
    if let Some(n) = &name
        && items
            .values()
            .any(|o| o.sort_name() == n && o.sort_id() != id)
    {
        return Err(not_unique("name"));
    }
    if let Some((old_name, old_labels)) = items.get_mut(&id).map(T::name_and_labels_mut) {
        overwrite(old_name, name);
        overwrite(old_labels, labels);
    }
    Ok(extra)
}

/// 409 `uniqueness_error`.
pub fn not_unique(field: &str) -> ApiError {
    let mut e = ApiError::new("uniqueness_error", format!("{field} is already used"));
    e.details = serde_json::json!({"fields": [{"name": field}]});
    e
}

/// Validates a resource name (non-empty, at most 128 characters).
pub fn check_name(input: &mut Input, name: &Option<String>) {
    if let Some(n) = name
        && (n.trim().is_empty() || n.len() > 128)
    {
        input.error("name", "Must be between 1 and 128 characters.");
    }
}
