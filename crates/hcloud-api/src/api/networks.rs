//! `/networks` and its route actions.

use crate::Client;
use crate::api::params::ListParams;
use crate::api::{Collection, named};
use crate::error::Error;
use crate::models::{Action, Network, Route};
use crate::pagination::Page;

const NETWORKS: Collection = Collection {
    path: "/networks",
    one: "network",
    many: "networks",
};

/// Private networks.
#[derive(Debug, Clone, Copy)]
pub struct NetworksApi<'a> {
    pub(crate) client: &'a Client,
}

impl NetworksApi<'_> {
    /// `GET /networks/{id}`.
    pub async fn get(&self, id: i64) -> Result<Network, Error> {
        NETWORKS.get(self.client, id).await
    }

    /// The network with exactly this name, if any.
    pub async fn get_by_name(&self, name: &str) -> Result<Option<Network>, Error> {
        let page = self.list(&ListParams::name(name)).await?;
        Ok(named(page.items, name, |n| &n.name))
    }

    /// One page of `GET /networks`.
    pub async fn list(&self, params: &ListParams) -> Result<Page<Network>, Error> {
        NETWORKS.page(self.client, &params.to_query()).await
    }

    /// All networks matching `params`.
    pub async fn list_all(&self, params: &ListParams) -> Result<Vec<Network>, Error> {
        NETWORKS.all(self.client, &params.to_query()).await
    }

    /// `POST /networks/{id}/actions/add_route`.
    pub async fn add_route(&self, id: i64, route: &Route) -> Result<Action, Error> {
        NETWORKS.action(self.client, id, "add_route", route).await
    }

    /// `POST /networks/{id}/actions/delete_route`.
    pub async fn delete_route(&self, id: i64, route: &Route) -> Result<Action, Error> {
        NETWORKS
            .action(self.client, id, "delete_route", route)
            .await
    }
}
