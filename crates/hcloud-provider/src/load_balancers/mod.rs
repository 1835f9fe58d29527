//! The load balancer capability: one Hetzner load balancer per Service of type LoadBalancer,
//! named, labelled and configured as the official Hetzner CCM does it, so either CCM can take
//! over the other's load balancers.
//!
//! - **Lookup**: by the label `hcloud-ccm/service-uid=<uid>`, else by name (adopted: the
//!   label is added; also over the label of a Service that no longer exists, which the
//!   caller's view of the Services answers without a request, see `decide::takeover`), else
//!   the load balancer is created. Lookups are answered by one shared
//!   cache of all load balancers (see `cache.rs`): a burst of lookups (a leader start,
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
//! - **Servers without a public IPv4** (beyond the official CCM, which fails the whole target
//!   update) are targets over the load balancer's network when they are in it, else their
//!   Node is left out with a `ServerWithoutPublicIPv4` Warning (see `cloud_targets.rs`); what
//!   the provider's server cache last saw of each server decides, without a request.
//! - **Update**: targets only, of the load balancer labelled with the Service's UID. None
//!   found is [`cloud_provider::Category::NotFound`], never a cloud error: the controller takes it as nothing
//!   to update and runs a full ensure instead while the Service still wants a load balancer
//!   (which finds one by name, as the official CCM's update does, or creates it). **Delete**: absent is success; delete protection keeps the
//!   load balancer (success, a `DeleteProtected` Warning); every load balancer labelled with the Service's UID is
//!   deleted, and so are the managed certificate and the Secret uploads this CCM created for
//!   the Service.
//! - **No TCP port, no load balancer** (beyond the official CCM): a Service whose ports are
//!   all UDP or SCTP ([`desired::no_tcp_port`]) gets no load balancer, which would be billed
//!   and carry nothing (Hetzner load balancers carry TCP only). Ensure writes one
//!   `UnsupportedProtocolConfigured` Warning naming the ports, deletes a load balancer labelled
//!   with the Service's UID as the deletion does (the cache says whether there is one, the
//!   API lists what is deleted), and succeeds with an empty status, which the controller
//!   writes: no error, so no retry until the Service changes. Update has nothing to update
//!   then; `plan` shows the deletion and the Warning.
//! - **Shared load balancers** (beyond the official CCM, `shared.rs`): Services naming one in
//!   `shared-load-balancer` each own their ports (labels `hcloud-ccm/owner-<uid>`); the owner
//!   of the lowest port sets the targets and the load balancer's own settings; it goes with
//!   its last owner, and only if created here. Owners of one change it one at a time.
//! - **Certificates from a Secret** (beyond the official CCM, `tls_secret.rs`): a
//!   `kubernetes.io/tls` Secret named in `http-certificate-secret`, read through the caller's
//!   reader, is uploaded, uploaded again when its content changes, swapped in, and the old
//!   upload deleted after the swap.
//! - **Events**: the official CCM's warnings (`MaxTargetsReached`,
//!   `UnsupportedProtocolConfigured`, `LoadBalancerTypeUnconfigured`,
//!   `LoadBalancerTypeDeprecated`, `UnknownProviderIDPrefix`, and for Robot Nodes
//!   `InternalIPNotConfigured`, `ServerNotFound`) and, where this CCM is stricter on
//!   purpose, `LoadBalancerOwnedByOtherService` and `DuplicateLoadBalancers`; where the
//!   official CCM is silent, `LoadBalancerSourceRangesIgnored`, `UnknownAnnotation` (with the
//!   closest known key) and `LoadBalancerNotMoved`.
//! - **Read, decide, apply**: `read.rs` reads (the load balancer, certificates, types, the
//!   Robot servers), `decide.rs` decides without I/O (the certificate to create or wait for,
//!   the creation request, the steps of every round, predicted), `apply.rs` carries the
//!   decision out, round for round, without deciding again. `plan` prints the same decision.
//! - A load balancer that is busy with someone else's action, or still being created, gives
//!   an error of category [`cloud_provider::Category::Transient`] (see [`Error::retry`]) with
//!   [`LoadBalancerSettings::retry_after`].
//!
//! Changes for one Service are serialised in this process (ensure and the node-driven update
//! may run at the same time), and so are the changes of the owners of one shared load
//! balancer.

