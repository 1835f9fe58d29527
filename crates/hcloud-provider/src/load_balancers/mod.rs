//! The load balancer capability: one Hetzner load balancer per Service of type LoadBalancer,
//! named, labelled and configured as the official Hetzner CCM does it, so either CCM can take
//! over the other's load balancers.
//!
//! - **Lookup**: by the label `hcloud-ccm/service-uid=<uid>` (one listing), else by name
//!   (adopted: the label is added), else the load balancer is created.
//! - **Ensure**: the Service's annotations (see [`annotations::keys`]) over the
//!   [`LoadBalancerSettings`] give the desired state ([`Plan`]); [`Plan::diff`] turns the
//!   difference into [`Step`]s which run one after the other, each action waited for (the API
//!   locks a load balancer while an action runs). A no-op ensure costs one listing.
//! - **Update**: targets only. **Delete**: absent is success; delete protection keeps the
//!   load balancer (success, logged).
//! - A load balancer that is busy with someone else's action, or still being created, gives
//!   [`Error::Retry`] with [`LoadBalancerSettings::retry_after`].
//!
//! Changes for one Service are serialised in this process (ensure and the node-driven update
//! may run at the same time).

pub mod annotations;
pub mod naming;
mod ops;
pub mod plan;
pub mod selector;
mod settings;

use std::collections::HashMap;
use std::sync::{Arc, PoisonError};

use async_trait::async_trait;
use cloud_provider::provider::Result;
use cloud_provider::{Error, LoadBalancer};
use hcloud_api::api::params::ListParams;
use hcloud_api::{Client, models};
use k8s_openapi::api::core::v1::{LoadBalancerStatus, Node, Service};

pub use annotations::{AnnotationError, AnnotationErrors, Annotations, CertificateType};
pub use naming::{SERVICE_UID_LABEL, load_balancer_name};
pub use plan::{Placement, Plan, Step};
pub use selector::NodeSelector;
pub use settings::{DEFAULT_LB_TYPE, LoadBalancerSettings};

use naming::{service_key, uid_selector};
use ops::{Executor, api_error};

/// How many diff-and-apply rounds one ensure runs (a type change can make room for more
/// targets, which only the next round sees).
const ROUNDS: usize = 2;

/// Hetzner load balancers for Services.
#[derive(Debug)]
pub struct HcloudLoadBalancers {
    client: Client,
    settings: LoadBalancerSettings,
    network_id: Option<i64>,
    locks: std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    events: crate::events::Events,
    operations: crate::metrics::Operations,
    lb_types: Option<crate::lb_type_cache::LoadBalancerTypeCache>,
}

impl HcloudLoadBalancers {
    /// Load balancers with `settings`, attached to `network_id` (the provider's resolved
    /// `HCLOUD_NETWORK`) when given.
    pub fn new(client: Client, settings: LoadBalancerSettings, network_id: Option<i64>) -> Self {
        Self {
            client,
            settings,
            network_id,
            locks: std::sync::Mutex::default(),
            events: crate::events::Events::default(),
            operations: crate::metrics::Operations::default(),
            lb_types: None,
        }
    }

    /// Look load balancer types up through `cache` (the provider's shared cache).
    #[must_use]
    pub fn with_lb_type_cache(
        mut self,
        cache: crate::lb_type_cache::LoadBalancerTypeCache,
    ) -> Self {
        self.lb_types = Some(cache);
        self
    }

    /// The load balancer type cache, when given.
    pub fn lb_type_cache(&self) -> Option<&crate::lb_type_cache::LoadBalancerTypeCache> {
        self.lb_types.as_ref()
    }

    /// Write events through `events` (the provider's shared handle).
    #[must_use]
    pub fn with_events(mut self, events: crate::events::Events) -> Self {
        self.events = events;
        self
    }

    /// Count operations into `operations` (the provider's shared handle).
    #[must_use]
    pub fn with_operations(mut self, operations: crate::metrics::Operations) -> Self {
        self.operations = operations;
        self
    }

