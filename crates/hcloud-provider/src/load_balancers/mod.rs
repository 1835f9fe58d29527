//! The load balancer capability: one Hetzner load balancer per Service of type LoadBalancer,
//! named, labelled and configured as the official Hetzner CCM does it, so either CCM can take
//! over the other's load balancers.
//!
//! - **Lookup**: by the label `hcloud-ccm/service-uid=<uid>`, else by name (adopted: the
//!   label is added), else the load balancer is created. Lookups are answered by one shared
//!   snapshot of all load balancers (see `snapshot.rs`): a burst of lookups (a leader start,
//!   a Node joining) costs one paged listing, a lone lookup one labelled listing, and a
//!   lookup within [`crate::CacheConfig::load_balancer_max_age`] (10 s) of a listing nothing.
//!   With a cluster name, only this cluster's (and unlabelled) load balancers are the
//!   cluster's, the listing asks for the cluster label, and orphans can be listed (see
//!   [`cluster`]).
//! - **Ensure**: the Service's annotations (see [`annotations::keys`]) over the
//!   [`LoadBalancerSettings`] give the desired state ([`Desired`]); [`Desired::diff`] turns the
//!   difference into [`Step`]s which run one after the other, each action waited for (the API
//!   locks a load balancer while an action runs). Waiting gives the controller's worker back
//!   for other Services, and the waits of all load balancers are polled together. Finished
//!   target steps are applied to the known state instead of reading the load balancer again;
//!   other steps are followed by one read. A no-op ensure costs at most one listing.
//! - **Unset means unchanged**: a setting that neither an annotation nor an
//!   `HCLOUD_LOAD_BALANCERS_*` variable sets (algorithm, public interface, PROXY protocol,
//!   health-check timings, sticky sessions, redirect, cookie, idle timeout) is left as the load
//!   balancer has it; the name changes only with the `name` annotation.
//! - **Absence is asked of the API**: `get_load_balancer` and delete, whose "none" releases
//!   the Service, ask by label selector every time (one request each, as the official CCM);
//!   a create whose answer was lost makes the Service's next lookup ask by label too, so it
//!   never creates a second load balancer, also when the `name` annotation changed meanwhile.
//! - **Robot Nodes** are IP targets (see `robot_targets.rs`); the Robot list is read, from the
//!   provider's Robot cache, in the decision, before any change.
//! - **Update**: targets only, of the load balancer labelled with the Service's UID. None
//!   found is [`cloud_provider::Category::NotFound`], never a cloud error: the controller takes it as nothing
//!   to update and runs a full ensure instead while the Service still wants a load balancer
//!   (which finds one by name, as the official CCM's update does, or creates it). **Delete**: absent is success; delete protection keeps the
//!   load balancer (success, a `DeleteProtected` Warning); every load balancer labelled with the Service's UID is
//!   deleted, and so is the managed certificate this CCM created for the Service.
//! - **No TCP port, no load balancer** (beyond the official CCM): a Service whose ports are
//!   all UDP or SCTP ([`desired::no_tcp_port`]) gets no load balancer, which would be billed
//!   and carry nothing (Hetzner load balancers carry TCP only). Ensure writes one
//!   `UnsupportedProtocolConfigured` Warning naming the ports, deletes a load balancer labelled
//!   with the Service's UID as the deletion does (the snapshot says whether there is one, the
//!   API lists what is deleted), and succeeds with an empty status, which the controller
//!   writes: no error, so no retry until the Service changes. Update has nothing to update
//!   then; `plan` shows the deletion and the Warning.
//! - **Events**: the official CCM's warnings (`MaxTargetsReached`,
//!   `UnsupportedProtocolConfigured`, `LoadBalancerTypeUnconfigured`,
//!   `LoadBalancerTypeDeprecated`, `UnknownProviderIDPrefix`, and for Robot Nodes
//!   `InternalIPNotConfigured`, `ServerNotFound`) and, where this CCM is stricter on
//!   purpose, `LoadBalancerOwnedByOtherService` and `DuplicateLoadBalancers`.
//! - **One decision**: ensure reads and decides (`decide.rs`: the load balancer, the
//!   certificate to create or wait for, the creation request, the steps of every round,
//!   predicted with `predict.rs`), then carries the decision out; `plan` is the same decision
//!   printed, without carrying it out.
//! - A load balancer that is busy with someone else's action, or still being created, gives
//!   an error of category [`cloud_provider::Category::Transient`] (see [`Error::retry`]) with
//!   [`LoadBalancerSettings::retry_after`].
//!
//! Changes for one Service are serialised in this process (ensure and the node-driven update
//! may run at the same time).