pub mod annotations;
mod apply;
mod cache;
mod cloud_targets;
pub mod cluster;
mod decide;
pub mod desired;
mod local_traffic;
pub mod naming;
pub mod per_port;
mod read;
mod robot_targets;
pub mod selector;
mod services;
mod settings;
mod shared;
mod steps;
mod tls_secret;
mod user_labels;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use async_trait::async_trait;
use cloud_provider::change::Warning;
use cloud_provider::provider::Result;
use cloud_provider::runtime::Workers;
use cloud_provider::{Error, KnownServices, LoadBalancer, LoadBalancerPlan, Outcome};
use hcloud_api::{Client, models};
use k8s_openapi::api::core::v1::{LoadBalancerStatus, Node, Service};

pub use annotations::{AnnotationError, AnnotationErrors, Annotations, CertificateType};
pub use cluster::CLUSTER_NAME_LABEL;
pub use desired::{Desired, Notice, Placement, RobotView, Step, Subject};
pub use naming::{SERVICE_UID_LABEL, load_balancer_name};
pub use selector::NodeSelector;
pub use settings::{DEFAULT_LB_TYPE, LoadBalancerSettings};
pub use steps::reasons;

use crate::errors::Call;
use crate::metrics::op::load_balancers as lbs_op;
use apply::{Applier, Executor, StandIns};
use cluster::Orphan;
use naming::service_key;
use read::Reader;

/// Hetzner load balancers for Services.
#[derive(Debug)]
pub struct HcloudLoadBalancers {
    client: Client,
    settings: LoadBalancerSettings,
    network_id: Option<i64>,
    locks: parking_lot::Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    events: crate::events::Events,
    operations: crate::metrics::Operations,
    lb_types: Option<crate::lb_type_cache::LoadBalancerTypeCache>,
    /// The issued managed certificate of each Service seen by this process.
    managed_certificates: read::ManagedCertificates,
    /// Every load balancer as last listed or written (the lookups of all Services).
    cache: cache::LoadBalancerCache,
    /// Whether the token's project is the cluster's: nothing is created while it is not.
    project: crate::project::ProjectGuard,
    /// The service controller's worker pool, which waits for actions lend their slot to.
    workers: std::sync::OnceLock<Workers>,
    /// Robot dedicated servers: their Nodes become IP targets (off unless given).
    robot: crate::robot::Robot,
    /// The cluster's Services as the caller knows them (`use_services`): whether the Service
    /// a load balancer found by name is labelled for still exists.
    services: parking_lot::RwLock<Option<Arc<dyn KnownServices>>>,
    /// The TLS Secrets of the Services' namespaces (`use_secrets`): a Service's
    /// `http-certificate-secret` is read through it; `None` while the caller reads none.
    secrets: parking_lot::RwLock<Option<Arc<dyn cloud_provider::secrets::TlsSecrets>>>,
    /// The provider's shared server cache: what it last saw of a target's server (whether it
    /// has a public IPv4), never a request of its own.
    servers: Option<crate::ServerCache>,
}

impl HcloudLoadBalancers {
    /// Load balancers with `settings`, attached to `network_id` (the provider's resolved
    /// `HCLOUD_NETWORK`) when given.
    pub fn new(client: Client, settings: LoadBalancerSettings, network_id: Option<i64>) -> Self {
        Self {
            cache: Self::cache_of(
                &client,
                &settings,
                crate::CacheConfig::default().load_balancer_max_age,
            ),
            client,
            settings,
            network_id,
            locks: parking_lot::Mutex::default(),
            events: crate::events::Events::default(),
            operations: crate::metrics::Operations::default(),
            lb_types: None,
            managed_certificates: read::ManagedCertificates::default(),
            project: crate::project::ProjectGuard::default(),
            workers: std::sync::OnceLock::new(),
            robot: crate::robot::Robot::default(),
            services: parking_lot::RwLock::new(None),
            secrets: parking_lot::RwLock::new(None),
            servers: None,
        }
    }

    fn cache_of(
        client: &Client,
        settings: &LoadBalancerSettings,
        max_age: std::time::Duration,
    ) -> cache::LoadBalancerCache {
        cache::LoadBalancerCache::new(client.clone(), max_age)
            .scoped(cluster::selector(settings.cluster_name.as_deref()))
    }

    /// Make Robot Nodes IP targets through `robot` (the provider's shared Robot).
    #[must_use]
    pub fn with_robot(mut self, robot: crate::robot::Robot) -> Self {
        self.robot = robot;
        self
    }

    /// Look up what is known of the target servers (whether they have a public IPv4) in
    /// `servers` (the provider's shared cache), without a request.
    #[must_use]
    pub fn with_server_cache(mut self, servers: crate::ServerCache) -> Self {
        self.servers = Some(servers);
        self
    }

