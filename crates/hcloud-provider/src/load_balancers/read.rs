//! What the decisions are made of, read from the API or from the caches: the Service's load
//! balancer (by label, else by name), the Robot servers of its Robot Nodes, its certificates
//! and the load balancer type it is created with or changed to.
//!
//! Nothing here changes the cloud. The only writes are into this process's own memory: the
//! load balancer cache and the remembered managed certificate of a Service.

use parking_lot::Mutex;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use cloud_provider::Error;
use cloud_provider::provider::Result;
use hcloud_api::api::params::{ListCertificatesParams, ListParams};
use hcloud_api::models::{self, Certificate};
use k8s_openapi::api::core::v1::{Node, Service};

use super::HcloudLoadBalancers;
use super::annotations::{Annotations, keys};
use super::cache::Lookup;
use super::cluster::{self, Claim};
use super::decide::{self, Deletion, Takeover};
use super::desired::{Certificates, Desired, Notice, RobotView};
use super::naming::{SERVICE_UID_LABEL, service_key, uid_selector};
use super::shared;
use super::steps::reasons;
use super::tls_secret::{self, SecretCertificate};
use crate::errors::categorize;
use crate::metrics::op::{certificates as cert_op, load_balancer_ops as lb_op};

/// What ensure's decision is made of (see [`decide::decide`]).
#[derive(Clone, Debug)]
pub(super) struct Read {
    /// The Service, as `namespace/name` (for messages).
    pub service: String,
    /// The desired state: Robot targets chosen, uploaded certificates resolved to IDs.
    pub desired: Desired,
    /// What the lookup of the Service's load balancer found.
    pub found: Found,
    /// The Service's managed certificate, when it asks for one (not read when the load
    /// balancer is refused).
    pub managed: Option<ManagedRead>,
    /// The load balancer type created or changed to, when one is.
    pub lb_type: Option<TypeRead>,
    /// A shared load balancer's other owners, as the caller's view of the Services knows
    /// them (empty for a load balancer of its own).
    pub owners: shared::Owners,
    /// When the read was made (a type's deprecation is compared with it).
    pub now: DateTime<Utc>,
}

/// What the Service's load balancer lookup found.
#[derive(Clone, Debug, Default)]
pub(super) struct Found {
    /// The load balancer to use (lowest ID when several carry the UID).
    pub lb: Option<models::LoadBalancer>,
    /// Other load balancers labelled with the same UID.
    pub duplicates: Vec<models::LoadBalancer>,
    /// Notices of the lookup (a load balancer of another Service, duplicates).
    pub notices: Vec<Notice>,
}

impl Found {
    /// The notice refusing the load balancer the lookup found by name or UID: it belongs to
    /// another Service or cluster (nothing is changed then).
    pub fn refusal(&self) -> Option<&Notice> {
        if self.lb.is_some() {
            return None;
        }
        self.notices.iter().find(|n| {
            n.reason == Some(reasons::LOAD_BALANCER_OWNED_BY_OTHER_SERVICE)
                || n.reason == Some(reasons::LOAD_BALANCER_OWNED_BY_OTHER_CLUSTER)
                || n.reason == Some(reasons::SHARED_LOAD_BALANCER_REFUSED)
        })
    }
}

/// The certificate this CCM makes for the Service (managed, or uploaded from its Secret) as
/// read.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum ManagedRead {
    /// Issued for the wanted domains, or uploaded from the Secret's current content, as this
    /// process remembers it (no request).
    Remembered(i64),
    /// Every managed certificate labelled with the Service's UID, lowest ID first.
    Listed(Vec<Certificate>),
    /// The Secret's content, and every certificate uploaded from a Secret labelled with the
    /// Service's UID, lowest ID first.
    FromSecret {
        /// What the Secret asks for.
        want: Box<SecretCertificate>,
        /// The uploads so far.
        listed: Vec<Certificate>,
    },
}

/// A load balancer type as the API (or the type cache) lists it.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct TypeRead {
    /// The name (or ID) asked for.
    pub name: String,
    /// The type; `None`: the API does not offer it.
    pub found: Option<Arc<models::LoadBalancerType>>,
}