pub mod annotations;
pub mod cluster;
mod decide;
pub mod desired;
mod ensure;
mod local_traffic;
pub mod naming;
mod ops;
mod orphans;
pub mod per_port;
mod predict;
mod robot_targets;
pub mod selector;
mod services;
mod settings;
mod snapshot;
mod steps;
mod user_labels;

use std::collections::HashMap;
use std::sync::{Arc, PoisonError};

use async_trait::async_trait;
use cloud_provider::change::Warning;
use cloud_provider::provider::Result;
use cloud_provider::runtime::Workers;
use cloud_provider::{Error, LoadBalancer, LoadBalancerPlan, Outcome};
use hcloud_api::{Client, models};
use k8s_openapi::api::core::v1::{LoadBalancerStatus, Node, Service};

pub use annotations::{AnnotationError, AnnotationErrors, Annotations, CertificateType};
pub use cluster::CLUSTER_NAME_LABEL;
pub use desired::{Desired, Notice, Placement, RobotView, Step, Subject};
pub use naming::{SERVICE_UID_LABEL, load_balancer_name};
pub use selector::NodeSelector;
pub use settings::{DEFAULT_LB_TYPE, LoadBalancerSettings};
pub use steps::reasons;

use crate::errors::{Call, categorize};
use crate::metrics::op::load_balancers as lbs_op;
use naming::service_key;
use ops::Executor;

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
    /// The issued managed certificate of each Service (by UID) seen by this process, so that
    /// a no-op ensure can tell whether its HTTPS services carry it without a request.
    managed_certificates: std::sync::Mutex<HashMap<String, i64>>,
    /// Every load balancer as last listed or written (the lookups of all Services).
    snapshot: snapshot::Snapshot,
    /// Whether the token's project is the cluster's: nothing is created while it is not.
    project: crate::project::ProjectGuard,
    /// The service controller's worker pool, which waits for actions lend their slot to.
    workers: std::sync::OnceLock<Workers>,
    /// Robot dedicated servers: their Nodes become IP targets (off unless given).
    robot: crate::robot::Robot,
}

impl HcloudLoadBalancers {
    /// Load balancers with `settings`, attached to `network_id` (the provider's resolved
    /// `HCLOUD_NETWORK`) when given.
    pub fn new(client: Client, settings: LoadBalancerSettings, network_id: Option<i64>) -> Self {
        Self {
            snapshot: snapshot::Snapshot::new(
                client.clone(),
                crate::CacheConfig::default().load_balancer_max_age,
            )
            .scoped(cluster::selector(settings.cluster_name.as_deref())),
            client,
            settings,
            network_id,
            locks: std::sync::Mutex::default(),
            events: crate::events::Events::default(),
            operations: crate::metrics::Operations::default(),
            lb_types: None,
            managed_certificates: std::sync::Mutex::default(),
            project: crate::project::ProjectGuard::default(),
            workers: std::sync::OnceLock::new(),
            robot: crate::robot::Robot::default(),
        }
    }

    // Deliberate repetition: one builder setter per handle the provider shares; each sets one field
    // and its doc says what sharing that handle means here.
    /// Make Robot Nodes IP targets through `robot` (the provider's shared Robot).
    #[must_use]
    pub fn with_robot(mut self, robot: crate::robot::Robot) -> Self {
        self.robot = robot;
        self
    }

    /// Create nothing while `project` (the provider's guard) says the token's project is not
    /// the cluster's.
    #[must_use]
    pub fn with_project(mut self, project: crate::project::ProjectGuard) -> Self {
        self.project = project;
        self
    }

    fn remembered_managed_certificate(&self, uid: &str) -> Option<i64> {
        self.managed_certificates
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(uid)
            .copied()
    }

    fn remember_managed_certificate(&self, uid: &str, id: i64) {
        self.managed_certificates
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(uid.to_owned(), id);
    }

