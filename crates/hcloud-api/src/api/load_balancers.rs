//! `/load_balancers` and its actions.

use serde::Serialize;

use crate::Client;
use crate::api::params::ListParams;
use crate::api::{Collection, named, optional_action};
use crate::error::Error;
use crate::models::{
    Action, Algorithm, AlgorithmType, AttachToNetworkRequest, ChangeDnsPtrRequest,
    CreateLoadBalancerRequest, CreateLoadBalancerResponse, LoadBalancer, ServiceSpec,
    ServiceUpdate, TargetSpec, UpdateRequest,
};
use crate::pagination::Page;

const LOAD_BALANCERS: Collection = Collection {
    path: "/load_balancers",
    one: "load_balancer",
    many: "load_balancers",
};

/// Load balancers.
#[derive(Debug, Clone, Copy)]
pub struct LoadBalancersApi<'a> {
    pub(crate) client: &'a Client,
}

#[derive(Serialize)]
struct ListenPort {
    listen_port: u16,
}

#[derive(Serialize)]
struct NetworkId {
    network: i64,
}

#[derive(Serialize)]
struct TypeName<'a> {
    load_balancer_type: &'a str,
}

#[derive(Serialize)]
struct DeleteProtection {
    delete: bool,
}

impl LoadBalancersApi<'_> {
    /// `GET /load_balancers/{id}`.
    pub async fn get(&self, id: i64) -> Result<LoadBalancer, Error> {
        LOAD_BALANCERS.get(self.client, id).await
    }

    /// The load balancer with exactly this name, if any.
    pub async fn get_by_name(&self, name: &str) -> Result<Option<LoadBalancer>, Error> {
        let page = self.list(&ListParams::name(name)).await?;
        Ok(named(page.items, name, |lb| &lb.name))
    }

    /// One page of `GET /load_balancers`.
    pub async fn list(&self, params: &ListParams) -> Result<Page<LoadBalancer>, Error> {
        LOAD_BALANCERS.page(self.client, &params.to_query()).await
    }

    /// All load balancers matching `params`.
    pub async fn list_all(&self, params: &ListParams) -> Result<Vec<LoadBalancer>, Error> {
        LOAD_BALANCERS.all(self.client, &params.to_query()).await
    }

    /// `POST /load_balancers`.
    pub async fn create(
        &self,
        request: &CreateLoadBalancerRequest,
    ) -> Result<CreateLoadBalancerResponse, Error> {
        self.client
            .transport()
            .post(LOAD_BALANCERS.path, request)
            .await
    }

    /// `PUT /load_balancers/{id}` (name and/or labels).
    pub async fn update(&self, id: i64, request: &UpdateRequest) -> Result<LoadBalancer, Error> {
        LOAD_BALANCERS.update(self.client, id, request).await
    }

    /// `DELETE /load_balancers/{id}`. Since October 2026 the API answers with the
    /// `delete_load_balancer` action, and the load balancer is gone only once that action
    /// finished: wait for it with [`crate::ActionsApi::wait`] (or use
    /// [`LoadBalancersApi::delete_and_wait`]). An answer without an action (the older 204 No
    /// Content) gives `None`: the load balancer is gone already.
    pub async fn delete(&self, id: i64) -> Result<Option<Action>, Error> {
        let path = LOAD_BALANCERS.item_path(id);
        let (status, body) = self.client.transport().delete(&path).await?;
        optional_action("DELETE", &path, status, &body)
    }

    /// [`LoadBalancersApi::delete`], then waits until its action finished. An action that
    /// ends in `error` gives [`Error::Action`]. Wrap in a timeout to bound the wait.
    pub async fn delete_and_wait(&self, id: i64) -> Result<(), Error> {
        match self.delete(id).await? {
            Some(action) => self.client.actions().wait(&action).await,
            None => Ok(()),
        }
    }

    /// `add_service`.
    pub async fn add_service(&self, id: i64, service: &ServiceSpec) -> Result<Action, Error> {
        self.action(id, "add_service", service).await
    }

    /// `update_service` (the service is selected by `listen_port`).
    pub async fn update_service(&self, id: i64, update: &ServiceUpdate) -> Result<Action, Error> {
        self.action(id, "update_service", update).await
    }

    /// `delete_service`.
    pub async fn delete_service(&self, id: i64, listen_port: u16) -> Result<Action, Error> {
        self.action(id, "delete_service", &ListenPort { listen_port })
            .await
    }

    /// `add_target`.
    pub async fn add_target(&self, id: i64, target: &TargetSpec) -> Result<Action, Error> {
        self.action(id, "add_target", target).await
    }

    /// `remove_target` (`use_private_ip` is not sent).
    pub async fn remove_target(&self, id: i64, target: &TargetSpec) -> Result<Action, Error> {
        let target = TargetSpec {
            use_private_ip: None,
            ..target.clone()
        };
        self.action(id, "remove_target", &target).await
    }

    /// `attach_to_network`.
    pub async fn attach_to_network(
        &self,
        id: i64,
        request: &AttachToNetworkRequest,
    ) -> Result<Action, Error> {
        self.action(id, "attach_to_network", request).await
    }

    /// `detach_from_network`.
    pub async fn detach_from_network(&self, id: i64, network: i64) -> Result<Action, Error> {
        self.action(id, "detach_from_network", &NetworkId { network })
            .await
    }

    /// `change_algorithm`.
    pub async fn change_algorithm(&self, id: i64, kind: AlgorithmType) -> Result<Action, Error> {
        self.action(id, "change_algorithm", &Algorithm::new(kind))
            .await
    }

    /// `change_type` (type by ID or name, e.g. `lb21`).
    pub async fn change_type(&self, id: i64, load_balancer_type: &str) -> Result<Action, Error> {
        self.action(id, "change_type", &TypeName { load_balancer_type })
            .await
    }

    /// `enable_public_interface`.
    pub async fn enable_public_interface(&self, id: i64) -> Result<Action, Error> {
        self.empty_action(id, "enable_public_interface").await
    }

    /// `disable_public_interface`.
    pub async fn disable_public_interface(&self, id: i64) -> Result<Action, Error> {
        self.empty_action(id, "disable_public_interface").await
    }

    /// `change_protection` (delete protection).
    pub async fn change_protection(&self, id: i64, delete: bool) -> Result<Action, Error> {
        self.action(id, "change_protection", &DeleteProtection { delete })
            .await
    }

    /// `change_dns_ptr` of one public IP.
    pub async fn change_dns_ptr(
        &self,
        id: i64,
        request: &ChangeDnsPtrRequest,
    ) -> Result<Action, Error> {
        self.action(id, "change_dns_ptr", request).await
    }

    async fn action<B: Serialize>(&self, id: i64, name: &str, body: &B) -> Result<Action, Error> {
        LOAD_BALANCERS.action(self.client, id, name, body).await
    }

    async fn empty_action(&self, id: i64, name: &str) -> Result<Action, Error> {
        LOAD_BALANCERS.empty_action(self.client, id, name).await
    }
}