    /// Create nothing while `project` (the provider's guard) says the token's project is not
    /// the cluster's.
    #[must_use]
    pub fn with_project(mut self, project: crate::project::ProjectGuard) -> Self {
        self.project = project;
        self
    }

    /// Keep the cache of all load balancers for [`crate::CacheConfig::load_balancer_max_age`]
    /// of `config` (the provider's settings) instead of the default.
    #[must_use]
    pub fn with_cache_config(mut self, config: &crate::CacheConfig) -> Self {
        self.cache = Self::cache_of(&self.client, &self.settings, config.load_balancer_max_age);
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

    /// The load balancer type cache, when given.
    pub fn lb_type_cache(&self) -> Option<&crate::lb_type_cache::LoadBalancerTypeCache> {
        self.lb_types.as_ref()
    }

    /// Where the Warning events go.
    pub fn events(&self) -> &crate::events::Events {
        &self.events
    }

    /// The counts of operations, as the official CCM's metrics name them.
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

    /// The cluster name (`HCLOUD_LOAD_BALANCERS_CLUSTER_NAME`), when set.
    pub fn cluster_name(&self) -> Option<&str> {
        self.settings.cluster_name.as_deref()
    }

    /// Every load balancer labelled with this cluster's name, as the API lists them now (one
    /// request by the cluster label). `None` without a cluster name: then nothing tells this
    /// cluster's load balancers from another's.
    pub async fn list_cluster(&self) -> Result<Option<Vec<models::LoadBalancer>>> {
        self.reader().list_cluster().await
    }

    /// The load balancers labelled with this cluster's name whose Service UID label names
    /// none of `services` (the UIDs of every Service of the cluster), lowest ID first (see
    /// [`HcloudLoadBalancers::list_cluster`]; `None` without a cluster name).
    ///
    /// Before deleting, list the load balancers first and the Services after, and use
    /// [`cluster::orphans`]: a Service created meanwhile then cannot own a load balancer
    /// that looks orphaned.
    pub async fn orphans(&self, services: &HashSet<String>) -> Result<Option<Vec<Orphan>>> {
        let listed = self.list_cluster().await?;
        Ok(listed
            .zip(self.cluster_name())
            .map(|(lbs, name)| cluster::orphans(&lbs, name, services)))
    }

    /// Delete `orphan` and the managed certificates labelled with its Service UID (not
    /// another cluster's). Returns whether it is gone: `false` when it has delete protection
    /// (kept).
    pub async fn delete_orphan(&self, orphan: &Orphan) -> Result<bool> {
        let lb = &orphan.lb;
        if lb.protection.delete {
            tracing::info!(
                load_balancer = lb.name,
                id = lb.id,
                "keeping the orphaned load balancer: it has delete protection"
            );
            return Ok(false);
        }
        let key = format!(
            "(orphan of cluster {})",
            self.cluster_name().unwrap_or_default()
        );
        self.applier().delete_one(&key, lb).await?;
        if let Some(uid) = &orphan.service_uid {
            let certificates: Vec<models::Certificate> = self
                .reader()
                .labelled_certificates(uid)
                .await?
                .into_iter()
                // Not another cluster's (see `labelled_certificates`); one made before the
                // cluster name was set has no cluster label but the orphan's UID.
                .filter(|c| c.kind == Some(models::CertificateType::Managed))
                .collect();
            self.applier()
                .delete_certificates(&key, &certificates)
                .await?;
        }
        Ok(true)
    }

    /// Whether a Service with `uid` exists, as the caller's view says (`None`: it cannot
    /// tell, or gave none). No request.
    fn service_exists(&self, uid: &str) -> Option<bool> {
        self.services.read().as_ref()?.exists(uid)
    }

    /// What deleting `service` (with `uid`) deletes: its own load balancers, or, when it
    /// names a shared one, its part of it (see `shared.rs`).
    async fn deletion(&self, service: &Service, uid: &str) -> Result<decide::Deletion> {
        match Annotations::of(service).is_set(annotations::keys::SHARED_LOAD_BALANCER) {
            true => self.reader().shared_deletion(uid).await,
            false => self.reader().deletion(uid).await,
        }
    }

    /// `namespace/name` of the Service with `uid`, when the caller's view knows it.
    fn service_name(&self, uid: &str) -> Option<String> {
        self.services.read().as_ref()?.name_of(uid)
    }

    fn reader(&self) -> Reader<'_> {
        Reader { lbs: self }
    }