/// What a certificate this CCM makes for a Service is made of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum MadeOf {
    /// A managed certificate's domains (as compared, see [`decide::domain_set`]).
    Domains(BTreeSet<String>),
    /// The digest of a Secret's content ([`super::tls_secret::digest`]).
    Secret(String),
}

impl MadeOf {
    /// The managed certificate for `domains`.
    pub fn domains(domains: &[String]) -> Self {
        Self::Domains(decide::domain_set(domains))
    }
}

/// The certificate this CCM made for each Service (by UID) seen by this process (issued, or
/// uploaded), with what it is made of, so that a no-op ensure can tell whether its HTTPS
/// services carry it without a request (and a change of the domains or the Secret is looked
/// up).
#[derive(Debug, Default)]
pub(super) struct ManagedCertificates(Mutex<HashMap<String, (i64, MadeOf)>>);

impl ManagedCertificates {
    fn map(&self) -> parking_lot::MutexGuard<'_, HashMap<String, (i64, MadeOf)>> {
        self.0.lock()
    }

    /// The certificate remembered for the Service with `uid`, when it is made of `made_of`.
    pub fn get(&self, uid: &str, made_of: &MadeOf) -> Option<i64> {
        self.map()
            .get(uid)
            .filter(|(_, made)| made == made_of)
            .map(|(id, _)| *id)
    }

    /// Remember `id` as the certificate of the Service with `uid`, made of `made_of`.
    pub fn remember(&self, uid: &str, id: i64, made_of: MadeOf) {
        self.map().insert(uid.to_owned(), (id, made_of));
    }

    /// Look the certificate of the Service with `uid` up again next time.
    pub fn forget(&self, uid: &str) {
        self.map().remove(uid);
    }
}

/// The reads of the load balancers (see the module docs).
pub(super) struct Reader<'a> {
    pub lbs: &'a HcloudLoadBalancers,
}

