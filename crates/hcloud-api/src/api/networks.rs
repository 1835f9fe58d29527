//! `/networks` and its route actions.

use crate::Client;
use crate::api::params::ListParams;
use crate::api::{ActionAnswer, get_one, named};
use crate::error::Error;
use crate::models::{Action, Network, Route};
use crate::pagination::{Page, get_all, get_page};

/// Private networks.
#[derive(Debug, Clone, Copy)]
pub struct NetworksApi<'a> {
    pub(crate) client: &'a Client,
}

impl NetworksApi<'_> {
    /// `GET /networks/{id}`.
    pub async fn get(&self, id: i64) -> Result<Network, Error> {
        get_one(
            self.client.transport(),
            &format!("/networks/{id}"),
            "network",
        )
        .await
    }

    /// The network with exactly this name, if any.
    pub async fn get_by_name(&self, name: &str) -> Result<Option<Network>, Error> {
        Ok(named(
            self.list(&ListParams::name(name)).await?.items,
            name,
            |i| &i.name,
        ))
    }

    /// One page of `GET /networks`.
    pub async fn list(&self, params: &ListParams) -> Result<Page<Network>, Error> {
        get_page(
            self.client.transport(),
            "/networks",
            "networks",
            &params.to_query(),
        )
        .await
    }

    /// All networks matching `params`.
    pub async fn list_all(&self, params: &ListParams) -> Result<Vec<Network>, Error> {
        get_all(
            self.client.transport(),
            "/networks",
            "networks",
            &params.to_query(),
        )
        .await
    }

    /// `POST /networks/{id}/actions/add_route`.
    pub async fn add_route(&self, id: i64, route: &Route) -> Result<Action, Error> {
        self.route_action(id, "add_route", route).await
    }

    /// `POST /networks/{id}/actions/delete_route`.
    pub async fn delete_route(&self, id: i64, route: &Route) -> Result<Action, Error> {
        self.route_action(id, "delete_route", route).await
    }

    async fn route_action(&self, id: i64, action: &str, route: &Route) -> Result<Action, Error> {
        let path = format!("/networks/{id}/actions/{action}");
        let answer: ActionAnswer = self.client.transport().post(&path, route).await?;
        Ok(answer.action)
    }
}