    /// The event handle.
    pub fn events(&self) -> &crate::events::Events {
        &self.events
    }

    /// The operations counter.
    pub fn operations(&self) -> &crate::metrics::Operations {
        &self.operations
    }

    /// The settings.
    pub fn settings(&self) -> &LoadBalancerSettings {
        &self.settings
    }

    /// The network load balancers are attached to.
    pub fn network_id(&self) -> Option<i64> {
        self.network_id
    }

    async fn lock(&self, uid: &str) -> tokio::sync::OwnedMutexGuard<()> {
        let mutex = {
            let mut locks = self.locks.lock().unwrap_or_else(PoisonError::into_inner);
            locks.retain(|_, m| Arc::strong_count(m) > 1);
            locks.entry(uid.to_owned()).or_default().clone()
        };
        mutex.lock_owned().await
    }

    fn executor<'a>(&'a self, lb: &models::LoadBalancer, name: &'a str) -> Executor<'a> {
        Executor {
            client: &self.client,
            id: lb.id,
            name,
            action_timeout: self.settings.action_timeout,
            retry_after: self.settings.retry_after,
        }
    }

    fn annotations(service: &Service) -> Result<Annotations> {
        let empty = Default::default();
        let map = service.metadata.annotations.as_ref().unwrap_or(&empty);
        Annotations::parse(map)
            .map_err(|err| Error::InvalidInput(format!("service {}: {err}", service_key(service))))
    }

    fn uid(service: &Service) -> Result<&str> {
        service
            .metadata
            .uid
            .as_deref()
            .filter(|u| !u.is_empty())
            .ok_or_else(|| {
                Error::InvalidInput(format!("service {} has no UID", service_key(service)))
            })
    }

    fn plan(
        &self,
        service: &Service,
        annotations: &Annotations,
        nodes: &[Arc<Node>],
    ) -> Result<Plan> {
        let plan = Plan::new(service, annotations, &self.settings, self.network_id, nodes)
            .map_err(|why| {
                Error::InvalidInput(format!("service {}: {why}", service_key(service)))
            })?;
        for note in &plan.skipped {
            tracing::warn!(service = %service_key(service), "{note}");
        }
        Ok(plan)
    }

    /// The Service's load balancer.
    ///
    /// Only a load balancer labelled with the Service's UID is the Service's own: `get`,
    /// `update` and delete act on nothing else. Ensure (`adopt_by_name`) may also take over a
    /// load balancer with the Service's name that carries no UID label (made by hand or by a
    /// very old CCM; the label is written as the first step), but never one labelled for
    /// another Service: that is an error naming the name annotation and the owner's UID.
    async fn find(
        &self,
        uid: &str,
        name: &str,
        adopt_by_name: bool,
    ) -> Result<Option<models::LoadBalancer>> {
        let lbs = self.client.load_balancers();
        let labelled = lbs
            .list_all(&ListParams::label_selector(uid_selector(uid)))
            .await
            .map_err(|err| {
                api_error(
                    &format!("listing load balancers labelled {}", uid_selector(uid)),
                    err,
                    self.settings.retry_after,
                )
            })?;
        if labelled.len() > 1 {
            tracing::warn!(
                uid,
                count = labelled.len(),
                "several load balancers carry this service UID; using the first"
            );
        }
        if let Some(lb) = labelled.into_iter().next() {
            return Ok(Some(lb));
        }
        if !adopt_by_name {
            return Ok(None);
        }
        let by_name = lbs.get_by_name(name).await.map_err(|err| {
            api_error(
                &format!("looking up load balancer {name:?}"),
                err,
                self.settings.retry_after,
            )
        })?;
        match by_name {
            Some(lb) => match lb.labels.get(SERVICE_UID_LABEL) {
                Some(owner) if owner != uid => Err(Error::InvalidInput(format!(
                    "load balancer {name:?} belongs to the Service with UID {owner} (label {SERVICE_UID_LABEL}); choose another name with the annotation load-balancer.hetzner.cloud/name, or remove that label from the load balancer to hand it over"
                ))),
                _ => Ok(Some(lb)),
            },
            None => Ok(None),
        }
    }

