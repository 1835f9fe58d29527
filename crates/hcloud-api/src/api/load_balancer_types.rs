//! `/load_balancer_types`.

use crate::Client;
use crate::api::params::ListParams;
use crate::api::{get_one, named};
use crate::error::Error;
use crate::models::LoadBalancerType;
use crate::pagination::get_all;

/// Load balancer types.
#[derive(Debug, Clone, Copy)]
pub struct LoadBalancerTypesApi<'a> {
    pub(crate) client: &'a Client,
}

impl LoadBalancerTypesApi<'_> {
    /// `GET /load_balancer_types/{id}`.
    pub async fn get(&self, id: i64) -> Result<LoadBalancerType, Error> {
        let path = format!("/load_balancer_types/{id}");
        get_one(self.client.transport(), &path, "load_balancer_type").await
    }

    /// The type with exactly this name (e.g. `lb11`), if any.
    pub async fn get_by_name(&self, name: &str) -> Result<Option<LoadBalancerType>, Error> {
        let query = ListParams::name(name).to_query();
        let all = get_all(
            self.client.transport(),
            "/load_balancer_types",
            "load_balancer_types",
            &query,
        )
        .await?;
        Ok(named(all, name, |i| &i.name))
    }

    /// All load balancer types.
    pub async fn list(&self) -> Result<Vec<LoadBalancerType>, Error> {
        get_all(
            self.client.transport(),
            "/load_balancer_types",
            "load_balancer_types",
            &Vec::new(),
        )
        .await
    }
}