    fn forget_managed_certificate(&self, uid: &str) {
        self.managed_certificates
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(uid);
    }

    /// Keep the snapshot of all load balancers for [`crate::CacheConfig::load_balancer_max_age`]
    /// of `config` (the provider's settings) instead of the default.
    #[must_use]
    pub fn with_cache_config(mut self, config: &crate::CacheConfig) -> Self {
        self.snapshot = snapshot::Snapshot::new(self.client.clone(), config.load_balancer_max_age)
            .scoped(cluster::selector(self.settings.cluster_name.as_deref()));
        self
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

    // Deliberate repetition: builder setters, as above.
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
            workers: self.workers.get(),
        }
    }

    /// A call on a load balancer, which the API locks while one of its actions runs: a
    /// `locked` or `conflict` answer is retried no sooner than
    /// [`LoadBalancerSettings::retry_after`].
    fn lb_call(&self, what: impl Into<String>) -> Call {
        Call::new(what).busy_for(self.settings.retry_after)
    }

    /// Wait for `fut` (the cloud), lending the service controller's slot meanwhile when it
    /// handed its workers over.
    async fn waiting<F: std::future::Future>(&self, fut: F) -> F::Output {
        match self.workers.get() {
            Some(workers) => workers.waiting(fut).await,
            None => fut.await,
        }
    }

    fn uid(service: &Service) -> Result<&str> {
        service
            .metadata
            .uid
            .as_deref()
            .filter(|u| !u.is_empty())
            .ok_or_else(|| {
                Error::invalid_input(format!("service {} has no UID", service_key(service)))
            })
    }

    /// The desired state, with the IP targets of Robot Nodes (the Robot list is read, from
    /// its cache, when a selected Node is a Robot Node: a failure fails the reconcile before
    /// any change).
    async fn desired(&self, service: &Service, nodes: &[Arc<Node>]) -> Result<Desired> {
        self.operations
            .count(crate::metrics::op::load_balancer_ops::SERVICE_OPTS_EXTRACT);
        let mut desired = Desired::new(
            service,
            &Annotations::of(service),
            &self.settings,
            self.network_id,
            nodes,
        )
        .map_err(|why| Error::invalid_input(format!("service {}: {why}", service_key(service))))?;
        if !self.robot.enabled() {
            desired.choose_robot_targets(RobotView::Off);
        } else if !self.robot.has_client() {
            desired.choose_robot_targets(RobotView::WithoutClient);
        } else if desired.robot_nodes.is_empty() {
            // No Robot Node is selected: no IP target stays, whatever Robot lists.
            desired.choose_robot_targets(RobotView::Listed(&[]));
        } else {
            let listed = self.robot.servers().await.map_err(|err| {
                categorize(
                    format!(
                        "service {}: listing the Robot servers for the targets",
                        service_key(service)
                    ),
                    err,
                )
            })?;
            desired.choose_robot_targets(RobotView::Listed(&listed));
        }
        Ok(desired)
    }

    /// What ensuring a Service without a TCP port (see [`desired::no_tcp_port`]) deletes: the
    /// load balancers labelled with `uid`, as the deletion finds them. Whether there is one
    /// at all is answered by the snapshot, as ensure's own lookup (no request of its own when
    /// it is fresh); only then is the API asked by label, for what is deleted.
    async fn decide_without_tcp(&self, uid: &str) -> Result<decide::Deletion> {
        if self.find(uid, "", false).await?.lb.is_none() {
            return Ok(decide::Deletion::default());
        }
        self.decide_deletion(uid).await
    }

    /// Carry `deletion` out for `service` (with `uid`): the load balancers, then the managed
    /// certificates; a protected load balancer is kept with a `DeleteProtected` Warning.
    async fn carry_out_deletion(
        &self,
        service: &Service,
        uid: &str,
        deletion: &decide::Deletion,
    ) -> Result<()> {
        let key = service_key(service);
        for lb in &deletion.kept {
            tracing::info!(service = %key, load_balancer = lb.name, id = lb.id, "keeping the load balancer: it has delete protection");
            self.events
                .warn(
                    service,
                    reasons::DELETE_PROTECTED,
                    &decide::kept_message(lb),
                )
                .await;
        }
        for lb in &deletion.load_balancers {
            self.delete_one(&key, lb).await?;
        }
        self.delete_certificates(&key, &deletion.certificates)
            .await?;
        if deletion.kept.is_empty() {
            self.forget_managed_certificate(uid);
        }
        Ok(())
    }

    /// Ensure for a Service without a TCP port: `warning` (published first, so that it says
    /// why even when the deletion fails and is retried), no load balancer (one labelled with
    /// the Service's UID is deleted), an empty status.
    async fn ensure_without_tcp(
        &self,
        service: &Service,
        uid: &str,
        warning: &Notice,
    ) -> Result<LoadBalancerStatus> {
        self.publish(service, &[], std::slice::from_ref(warning))
            .await;
        let deletion = self.decide_without_tcp(uid).await?;
        if !deletion.load_balancers.is_empty() {
            tracing::info!(service = %service_key(service), "the Service has no TCP port: deleting its load balancer");
        }
        self.carry_out_deletion(service, uid, &deletion).await?;
        Ok(LoadBalancerStatus::default())
    }

    /// Delete one load balancer of the Service (kept when the API says it is protected).
    async fn delete_one(&self, key: &str, lb: &models::LoadBalancer) -> Result<()> {
        self.operations
            .count(crate::metrics::op::load_balancer_ops::DELETE);
        tracing::info!(service = %key, load_balancer = lb.name, id = lb.id, "deleting load balancer");
        match self.client.load_balancers().delete(lb.id).await {
            // The load balancer is gone once its delete action succeeded.
            Ok(Some(action)) => {
                let what = format!("deleting load balancer {:?} (ID {})", lb.name, lb.id);
                let waited = self.executor(lb, &lb.name).wait(&what, &[action]).await;
                match &waited {
                    Ok(()) => self.snapshot.remove(lb.id),
                    Err(_) => self.snapshot.doubt(lb.id),
                }
                waited
            }
            Ok(None) => {
                self.snapshot.remove(lb.id);
                Ok(())
            }
            Err(err) if err.is_not_found() => {
                self.snapshot.remove(lb.id);
                Ok(())
            }
            Err(err) if err.code() == Some(&hcloud_api::ErrorCode::Protected) => {
                tracing::info!(service = %key, load_balancer = lb.name, "keeping the load balancer: it has delete protection");
                Ok(())
            }
            Err(err) => Err({
                self.snapshot.doubt(lb.id);
                let what = format!("deleting load balancer {:?} (ID {})", lb.name, lb.id);
                categorize(self.lb_call(what), err)
            }),
        }
    }
}