    async fn resolve_certificates(&self, plan: &mut Plan) -> Result<()> {
        if plan.certificate_refs.is_empty() {
            return Ok(());
        }
        let mut ids = Vec::with_capacity(plan.certificate_refs.len());
        for reference in &plan.certificate_refs {
            if let Ok(id) = reference.parse::<i64>() {
                ids.push(id);
                continue;
            }
            let found = self
                .client
                .certificates()
                .get_by_name(reference)
                .await
                .map_err(|err| Error::api(format!("looking up certificate {reference:?}"), err))?;
            match found {
                Some(cert) => ids.push(cert.id),
                None => {
                    return Err(Error::InvalidInput(format!(
                        "{}: certificate {reference:?} does not exist",
                        annotations::keys::HTTP_CERTIFICATES
                    )));
                }
            }
        }
        plan.set_certificates(&ids);
        Ok(())
    }

    async fn create(&self, service: &Service, plan: &Plan) -> Result<models::LoadBalancer> {
        let key = service_key(service);
        let placement = plan.placement.as_ref().ok_or_else(|| {
            Error::InvalidInput(format!(
                "service {key}: cannot create load balancer {:?}: no location or network zone: set the {} or {} annotation, or HCLOUD_LOAD_BALANCERS_LOCATION or HCLOUD_LOAD_BALANCERS_NETWORK_ZONE",
                plan.name,
                annotations::keys::LOCATION,
                annotations::keys::NETWORK_ZONE,
            ))
        })?;
        let lb_type = self
            .client
            .load_balancer_types()
            .get_by_name(&plan.create_type)
            .await
            .map_err(|err| {
                Error::api(
                    format!("looking up load balancer type {:?}", plan.create_type),
                    err,
                )
            })?
            .ok_or_else(|| {
                Error::InvalidInput(format!(
                    "service {key}: load balancer type {:?} does not exist",
                    plan.create_type
                ))
            })?;
        let max_targets = match lb_type.max_targets {
            0 => usize::MAX,
            n => n as usize,
        };
        let request = plan.create_request(placement, max_targets);
        tracing::info!(service = %key, load_balancer = plan.name, ?placement, lb_type = plan.create_type, "creating load balancer");
        let created = self
            .client
            .load_balancers()
            .create(&request)
            .await
            .map_err(|err| {
                api_error(
                    &format!("creating load balancer {:?}", plan.name),
                    err,
                    self.settings.retry_after,
                )
            })?;
        let exec = self.executor(&created.load_balancer, &plan.name);
        exec.wait(
            &format!("creating load balancer {:?}", plan.name),
            &[created.action],
        )
        .await?;
        exec.reload().await
    }

    /// Apply `plan` to `lb` (only target steps with `targets_only`); the fresh load balancer.
    async fn reconcile(
        &self,
        service: &Service,
        plan: &Plan,
        mut lb: models::LoadBalancer,
        targets_only: bool,
    ) -> Result<models::LoadBalancer> {
        for _ in 0..ROUNDS {
            let mut steps = plan.diff(&lb);
            if targets_only {
                steps.retain(Step::is_target_step);
            }
            if steps.is_empty() {
                break;
            }
            let exec = self.executor(&lb, &plan.name);
            exec.run_all(&steps).await?;
            lb = exec.reload().await?;
        }
        let over = plan.targets_over_limit(&lb);
        if over > 0 {
            tracing::warn!(
                service = %service_key(service),
                load_balancer = lb.name,
                max_targets = lb.load_balancer_type.max_targets,
                left_out = over,
                "load balancer type's maximum number of targets reached"
            );
        }
        Ok(lb)
    }
}