impl Reader<'_> {
    /// Everything ensure (and `plan`) decides on for `service` with `nodes`.
    pub async fn read(&self, service: &Service, nodes: &[Arc<Node>]) -> Result<Read> {
        let uid = HcloudLoadBalancers::uid(service)?;
        let mut desired = self.desired(service, nodes).await?;
        let (found, owners) = self.find_for(uid, &desired, true).await?;
        // A refused load balancer is left alone: nothing more to read.
        let refused = found.refusal().is_some();
        let managed = match refused {
            true => None,
            false => self.certificates(service, &mut desired).await?,
        };
        let type_name = match &found.lb {
            _ if refused => None,
            Some(lb) => desired.type_change(lb).map(str::to_owned),
            // Without a placement nothing is created (the decision says why): no lookup.
            None => desired
                .placement
                .is_some()
                .then(|| desired.create_type.clone()),
        };
        let lb_type = match type_name {
            Some(name) => Some(self.load_balancer_type(&name).await?),
            None => None,
        };
        Ok(Read {
            service: service_key(service),
            desired,
            found,
            managed,
            lb_type,
            owners,
            now: Utc::now(),
        })
    }

    /// The Service's load balancer ([`Reader::find`]), or the shared one it names
    /// ([`Reader::find_shared`]) with its other owners.
    pub async fn find_for(
        &self,
        uid: &str,
        desired: &Desired,
        adopt_by_name: bool,
    ) -> Result<(Found, shared::Owners)> {
        if desired.shared.is_none() {
            return Ok((
                self.find(uid, &desired.name, adopt_by_name).await?,
                shared::Owners::new(),
            ));
        }
        let found = self.find_shared(uid, &desired.name).await?;
        let owners = found
            .lb
            .as_ref()
            .map(|lb| self.other_owners(lb, uid))
            .unwrap_or_default();
        Ok((found, owners))
    }

    /// The owners of the shared load balancer `lb` other than the Service with `uid`, as the
    /// caller's view of the Services knows them (no request).
    fn other_owners(&self, lb: &models::LoadBalancer, uid: &str) -> shared::Owners {
        shared::owners(&lb.labels)
            .into_keys()
            .filter(|owner| owner != uid)
            .map(|owner| {
                let known = (
                    self.lbs.service_exists(&owner),
                    self.lbs.service_name(&owner),
                );
                (owner, known)
            })
            .collect()
    }

    /// The shared load balancer `name` (from the cache, as every lookup), refused when it is
    /// a Service's own (labelled `hcloud-ccm/service-uid`), another cluster's, or when the
    /// Service with `uid` has a load balancer of its own.
    pub async fn find_shared(&self, uid: &str, name: &str) -> Result<Found> {
        self.lbs.operations.count(lb_op::GET_BY_NAME);
        let lookup = self.lookup(uid, Some(name)).await?;
        let mut found = Found::default();
        let refuse = |why: String| {
            Notice::warn(
                reasons::SHARED_LOAD_BALANCER_REFUSED,
                format!("{}: {why}; nothing was changed", keys::SHARED_LOAD_BALANCER),
            )
        };
        if let Some(own) = lookup.labelled.first() {
            found.notices.push(refuse(format!(
                "this Service has a load balancer of its own, {:?} (ID {}, label {SERVICE_UID_LABEL}); it cannot share {name:?} while it has it (delete and re-create the Service to move it)",
                own.name, own.id
            )));
            return Ok(found);
        }
        let Some(lb) = lookup.by_name else {
            return Ok(found);
        };
        if !self.claim(&lb.labels).usable() {
            found
                .notices
                .push(owned_by_other_cluster(&lb, &self.claim(&lb.labels)));
            return Ok(found);
        }
        if let Some(owner) = lb.labels.get(SERVICE_UID_LABEL) {
            found.notices.push(refuse(format!(
                "load balancer {name:?} (ID {}) is the own load balancer of the Service with UID {owner} (label {SERVICE_UID_LABEL}), not a shared one; name another",
                lb.id
            )));
            return Ok(found);
        }
        found.lb = Some(lb);
        Ok(found)
    }

    /// The shared load balancers the Service with `uid` owns ports of, as the API lists them
    /// now (one request by label selector, never the cache), of this cluster.
    pub async fn list_shared_now(&self, uid: &str) -> Result<Vec<models::LoadBalancer>> {
        self.lbs.operations.count(lb_op::GET_BY_K8S_SERVICE_UID);
        let mut listed = self.list_labelled_by(shared::owner_selector(uid)).await?;
        listed.retain(|lb| self.claim(&lb.labels).usable());
        listed.sort_by_key(|lb| lb.id);
        Ok(listed)
    }

    /// What deleting the Service with `uid` does to the shared load balancers it owns ports
    /// of: each is deleted with its last owner when this CCM created it (kept when protected),
    /// else the Service's services and label go (see [`shared::release`]); the Service's
    /// managed or uploaded certificates go too.
    pub async fn shared_deletion(&self, uid: &str) -> Result<Deletion> {
        let mut deletion = self.shared_release(uid, self.list_shared_now(uid).await?);
        if deletion.kept.is_empty() {
            deletion.certificates = decide::managed_of(uid, self.labelled_certificates(uid).await?);
        }
        Ok(deletion)
    }

    /// What the Service with `uid` leaving the shared load balancers `lbs` does to them (see
    /// [`shared::release`]); no certificate.
    pub fn shared_release(&self, uid: &str, lbs: Vec<models::LoadBalancer>) -> Deletion {
        let mut deletion = Deletion::default();
        for lb in lbs {
            let others = self.other_owners(&lb, uid);
            match shared::release(&lb, uid, &others) {
                None if lb.protection.delete => deletion.kept.push(lb),
                None => deletion.load_balancers.push(lb),
                Some(steps) => deletion.released.push((lb, steps)),
            }
        }
        deletion
    }

    /// The desired state, with the IP targets of Robot Nodes (the Robot list is read, from
    /// its cache, when a selected Node is a Robot Node: a failure fails the reconcile before
    /// any change) and the cloud targets whose server the server cache last saw without a
    /// public IPv4 reached privately or left out (no request).
    pub async fn desired(&self, service: &Service, nodes: &[Arc<Node>]) -> Result<Desired> {
        let lbs = self.lbs;
        lbs.operations.count(lb_op::SERVICE_OPTS_EXTRACT);
        let mut desired = Desired::new(
            service,
            &Annotations::of(service),
            &lbs.settings,
            lbs.network_id,
            nodes,
        )
        .map_err(|why| Error::invalid_input(format!("service {}: {why}", service_key(service))))?;
        if !lbs.robot.enabled() {
            desired.choose_robot_targets(RobotView::Off);
        } else if !lbs.robot.has_client() {
            desired.choose_robot_targets(RobotView::WithoutClient);
        } else if desired.robot_nodes.is_empty() {
            // No Robot Node is selected: no IP target stays, whatever Robot lists.
            desired.choose_robot_targets(RobotView::Listed(&[]));
        } else {
            let listed = lbs.robot.servers().await.map_err(|err| {
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
        if let Some(servers) = &lbs.servers {
            desired.reach_servers_without_public_ipv4(|id| servers.last_seen(id));
        }
        Ok(desired)
    }

    /// Every load balancer labelled with `uid`, lowest ID first, as the API lists them now
    /// (one request by label selector, never the cache); with a cluster name, those of
    /// other clusters are left out (never reported, changed or deleted).
    pub async fn list_labelled_now(&self, uid: &str) -> Result<Vec<models::LoadBalancer>> {
        self.lbs.operations.count(lb_op::GET_BY_K8S_SERVICE_UID);
        let mut labelled = self
            .lbs
            .cache
            .labelled_now(uid)
            .await
            .map_err(|err| categorize(labelled_lookup(uid), err))?;
        labelled.retain(|lb| self.claim(&lb.labels).usable());
        Ok(labelled)
    }

    /// Whom `labels` say an object belongs to, for this cluster (see `cluster.rs`).
    fn claim(&self, labels: &models::Labels) -> Claim {
        cluster::claim(labels, self.lbs.settings.cluster_name.as_deref())
    }

    async fn lookup(&self, uid: &str, name: Option<&str>) -> Result<Lookup> {
        self.lbs
            .cache
            .lookup(uid, name)
            .await
            .map_err(|err| categorize(labelled_lookup(uid), err))
    }

    /// The Service's load balancer.
    ///
    /// Only a load balancer labelled with the Service's UID is the Service's own. Several with
    /// the UID: the lowest ID is used and a `DuplicateLoadBalancers` warning names the others
    /// (the official CCM refuses to act instead). Ensure (`adopt_by_name`) may also take over a
    /// load balancer with the Service's name that carries no UID label (made by hand or by a
    /// very old CCM; the label is written as the first step), and one labelled for a Service
    /// that no longer exists in this cluster (a re-created Service; see [`decide::takeover`]),
    /// but never one labelled for a Service that exists, or that may be another cluster's:
    /// that is an error and a `LoadBalancerOwnedByOtherService` warning (the official CCM
    /// would relabel it).
    pub async fn find(&self, uid: &str, name: &str, adopt_by_name: bool) -> Result<Found> {
        self.lbs.operations.count(lb_op::GET_BY_K8S_SERVICE_UID);
        let lookup = self.lookup(uid, adopt_by_name.then_some(name)).await?;
        // Another cluster's load balancer with this UID (a cluster restored from another's
        // backup) is not this Service's: refused, never changed.
        let (labelled, foreign): (Vec<_>, Vec<_>) = lookup
            .labelled
            .into_iter()
            .partition(|lb| self.claim(&lb.labels).usable());
        let mut labelled = labelled.into_iter();
        let mut found = Found {
            lb: labelled.next(),
            duplicates: labelled.collect(),
            notices: Vec::new(),
        };
        if found.lb.is_none()
            && let Some(lb) = foreign.first()
        {
            found
                .notices
                .push(owned_by_other_cluster(lb, &self.claim(&lb.labels)));
            return Ok(found);
        }
        if let Some(lb) = &found.lb {
            if !found.duplicates.is_empty() {
                let others: Vec<String> = found
                    .duplicates
                    .iter()
                    .map(|d| format!("{:?} (ID {})", d.name, d.id))
                    .collect();
                found.notices.push(Notice::warn(
                    reasons::DUPLICATE_LOAD_BALANCERS,
                    format!(
                        "several load balancers carry the label {}: using {:?} (ID {}), the lowest ID; not managed: {}. Deleting the Service deletes all of them",
                        uid_selector(uid),
                        lb.name,
                        lb.id,
                        others.join(", ")
                    ),
                ));
            }
            return Ok(found);
        }
        if !adopt_by_name {
            return Ok(found);
        }
        self.lbs.operations.count(lb_op::GET_BY_NAME);
        let by_name = lookup.by_name;
        if let Some(lb) = &by_name
            && !self.claim(&lb.labels).usable()
        {
            found
                .notices
                .push(owned_by_other_cluster(lb, &self.claim(&lb.labels)));
            return Ok(found);
        }
        if let Some(lb) = &by_name
            && shared::is_shared(&lb.labels)
        {
            found.notices.push(Notice::warn(
                reasons::SHARED_LOAD_BALANCER_REFUSED,
                format!(
                    "load balancer {name:?} (ID {}) is shared (label {}): a Service uses it by naming it in the annotation {}, not as a load balancer of its own; nothing was changed",
                    lb.id,
                    shared::SHARED_LABEL,
                    keys::SHARED_LOAD_BALANCER
                ),
            ));
            return Ok(found);
        }
        match by_name {
            Some(lb) => match lb.labels.get(SERVICE_UID_LABEL) {
                Some(owner) if owner != uid => {
                    // Asked of the caller's view of the Services (no request), and only here.
                    let exists = self.lbs.service_exists(owner);
                    let cluster = self.lbs.settings.cluster_name.as_deref();
                    match decide::takeover(&lb, uid, owner, cluster, exists) {
                        Takeover::Adopt(notice) => {
                            found.notices.push(notice);
                            found.lb = Some(lb);
                        }
                        Takeover::Refuse(notice) => found.notices.push(notice),
                    }
                    Ok(found)
                }
                _ => {
                    found.lb = Some(lb);
                    Ok(found)
                }
            },
            None => Ok(found),
        }
    }

    /// What deleting the Service with `uid` deletes: every load balancer labelled with the
    /// UID as the API lists them now (one request by label selector, never the cache: the
    /// Service is released once this finds none), and, when all of them go, the managed
    /// certificates this CCM (or the official one) created for it.
    pub async fn deletion(&self, uid: &str) -> Result<Deletion> {
        let mut deletion = Deletion::of(self.list_labelled_now(uid).await?);
        if deletion.deletes_certificates() {
            deletion.certificates = decide::managed_of(uid, self.labelled_certificates(uid).await?);
        }
        Ok(deletion)
    }

    /// What ensuring a Service without a TCP port (see [`super::desired::no_tcp_port`])
    /// deletes: the load balancers labelled with `uid`, as the deletion finds them. Whether
    /// there is one at all is answered by the cache, as ensure's own lookup (no request of
    /// its own when it is fresh); only then is the API asked by label, for what is deleted.
    pub async fn deletion_without_tcp(&self, uid: &str) -> Result<Deletion> {
        if self.find(uid, "", false).await?.lb.is_none() {
            return Ok(Deletion::default());
        }
        self.deletion(uid).await
    }

    /// Resolve the uploaded certificates of `desired` to IDs (into its services), and read
    /// its managed certificate or its Secret, when it asks for one: the certificate
    /// remembered, else the ones labelled with the Service's UID.
    async fn certificates(
        &self,
        service: &Service,
        desired: &mut Desired,
    ) -> Result<Option<ManagedRead>> {
        self.resolve_port_certificates(desired).await?;
        match &desired.certificates {
            Certificates::Unset => Ok(None),
            Certificates::Uploaded(refs) => {
                let ids = self
                    .resolve_uploaded(refs, |_| keys::HTTP_CERTIFICATES.to_owned())
                    .await?;
                desired.set_certificates(&ids);
                Ok(None)
            }
            Certificates::Managed(want) => {
                // Looked up once per Service, process and set of domains, so a no-op ensure
                // costs no certificate request, and edited domains are looked up.
                if let Some(id) = self
                    .lbs
                    .managed_certificates
                    .get(&desired.uid, &MadeOf::domains(&want.domains))
                {
                    return Ok(Some(ManagedRead::Remembered(id)));
                }
                let listed = self
                    .made_certificates(
                        &desired.uid,
                        lb_op::RECONCILE_MANAGED_CERTIFICATE,
                        |c| c.kind == Some(models::CertificateType::Managed),
                        |c| {
                            decide::same_domains(c, &want.domains)
                                && matches!(decide::issuance(c), Ok(true))
                        },
                        MadeOf::domains(&want.domains),
                    )
                    .await?;
                Ok(Some(ManagedRead::Listed(listed)))
            }
            Certificates::Secret(name) => {
                let want = self.secret(service, &desired.uid, name).await?;
                let made_of = MadeOf::Secret(want.digest.clone());
                if let Some(id) = self.lbs.managed_certificates.get(&desired.uid, &made_of) {
                    return Ok(Some(ManagedRead::Remembered(id)));
                }
                let listed = self
                    .made_certificates(
                        &desired.uid,
                        lb_op::RECONCILE_SECRET_CERTIFICATE,
                        tls_secret::from_secret,
                        |c| want.made(c),
                        made_of,
                    )
                    .await?;
                Ok(Some(ManagedRead::FromSecret {
                    want: Box::new(want),
                    listed,
                }))
            }
        }
    }

    /// The certificates of the kind `kind` this CCM made for the Service with `uid` (one
    /// listing by its label, counted as `op`), lowest ID first. When the only one is
    /// `current`, it is remembered as made of `made_of`: only when nothing is left to retire
    /// (see `decide::managed_certificate`).
    async fn made_certificates(
        &self,
        uid: &str,
        op: &'static str,
        kind: impl Fn(&Certificate) -> bool,
        current: impl Fn(&Certificate) -> bool,
        made_of: MadeOf,
    ) -> Result<Vec<Certificate>> {
        self.lbs.operations.count(op);
        let mut listed: Vec<Certificate> = self
            .labelled_certificates(uid)
            .await?
            .into_iter()
            .filter(|c| kind(c))
            .collect();
        listed.sort_by_key(|c| c.id);
        if let [cert] = listed.as_slice()
            && current(cert)
        {
            self.lbs
                .managed_certificates
                .remember(uid, cert.id, made_of);
        }
        Ok(listed)
    }

    /// The content of the Secret `name` of `service`'s namespace, through the caller's
    /// reader (`use_secrets`); an error naming the annotation when there is no reader, no
    /// such Secret, or the Secret is not a usable TLS Secret.
    async fn secret(&self, service: &Service, uid: &str, name: &str) -> Result<SecretCertificate> {
        let namespace = service.metadata.namespace.as_deref().unwrap_or("default");
        let key = keys::HTTP_CERTIFICATE_SECRET;
        let Some(secrets) = self.lbs.secrets.read().clone() else {
            return Err(Error::invalid_input(format!(
                "{key}: Secret {namespace}/{name} is not read: this controller reads no Secrets (turned off in its settings)"
            )));
        };
        let content = secrets.tls_secret(namespace, name).await?.ok_or_else(|| {
            Error::invalid_input(format!("{key}: Secret {namespace}/{name} does not exist"))
        })?;
        Ok(SecretCertificate::new(uid, namespace, name, content))
    }

    /// Resolve the uploaded certificates each https port names for itself
    /// ([`Desired::port_certificates`]) and put their IDs into those services; a name used by
    /// several ports is looked up once.
    async fn resolve_port_certificates(&self, desired: &mut Desired) -> Result<()> {
        let names: BTreeSet<&String> = desired
            .port_certificates
            .values()
            .flat_map(|p| &p.refs)
            .collect();
        let names: Vec<String> = names.into_iter().cloned().collect();
        if names.is_empty() {
            return Ok(());
        }
        // A missing certificate is reported under the annotations of the ports that name it.
        let keys_naming = |name: &str| {
            let keys: BTreeSet<&str> = desired
                .port_certificates
                .values()
                .filter(|p| p.refs.iter().any(|r| r == name))
                .map(|p| p.key.as_str())
                .collect();
            keys.into_iter().collect::<Vec<_>>().join(", ")
        };
        let ids = self.resolve_uploaded(&names, keys_naming).await?;
        let id_of: BTreeMap<&String, i64> = names.iter().zip(ids).collect();
        for service in &mut desired.services {
            if let Some(port) = desired.port_certificates.get(&service.listen_port)
                && let Some(http) = &mut service.http
            {
                http.certificates = Some(
                    port.refs
                        .iter()
                        .filter_map(|r| id_of.get(r).copied())
                        .collect(),
                );
            }
        }
        Ok(())
    }

    /// Resolve uploaded certificate names to IDs (IDs need no request). A name that does not
    /// exist fails the sync, naming the annotation(s) `key_naming` gives for it.
    async fn resolve_uploaded(
        &self,
        refs: &[String],
        key_naming: impl Fn(&str) -> String,
    ) -> Result<Vec<i64>> {
        let mut ids = Vec::with_capacity(refs.len());
        for reference in refs {
            if let Ok(id) = reference.parse::<i64>() {
                ids.push(id);
                continue;
            }
            self.lbs
                .operations
                .count(lb_op::SERVICE_OPTS_RESOLVE_CERTS_BY_NAME_OR_ID);
            self.lbs.operations.count(cert_op::GET_BY_NAME_OR_ID);
            let found = self
                .lbs
                .client
                .certificates()
                .get_by_name(reference)
                .await
                .map_err(|err| categorize(format!("looking up certificate {reference:?}"), err))?;
            match found {
                Some(cert) => ids.push(cert.id),
                // It may be uploaded later: retried until it is.
                None => {
                    return Err(Error::rejected(format!(
                        "{}: certificate {reference:?} does not exist",
                        key_naming(reference)
                    )));
                }
            }
        }
        Ok(ids)
    }

    /// The certificates labelled with the Service's UID (with a cluster name: not another
    /// cluster's).
    pub async fn labelled_certificates(&self, uid: &str) -> Result<Vec<Certificate>> {
        self.lbs.operations.count(cert_op::GET_BY_LABEL);
        let mut certificates = self
            .lbs
            .client
            .certificates()
            .list_all(&ListCertificatesParams::label_selector(uid_selector(uid)))
            .await
            .map_err(|err| {
                categorize(
                    format!("listing certificates labelled {}", uid_selector(uid)),
                    err,
                )
            })?;
        certificates.retain(|c| self.claim(&c.labels).usable());
        Ok(certificates)
    }

    /// The load balancer type `name` (from the type cache when the provider has one).
    async fn load_balancer_type(&self, name: &str) -> Result<TypeRead> {
        let what = || format!("looking up load balancer type {name:?}");
        let found = match &self.lbs.lb_types {
            Some(cache) => cache
                .get(name)
                .await
                .map_err(|err| categorize(what(), err))?,
            None => self
                .lbs
                .client
                .load_balancer_types()
                .get_by_name(name)
                .await
                .map_err(|err| categorize(what(), err))?
                .map(Arc::new),
        };
        Ok(TypeRead {
            name: name.to_owned(),
            found,
        })
    }

    /// Every load balancer labelled with this cluster's name, as the API lists them now (one
    /// request by the cluster label). `None` without a cluster name.
    pub async fn list_cluster(&self) -> Result<Option<Vec<models::LoadBalancer>>> {
        let Some(selector) = cluster::selector(self.lbs.settings.cluster_name.as_deref()) else {
            return Ok(None);
        };
        self.list_labelled_by(selector).await.map(Some)
    }

    /// Every load balancer `selector` selects, as the API lists them now (one request).
    async fn list_labelled_by(&self, selector: String) -> Result<Vec<models::LoadBalancer>> {
        self.lbs
            .client
            .load_balancers()
            .list_all(&ListParams::label_selector(selector.clone()))
            .await
            .map_err(|err| {
                categorize(
                    format!("listing the load balancers labelled {selector}"),
                    err,
                )
            })
    }
}

/// The notice refusing `lb`, labelled for another cluster (`claim`).
fn owned_by_other_cluster(lb: &models::LoadBalancer, claim: &Claim) -> Notice {
    let other = match claim {
        Claim::Other(name) => name.as_str(),
        Claim::Ours | Claim::Unclaimed => "",
    };
    Notice::warn(
        reasons::LOAD_BALANCER_OWNED_BY_OTHER_CLUSTER,
        format!(
            "load balancer {:?} (ID {}) belongs to the cluster {other:?} (label {}), not to this one; it is not changed. Choose another name with the annotation {}; if the other cluster is gone, change that label to hand it over",
            lb.name,
            lb.id,
            cluster::CLUSTER_NAME_LABEL,
            keys::NAME
        ),
    )
}

fn labelled_lookup(uid: &str) -> String {
    format!(
        "looking up the load balancers labelled {}",
        uid_selector(uid)
    )
}