#[async_trait]
impl LoadBalancer for HcloudLoadBalancers {
    /// More than one update coming: the first lookup of a stale snapshot lists all load
    /// balancers (the others share that listing) instead of first asking for its own alone.
    fn expect_lookups(&self, services: usize) {
        if services > 1 {
            self.snapshot.expect_burst();
        }
    }

    fn use_workers(&self, workers: Workers) {
        if self.workers.set(workers).is_err() {
            tracing::debug!("the load balancers already wait through a worker pool");
        }
    }

    /// The `node-selector` annotation picks targets by Node labels.
    fn selects_nodes_by_label(&self) -> bool {
        true
    }

    async fn get_load_balancer(
        &self,
        _cluster_name: &str,
        service: &Service,
    ) -> Result<Option<LoadBalancerStatus>> {
        self.operations.count(lbs_op::GET_LOAD_BALANCER);
        let uid = Self::uid(service)?;
        // Lenient: broken annotations must not block the deletion path that asks this.
        let annotations = Annotations::of(service);
        // Asked of the API, never answered from the snapshot: "none" here releases the
        // Service (its finalizer goes), so it must not come from a listing that missed one.
        let Some(lb) = self.list_labelled_now(uid).await?.into_iter().next() else {
            return Ok(None);
        };
        self.operations
            .count(lbs_op::GET_LOAD_BALANCER_STATUS_INGRESS);
        let opts = desired::StatusOptions::new(&annotations, &self.settings).for_service(service);
        Ok(Some(
            desired::status(&lb, &opts).unwrap_or_else(|_| LoadBalancerStatus::default()),
        ))
    }