#[async_trait]
impl LoadBalancer for HcloudLoadBalancers {
    async fn get_load_balancer(
        &self,
        _cluster_name: &str,
        service: &Service,
    ) -> Result<Option<LoadBalancerStatus>> {
        let uid = Self::uid(service)?;
        // Lenient: broken annotations must not block the deletion path that asks this.
        let annotations = Self::annotations(service).unwrap_or_default();
        let name = load_balancer_name(service, &annotations);
        let Some(lb) = self.find(uid, &name, false).await? else {
            return Ok(None);
        };
        let opts = plan::StatusOptions::new(&annotations, &self.settings);
        Ok(Some(
            plan::status(&lb, &opts).unwrap_or_else(|_| LoadBalancerStatus::default()),
        ))
    }

    fn get_load_balancer_name(&self, _cluster_name: &str, service: &Service) -> String {
        let annotations = Self::annotations(service).unwrap_or_default();
        load_balancer_name(service, &annotations)
    }

    async fn ensure_load_balancer(
        &self,
        _cluster_name: &str,
        service: &Service,
        nodes: &[Arc<Node>],
    ) -> Result<LoadBalancerStatus> {
        let uid = Self::uid(service)?;
        let annotations = Self::annotations(service)?;
        let mut plan = self.plan(service, &annotations, nodes)?;
        self.resolve_certificates(&mut plan).await?;
        let _serialised = self.lock(uid).await;
        let lb = match self.find(uid, &plan.name, true).await? {
            Some(lb) => lb,
            None => self.create(service, &plan).await?,
        };
        let lb = self.reconcile(service, &plan, lb, false).await?;
        plan::status(&lb, &plan.status).map_err(|why| Error::retry(why, self.settings.retry_after))
    }

    async fn update_load_balancer(
        &self,
        _cluster_name: &str,
        service: &Service,
        nodes: &[Arc<Node>],
    ) -> Result<()> {
        let uid = Self::uid(service)?;
        let annotations = Self::annotations(service)?;
        let plan = self.plan(service, &annotations, nodes)?;
        let _serialised = self.lock(uid).await;
        let Some(lb) = self.find(uid, &plan.name, false).await? else {
            return Err(Error::other(format!(
                "service {}: load balancer {:?} not found",
                service_key(service),
                plan.name
            )));
        };
        self.reconcile(service, &plan, lb, true).await?;
        Ok(())
    }

    async fn ensure_load_balancer_deleted(
        &self,
        _cluster_name: &str,
        service: &Service,
    ) -> Result<()> {
        let uid = Self::uid(service)?;
        let key = service_key(service);
        let annotations = Self::annotations(service).unwrap_or_default();
        let name = load_balancer_name(service, &annotations);
        let _serialised = self.lock(uid).await;
        let Some(lb) = self.find(uid, &name, false).await? else {
            return Ok(());
        };
        if lb.protection.delete {
            tracing::info!(
                service = %key,
                load_balancer = lb.name,
                id = lb.id,
                "keeping the load balancer: it has delete protection"
            );
            return Ok(());
        }
        tracing::info!(service = %key, load_balancer = lb.name, id = lb.id, "deleting load balancer");
        match self.client.load_balancers().delete(lb.id).await {
            // The load balancer is gone once its delete action succeeded.
            Ok(Some(action)) => {
                let what = format!("deleting load balancer {:?} (ID {})", lb.name, lb.id);
                self.executor(&lb, &lb.name).wait(&what, &[action]).await
            }
            Ok(None) => Ok(()),
            Err(err) if err.is_not_found() => Ok(()),
            Err(err) if err.code() == Some(&hcloud_api::ErrorCode::Protected) => {
                tracing::info!(service = %key, load_balancer = lb.name, "keeping the load balancer: it has delete protection");
                Ok(())
            }
            Err(err) => Err(api_error(
                &format!("deleting load balancer {:?} (ID {})", lb.name, lb.id),
                err,
                self.settings.retry_after,
            )),
        }
    }
}