    fn applier(&self) -> Applier<'_> {
        Applier { lbs: self }
    }

    async fn lock(&self, uid: &str) -> tokio::sync::OwnedMutexGuard<()> {
        let mutex = {
            let mut locks = self.locks.lock();
            locks.retain(|_, m| Arc::strong_count(m) > 1);
            locks.entry(uid.to_owned()).or_default().clone()
        };
        mutex.lock_owned().await
    }

    /// Release the ports the Service with `uid` still owns on shared load balancers it no
    /// longer names (its `shared-load-balancer` annotation was removed or names another), as
    /// its deletion would: their services and its label go, and a load balancer created here
    /// goes with its last owner. Only when the load balancer cache knows such a one (no
    /// request otherwise); then the API is asked by label, and each is changed under its lock.
    async fn release_elsewhere(&self, service: &Service, uid: &str) -> Result<()> {
        let reader = self.reader();
        let apply = self.applier();
        for listed in self.shared_elsewhere(service, uid).await? {
            let _locked = self.lock_name(&listed.name).await;
            let deletion = reader.shared_release(uid, vec![listed]);
            apply.carry_out_deletion(service, uid, &deletion).await?;
        }
        Ok(())
    }

    /// The shared load balancers the Service with `uid` owns ports of but no longer names
    /// (see [`Self::release_elsewhere`]).
    async fn shared_elsewhere(
        &self,
        service: &Service,
        uid: &str,
    ) -> Result<Vec<models::LoadBalancer>> {
        let named = Annotations::of(service)
            .string(annotations::keys::SHARED_LOAD_BALANCER)
            .ok()
            .flatten();
        let elsewhere = |lb: &models::LoadBalancer| Some(&lb.name) != named.as_ref();
        let key = shared::owner_key(uid);
        if !self.cache.known_with_label(&key).iter().any(elsewhere) {
            return Ok(Vec::new());
        }
        let mut listed = self.reader().list_shared_now(uid).await?;
        listed.retain(elsewhere);
        Ok(listed)
    }

    /// The lock of the shared load balancer `service` names, if it names one: its owners
    /// change it one at a time (each writes the labels as it read them). Taken after the
    /// Service's own lock, never before (no other Service waits for that one).
    async fn lock_shared(&self, service: &Service) -> Option<tokio::sync::OwnedMutexGuard<()>> {
        let name = Annotations::of(service)
            .string(annotations::keys::SHARED_LOAD_BALANCER)
            .ok()
            .flatten()?;
        Some(self.lock_name(&name).await)
    }

    /// The lock of the shared load balancer `name`. Not a UID's: a UID has no slash. Waited
    /// for with the worker's slot lent, as an action: the owner holding the lock may be
    /// waiting for a slot to go on.
    async fn lock_name(&self, name: &str) -> tokio::sync::OwnedMutexGuard<()> {
        let key = format!("shared/{name}");
        let locked = self.lock(&key);
        match self.workers.get() {
            Some(workers) => workers.waiting(locked).await,
            None => locked.await,
        }
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

    /// Ensure for a Service without a TCP port: `warning` (published first, so that it says
    /// why even when the deletion fails and is retried), no load balancer (one labelled with
    /// the Service's UID is deleted), an empty status.
    async fn ensure_without_tcp(
        &self,
        service: &Service,
        uid: &str,
        warning: &Notice,
    ) -> Result<LoadBalancerStatus> {
        let apply = self.applier();
        apply
            .publish(service, &[], std::slice::from_ref(warning))
            .await;
        let deletion = self.reader().deletion_without_tcp(uid).await?;
        if !deletion.load_balancers.is_empty() {
            tracing::info!(service = %service_key(service), "the Service has no TCP port: deleting its load balancer");
        }
        apply.carry_out_deletion(service, uid, &deletion).await?;
        Ok(LoadBalancerStatus::default())
    }
}

#[async_trait]
impl LoadBalancer for HcloudLoadBalancers {
    /// More than one update coming: the first lookup of a stale cache lists all load
    /// balancers (the others share that listing) instead of first asking for its own alone.
    fn expect_lookups(&self, services: usize) {
        if services > 1 {
            self.cache.expect_burst();
        }
    }

    fn use_workers(&self, workers: Workers) {
        if self.workers.set(workers).is_err() {
            tracing::debug!("the load balancers already wait through a worker pool");
        }
    }

    fn use_services(&self, services: Arc<dyn KnownServices>) {
        *self.services.write() = Some(services);
    }

