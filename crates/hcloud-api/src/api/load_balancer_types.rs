//! `/load_balancer_types`.

use crate::Client;
use crate::api::params::ListParams;
use crate::api::{Collection, named};
use crate::error::Error;
use crate::models::LoadBalancerType;

const LOAD_BALANCER_TYPES: Collection = Collection {
    path: "/load_balancer_types",
    one: "load_balancer_type",
    many: "load_balancer_types",
};

/// Load balancer types.
#[derive(Debug, Clone, Copy)]
pub struct LoadBalancerTypesApi<'a> {
    pub(crate) client: &'a Client,
}

impl LoadBalancerTypesApi<'_> {
    /// `GET /load_balancer_types/{id}`.
    pub async fn get(&self, id: i64) -> Result<LoadBalancerType, Error> {
        LOAD_BALANCER_TYPES.get(self.client, id).await
    }

    /// The type with exactly this name (e.g. `lb11`), if any.
    pub async fn get_by_name(&self, name: &str) -> Result<Option<LoadBalancerType>, Error> {
        let query = ListParams::name(name).to_query();
        let all = LOAD_BALANCER_TYPES.all(self.client, &query).await?;
        Ok(named(all, name, |t| &t.name))
    }

    /// All load balancer types.
    pub async fn list(&self) -> Result<Vec<LoadBalancerType>, Error> {
        LOAD_BALANCER_TYPES.all(self.client, &Vec::new()).await
    }
}
