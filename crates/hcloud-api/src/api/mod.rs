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

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::Client;
use crate::error::Error;
use crate::models::Action;
use crate::pagination::{Page, get_all, get_all_map, get_page};
use crate::transport::Query;

/// Decodes the member `key` of a JSON object answer (e.g. `server` of `{"server": {...}}`).
pub(crate) fn decode_member<T: DeserializeOwned>(
    method: &str,
    path: &str,
    status: u16,
    body: &[u8],
    key: &str,
) -> Result<T, Error> {
    let err = |source| Error::decode(method, path, status, source);
    let mut map: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(body).map_err(err)?;
    let value = map.remove(key).unwrap_or(serde_json::Value::Null);
    serde_json::from_value(value).map_err(err)
}

/// A collection of the API (e.g. `/servers`): its path, and the members its answers hold
/// one entry (`server`) and a list (`servers`) under. The typed accessors ([`ServersApi`],
/// …) send their requests through it.
pub(crate) struct Collection {
    /// Path of the collection, e.g. `/servers`.
    pub(crate) path: &'static str,
    /// Member of a one-entry answer, e.g. `server`.
    pub(crate) one: &'static str,
    /// Member of a list answer, e.g. `servers`.
    pub(crate) many: &'static str,
}

impl Collection {
    /// Path of the entry `id`, e.g. `/servers/42`.
    pub(crate) fn item_path(&self, id: i64) -> String {
        format!("{}/{id}", self.path)
    }

    /// `GET {path}/{id}`.
    pub(crate) async fn get<T: DeserializeOwned>(
        &self,
        client: &Client,
        id: i64,
    ) -> Result<T, Error> {
        let path = self.item_path(id);
        let (status, body) = client
            .transport()
            .send(reqwest::Method::GET, &path, &Vec::new(), None)
            .await?;
        decode_member("GET", &path, status, &body, self.one)
    }

    /// One page of `GET {path}`.
    pub(crate) async fn page<T: DeserializeOwned>(
        &self,
        client: &Client,
        query: &Query,
    ) -> Result<Page<T>, Error> {
        get_page(client.transport(), self.path, self.many, query).await
    }

    /// Every page of `GET {path}` (see [`get_all`]).
    pub(crate) async fn all<T: DeserializeOwned>(
        &self,
        client: &Client,
        query: &Query,
    ) -> Result<Vec<T>, Error> {
        get_all(client.transport(), self.path, self.many, query).await
    }

    /// Every page of `GET {path}`, each entry passed through `map` (see [`get_all_map`]).
    pub(crate) async fn all_map<T: DeserializeOwned, U>(
        &self,
        client: &Client,
        query: &Query,
        map: impl FnMut(T) -> U + Send,
    ) -> Result<Vec<U>, Error> {
        get_all_map(client.transport(), self.path, self.many, query, map).await
    }

    /// `PUT {path}/{id}`; the updated entry.
    pub(crate) async fn update<B: Serialize, T: DeserializeOwned>(
        &self,
        client: &Client,
        id: i64,
        request: &B,
    ) -> Result<T, Error> {
        let path = self.item_path(id);
        let (status, body) = client.transport().put_raw(&path, request).await?;
        decode_member("PUT", &path, status, &body, self.one)
    }

    /// `POST {path}/{id}/actions/{name}` with `body`; the action it started.
    pub(crate) async fn action<B: Serialize>(
        &self,
        client: &Client,
        id: i64,
        name: &str,
        body: &B,
    ) -> Result<Action, Error> {
        let path = format!("{}/actions/{name}", self.item_path(id));
        let answer: ActionAnswer = client.transport().post(&path, body).await?;
        Ok(answer.action)
    }

    /// `POST {path}/{id}/actions/{name}` without a body; the action it started.
    pub(crate) async fn empty_action(
        &self,
        client: &Client,
        id: i64,
        name: &str,
    ) -> Result<Action, Error> {
        let path = format!("{}/actions/{name}", self.item_path(id));
        let answer: ActionAnswer = client.transport().post_empty(&path).await?;
        Ok(answer.action)
    }
}

/// The answer of an action endpoint: `{"action": {...}}`.
#[derive(serde::Deserialize)]
struct ActionAnswer {
    action: Action,
}

/// The action of an answer that may or may not carry one: `None` for an empty body (204 No
/// Content) or `{"action": null}`, the action for `{"action": {...}}`.
pub(crate) fn optional_action(
    method: &str,
    path: &str,
    status: u16,
    body: &[u8],
) -> Result<Option<Action>, Error> {
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
