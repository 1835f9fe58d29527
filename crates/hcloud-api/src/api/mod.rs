//! One accessor per resource, borrowed from a [`crate::Client`].

pub(crate) mod action_batch;
pub mod actions;
pub mod certificates;
pub mod load_balancer_types;
pub mod load_balancers;
pub mod locations;
pub mod networks;
pub mod params;
pub mod servers;

pub use actions::{ActionRef, ActionsApi};
pub use certificates::CertificatesApi;
pub use load_balancer_types::LoadBalancerTypesApi;
pub use load_balancers::LoadBalancersApi;
pub use locations::LocationsApi;
pub use networks::NetworksApi;
pub use params::{ListCertificatesParams, ListParams, ListServersParams};
pub use servers::ServersApi;

use serde::de::DeserializeOwned;

use crate::error::{DecodeError, Error};
use crate::transport::Transport;

/// Decodes the member `key` of a JSON object answer (e.g. `server` of `{"server": {...}}`).
pub(crate) fn decode_member<T: DeserializeOwned>(
    method: &str,
    path: &str,
    status: u16,
    body: &[u8],
    key: &str,
) -> Result<T, Error> {
    let err = |source: serde_json::Error| {
        Error::Decode(DecodeError {
            method: method.to_owned(),
            path: path.to_owned(),
            status,
            source,
        })
    };
    let mut map: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(body).map_err(err)?;
    let value = map.remove(key).unwrap_or(serde_json::Value::Null);
    serde_json::from_value(value).map_err(err)
}

/// GET `path` and decode the member `key`.
pub(crate) async fn get_one<T: DeserializeOwned>(
    transport: &Transport,
    path: &str,
    key: &str,
) -> Result<T, Error> {
    let (status, body) = transport
        .send(reqwest::Method::GET, path, &Vec::new(), None)
        .await?;
    decode_member("GET", path, status, &body, key)
}

/// The answer of an action endpoint: `{"action": {...}}`.
#[derive(serde::Deserialize)]
pub(crate) struct ActionAnswer {
    pub(crate) action: crate::models::Action,
}

/// The action of an answer that may or may not carry one: `None` for an empty body (204 No
/// Content) or `{"action": null}`, the action for `{"action": {...}}`.
pub(crate) fn optional_action(
    method: &str,
    path: &str,
    status: u16,
    body: &[u8],
) -> Result<Option<crate::models::Action>, Error> {
    if status == 204 || body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    decode_member(method, path, status, body, "action")
}

/// The entry named exactly `name`. A name-filtered list holds at most that one; an answer
/// holding anything else is never taken for it.
pub(crate) fn named<T>(items: Vec<T>, name: &str, name_of: impl Fn(&T) -> &str) -> Option<T> {
    items.into_iter().find(|item| name_of(item) == name)
}
