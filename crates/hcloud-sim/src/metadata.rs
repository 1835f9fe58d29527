//! The Hetzner metadata service (`/hetzner/v1/metadata/…`), answering for the server chosen
//! through the admin API (`PUT /_admin/metadata_server`). Like the real service it needs no
//! token; it is neither counted nor rate limited. With no server chosen (or a deleted one),
//! every path answers 404.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::app::App;
use crate::ipalloc::network_gateway;
use crate::model::Server;
use crate::world::World;

/// Path prefix of the metadata service.
pub const METADATA_PREFIX: &str = "/hetzner/v1/metadata";

/// Metadata routes (mounted under [`METADATA_PREFIX`]).
pub fn metadata_routes() -> Router<Arc<App>> {
    Router::new()
        .route("/private-networks", get(private_networks))
        .route("/instance-id", get(instance_id))
        .route("/hostname", get(hostname))
        .route("/region", get(region))
        .route("/availability-zone", get(availability_zone))
        .route("/public-ipv4", get(public_ipv4))
}

fn text(body: String) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        body,
    )
        .into_response()
}

fn not_found(what: &str) -> Response {
    (
        StatusCode::NOT_FOUND,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!("{what}\n"),
    )
        .into_response()
}

/// Answers with `f(world, current server)`, or 404 without a current server.
fn for_server(app: &App, f: impl FnOnce(&World, &Server) -> Option<String>) -> Response {
    let w = app.world();
    let Some(server) = w.metadata_server.and_then(|id| w.servers.get(&id)) else {
        return not_found("no server is set for the metadata service");
    };
    match f(&w, server) {
        Some(body) => text(body),
        None => not_found("not available for this server"),
    }
}

/// The YAML list of the server's private networks, keys as the real service writes them.
pub fn private_networks_yaml(w: &World, s: &Server) -> String {
    if s.private_net.is_empty() {
        return "[]\n".to_string();
    }
    let mut out = String::new();
    for (i, pn) in s.private_net.iter().enumerate() {
        let Some(net) = w.networks.get(&pn.network) else {
            continue;
        };
        let subnet = net
            .subnets
            .iter()
            .find(|sub| sub.ip_range.contains(&pn.ip))
            .map(|sub| sub.ip_range.to_string())
            .unwrap_or_default();
        let alias_ips = if pn.alias_ips.is_empty() {
            " []".to_string()
        } else {
            pn.alias_ips
                .iter()
                .map(|ip| format!("\n  - {ip}"))
                .collect::<String>()
        };
        out.push_str(&format!("- ip: {}\n", pn.ip));
        out.push_str(&format!("  alias_ips:{alias_ips}\n"));
        out.push_str(&format!("  interface_num: {}\n", i + 1));
        out.push_str(&format!("  mac_address: {}\n", pn.mac_address));
        out.push_str(&format!("  network_id: {}\n", net.id));
        out.push_str(&format!("  network_name: {}\n", net.name));
        out.push_str(&format!("  network: {}\n", net.ip_range));
        out.push_str(&format!("  subnet: {subnet}\n"));
        out.push_str(&format!("  gateway: {}\n", network_gateway(net.ip_range)));
    }
    out
}

async fn private_networks(State(app): State<Arc<App>>) -> Response {
    for_server(&app, |w, s| Some(private_networks_yaml(w, s)))
}

async fn instance_id(State(app): State<Arc<App>>) -> Response {
    for_server(&app, |_, s| Some(s.id.to_string()))
}

async fn hostname(State(app): State<Arc<App>>) -> Response {
    for_server(&app, |_, s| Some(s.name.clone()))
}

async fn region(State(app): State<Arc<App>>) -> Response {
    for_server(&app, |w, s| {
        w.catalog
            .location_by_id(s.location)
            .map(|l| l.network_zone.to_string())
    })
}

/// The real service still names a data centre (`fsn1-dc14`); the simulator names the
/// location's first one, `<location>-dc1`.
async fn availability_zone(State(app): State<Arc<App>>) -> Response {
    for_server(&app, |w, s| {
        w.catalog
            .location_by_id(s.location)
            .map(|l| format!("{}-dc1", l.name))
    })
}

async fn public_ipv4(State(app): State<Arc<App>>) -> Response {
    for_server(&app, |_, s| s.ipv4.as_ref().map(|v4| v4.ip.to_string()))
}