    /// The Secret of `http-certificate-secret`, whatever the port protocols (a Secret named
    /// by a Service that uploads nothing yet costs only a sync when it changes).
    fn secrets_of(&self, service: &Service) -> Vec<String> {
        service
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(annotations::keys::HTTP_CERTIFICATE_SECRET))
            .map(|name| name.trim())
            .filter(|name| !name.is_empty())
            .map(|name| vec![name.to_owned()])
            .unwrap_or_default()
    }

    fn use_secrets(&self, secrets: Arc<dyn cloud_provider::secrets::TlsSecrets>) {
        *self.secrets.write() = Some(secrets);
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
        // Asked of the API, never answered from the cache: "none" here releases the
        // Service (its finalizer goes), so it must not come from a listing that missed one.
        let listed = match annotations.is_set(annotations::keys::SHARED_LOAD_BALANCER) {
            true => self.reader().list_shared_now(uid).await?,
            false => self.reader().list_labelled_now(uid).await?,
        };
        let Some(lb) = listed.into_iter().next() else {
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
        // Before the named one's lock: one shared load balancer's lock at a time.
        self.release_elsewhere(service, uid).await?;
        let _shared = self.lock_shared(service).await;
        // Beyond the official CCM: no TCP port, no load balancer (an empty status, no retry).
        if let Some(warning) = desired::no_tcp_port(service) {
            return self
                .ensure_without_tcp(service, uid, &warning)
                .await
                .map(Outcome::Done);
        }
        let decision = decide::decide(self.reader().read(service, nodes).await?)?;
        let mut notices = decision.notices.clone();
        let apply = self.applier();
        let result = apply.carry_out(service, decision).await;
        match &result {
            Ok((_, more)) => notices.extend(more.iter().cloned()),
            // The remembered certificate may be what failed (deleted by hand): look it up
            // again next time.
            Err(_) => self.managed_certificates.forget(uid),
        }
        apply.publish(service, nodes, &notices).await;
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
        let read = self.reader();
        let desired = read.desired(service, nodes).await?;
        let _serialised = self.lock(uid).await;
        let _shared = self.lock_shared(service).await;
        let (found, owners) = read.find_for(uid, &desired, false).await?;
        let update = decide::decide_update(&service_key(service), &desired, found, &owners)?;
        let apply = self.applier();
        let (_, notices) = apply
            .run_rounds(
                service,
                &update.desired,
                update.lb,
                &update.rounds,
                &StandIns::default(),
            )
            .await?;
        apply.publish(service, nodes, &notices).await;
        Ok(Outcome::Done(()))
    }

    async fn ensure_load_balancer_deleted(
        &self,
        _cluster_name: &str,
        service: &Service,
    ) -> Result<Outcome<()>> {
        self.operations.count(lbs_op::ENSURE_LOAD_BALANCER_DELETED);
        let uid = Self::uid(service)?;
        let _serialised = self.lock(uid).await;
        let _shared = self.lock_shared(service).await;
        let deletion = self.deletion(service, uid).await?;
        self.applier()
            .carry_out_deletion(service, uid, &deletion)
            .await?;
        Ok(Outcome::Done(()))
    }

    async fn plan_load_balancer_deleted(
        &self,
        _cluster_name: &str,
        service: &Service,
    ) -> Result<LoadBalancerPlan> {
        let uid = Self::uid(service)?;
        Ok(self.deletion(service, uid).await?.to_plan())
    }

    async fn plan_load_balancer(
        &self,
        _cluster_name: &str,
        service: &Service,
        nodes: &[Arc<Node>],
    ) -> Result<LoadBalancerPlan> {
        if let Some(warning) = desired::no_tcp_port(service) {
            // As ensure: the Warning, the deletion of a load balancer it has, an empty status.
            let uid = Self::uid(service)?;
            let mut plan = self.reader().deletion_without_tcp(uid).await?.to_plan();
            if let Some(reason) = warning.reason {
                plan.warnings
                    .insert(0, Warning::new(reason, warning.message));
            }
            plan.status = Some(LoadBalancerStatus::default());
            return Ok(plan);
        }
        // What the running CCM knows of the target servers from its Node lookups (whether
        // each has a public IPv4), a one-shot plan learns from one listing, shared by every
        // Service's plan.
        if let Some(servers) = &self.servers {
            servers.all_servers().await.map_err(|err| {
                crate::errors::categorize("listing the servers of the load balancer targets", err)
            })?;
        }
        let uid = Self::uid(service)?;
        let released = self.shared_elsewhere(service, uid).await?;
        let released = self.reader().shared_release(uid, released).to_plan();
        let read = self.reader().read(service, nodes).await?;
        let mut plan = decide::decide(read)?.to_plan();
        plan.changes.splice(0..0, released.changes);
        plan.writes.splice(0..0, released.writes);
        plan.warnings.splice(0..0, released.warnings);
        Ok(plan)
    }
}