    fn get_load_balancer_name(&self, _cluster_name: &str, service: &Service) -> String {
        load_balancer_name(service, &Annotations::of(service))
    }

    async fn ensure_load_balancer(
        &self,
        _cluster_name: &str,
        service: &Service,
        nodes: &[Arc<Node>],
    ) -> Result<Outcome<LoadBalancerStatus>> {
        self.operations.count(lbs_op::ENSURE_LOAD_BALANCER);
        let uid = Self::uid(service)?;
        let _serialised = self.lock(uid).await;
        // Beyond the official CCM: no TCP port, no load balancer (an empty status, no retry).
        if let Some(warning) = desired::no_tcp_port(service) {
            return self
                .ensure_without_tcp(service, uid, &warning)
                .await
                .map(Outcome::Done);
        }
        let decision = self.decide(service, nodes).await?;
        let mut notices = decision.notices.clone();
        let result = self.carry_out(service, decision).await;
        match &result {
            Ok((_, more)) => notices.extend(more.iter().cloned()),
            // The remembered certificate may be what failed (deleted by hand): look it up
            // again next time.
            Err(_) => self.forget_managed_certificate(uid),
        }
        self.publish(service, nodes, &notices).await;
        result.map(|(status, _)| Outcome::Done(status))
    }

    async fn update_load_balancer(
        &self,
        _cluster_name: &str,
        service: &Service,
        nodes: &[Arc<Node>],
    ) -> Result<Outcome<()>> {
        self.operations.count(lbs_op::UPDATE_LOAD_BALANCER);
        let uid = Self::uid(service)?;
        if desired::no_tcp_port(service).is_some() {
            // Ensure made no load balancer for it (and deleted one it had): no targets to
            // set, and nothing to say. Not `NotFound`, which would make the controller run a
            // full ensure (and repeat its Warning) on every Node change; `Done` would make it
            // report an updated load balancer. So: nothing of this controller's to update.
            return Ok(Outcome::ImplementedElsewhere);
        }
        let plan = self.desired(service, nodes).await?;
        let _serialised = self.lock(uid).await;
        let found = self.find(uid, &plan.name, false).await?;
        let Some(lb) = found.lb else {
            return Err(Error::not_found_msg(format!(
                "service {}: load balancer {:?}",
                service_key(service),
                plan.name
            )));
        };
        let (_, notices) = self.apply_rounds(service, &plan, lb, true).await?;
        self.publish(service, nodes, &notices).await;
        Ok(Outcome::Done(()))
    }

    // Deliberate repetition: the signatures of these methods are the `LoadBalancer` trait's.
    async fn ensure_load_balancer_deleted(
        &self,
        _cluster_name: &str,
        service: &Service,
    ) -> Result<Outcome<()>> {
        self.operations.count(lbs_op::ENSURE_LOAD_BALANCER_DELETED);
        let uid = Self::uid(service)?;
        let _serialised = self.lock(uid).await;
        let deletion = self.decide_deletion(uid).await?;
        self.carry_out_deletion(service, uid, &deletion).await?;
        Ok(Outcome::Done(()))
    }

    async fn plan_load_balancer_deleted(
        &self,
        _cluster_name: &str,
        service: &Service,
    ) -> Result<LoadBalancerPlan> {
        let uid = Self::uid(service)?;
        Ok(self.decide_deletion(uid).await?.to_plan())
    }

    // Deliberate repetition: the signature is the `LoadBalancer` trait's.
    async fn plan_load_balancer(
        &self,
        _cluster_name: &str,
        service: &Service,
        nodes: &[Arc<Node>],
    ) -> Result<LoadBalancerPlan> {
        if let Some(warning) = desired::no_tcp_port(service) {
            // As ensure: the Warning, the deletion of a load balancer it has, an empty status.
            let uid = Self::uid(service)?;
            let mut plan = self.decide_without_tcp(uid).await?.to_plan();
            if let Some(reason) = warning.reason {
                plan.warnings
                    .insert(0, Warning::new(reason, warning.message));
            }
            plan.status = Some(LoadBalancerStatus::default());
            return Ok(plan);
        }
        Ok(self.decide(service, nodes).await?.to_plan())
    }
}
