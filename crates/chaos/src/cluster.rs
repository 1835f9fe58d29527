//! The cluster side of a schedule: servers in the simulator with the Nodes their kubelets
//! register, LoadBalancer Services, and the clean-up that lets the next schedule share the
//! control plane.
//!
//! Nodes are registered as a kubelet with `--cloud-provider=external` does it (the
//! uninitialized taint, a Hostname address) with a pod CIDR from the cluster CIDR, as
//! kube-controller-manager's IPAM would give it. A Node is Ready while its server runs and its
//! kubelet reports; a stopped kubelet (or a server powered off or deleted) turns it `Unknown`
//! at once, as the node lifecycle controller of kube-controller-manager would after its grace
//! period.

use parking_lot::Mutex;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use anyhow::{Context as _, bail};
use hcloud_sim::{AdminClient, ServerSeed};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::eventlog::EventLog;
use crate::invariants::{CLUSTER_CIDR, Snapshot};

/// The namespace of the schedules' Services.
pub const NAMESPACE: &str = "chaos";
/// The CCM's ServiceAccount (in `kube-system`), bound to the shipped ClusterRole.
pub const CCM_ACCOUNT: &str = "hcloud-cloud-controller-manager";
/// The shipped RBAC of the CCM.
const RBAC: &str = include_str!("../../../deploy/rbac.yaml");

/// Creates the namespace and the CCM's ServiceAccount, ClusterRole and binding from
/// `deploy/rbac.yaml` (once per control plane).
pub async fn prepare(kube: &kube::Client) -> anyhow::Result<()> {
    kube_harness::ensure_namespace(kube, NAMESPACE).await?;
    let documents = serde_yaml_ng::Deserializer::from_str(RBAC)
        .map(|document| serde::Deserialize::deserialize(document).context("deploy/rbac.yaml"))
        .collect::<anyhow::Result<Vec<serde_json::Value>>>()?;
    for value in documents {
        let created = match value["kind"].as_str() {
            Some("ServiceAccount") => {
                Api::<ServiceAccount>::namespaced(kube.clone(), "kube-system")
                    .create(&PostParams::default(), &serde_json::from_value(value)?)
                    .await
                    .map(drop)
            }
            Some("ClusterRole") => Api::<ClusterRole>::all(kube.clone())
                .create(&PostParams::default(), &serde_json::from_value(value)?)
                .await
                .map(drop),
            Some("ClusterRoleBinding") => Api::<ClusterRoleBinding>::all(kube.clone())
                .create(&PostParams::default(), &serde_json::from_value(value)?)
                .await
                .map(drop),
            other => bail!("deploy/rbac.yaml: unexpected kind {other:?}"),
        };
        match created {
            Ok(()) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(e) => return Err(e).context("applying deploy/rbac.yaml"),
        }
    }
    Ok(())
}

#[derive(Debug, Clone)]
struct ServerState {
    id: i64,
    running: bool,
    kubelet: bool,
    deleted: bool,
    /// The labels its kubelet registers the Node with.
    labels: BTreeMap<String, String>,
}

/// Servers, Nodes and Services of one schedule.
pub struct Cluster {
    kube: kube::Client,
    admin: AdminClient,
    network: i64,
    log: EventLog,
    servers: BTreeMap<String, ServerState>,
    next_pod_cidr: u32,
    /// Nodes the runner deleted itself (the deletion invariant ignores them).
    runner_deleted: Arc<Mutex<BTreeSet<String>>>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("network", &self.network)
            .field("servers", &self.servers)
            .finish_non_exhaustive()
    }
}

fn is_not_found(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 404)
}

impl Cluster {
    /// A cluster over the simulator's network `network`.
    pub fn new(kube: kube::Client, admin: AdminClient, network: i64, log: EventLog) -> Self {
        Cluster {
            kube,
            admin,
            network,
            log,
            servers: BTreeMap::new(),
            next_pod_cidr: 1,
            runner_deleted: Arc::new(Mutex::new(BTreeSet::new())),
        }
    }

    /// The Nodes the runner deleted and whose deletion has not been seen yet.
    pub fn runner_deleted(&self) -> Arc<Mutex<BTreeSet<String>>> {
        self.runner_deleted.clone()
    }

    fn nodes(&self) -> Api<Node> {
        Api::all(self.kube.clone())
    }

    fn services(&self) -> Api<Service> {
        Api::namespaced(self.kube.clone(), NAMESPACE)
    }

    fn server(&mut self, name: &str) -> anyhow::Result<&mut ServerState> {
        self.servers
            .get_mut(name)
            .with_context(|| format!("no server {name}"))
    }

    /// A new running server in the network, and its Node.
    pub async fn add_node(
        &mut self,
        name: &str,
        labels: &BTreeMap<String, String>,
    ) -> anyhow::Result<()> {
        let server = self
            .admin
            .create_server(ServerSeed::new(name).network(self.network))
            .await?;
        let id = server["id"].as_i64().context("the new server has no id")?;
        self.servers.insert(
            name.to_owned(),
            ServerState {
                id,
                running: true,
                kubelet: true,
                deleted: false,
                labels: labels.clone(),
            },
        );
        self.register(name).await
    }

    /// What a kubelet does on its first start: the Node with the uninitialized taint, a
    /// Hostname address and its readiness; the pod CIDR is the next free one.
    pub async fn register(&mut self, name: &str) -> anyhow::Result<()> {
        let labels = self.server(name)?.labels.clone();
        let (net, _) = CLUSTER_CIDR;
        let [a, b, _, _] = net.octets();
        let pod_cidr = format!("{a}.{b}.{}.0/24", self.next_pod_cidr);
        self.next_pod_cidr += 1;
        let mut node = kube_harness::kubelet_node(name);
        let mut all_labels = labels;
        all_labels.insert("kubernetes.io/hostname".to_owned(), name.to_owned());
        node.metadata.labels = Some(all_labels);
        if let Some(spec) = node.spec.as_mut() {
            spec.pod_cidr = Some(pod_cidr.clone());
            spec.pod_cidrs = Some(vec![pod_cidr.clone()]);
        }
        // The Hostname address comes with the registration, in one request, as a kubelet
        // sends it: a status patch afterwards would replace the addresses the CCM may have
        // written in between (a kubelet with an external cloud provider keeps those).
        node.status = Some(k8s_openapi::api::core::v1::NodeStatus {
            addresses: Some(vec![k8s_openapi::api::core::v1::NodeAddress {
                type_: "Hostname".to_owned(),
                address: name.to_owned(),
            }]),
            ..Default::default()
        });
        self.nodes().create(&PostParams::default(), &node).await?;
        self.log.log(format_args!(
            "Node {name} registered with pod CIDR {pod_cidr}"
        ));
        self.report_ready(name).await
    }

    /// Writes the Node's Ready condition from its server's and kubelet's state.
    async fn report_ready(&mut self, name: &str) -> anyhow::Result<()> {
        let state = self.server(name)?.clone();
        let ready = state.running && state.kubelet && !state.deleted;
        let condition = if ready {
            kube_harness::ready_condition("True", "KubeletReady")
        } else {
            kube_harness::ready_condition("Unknown", "NodeStatusUnknown")
        };
        // Strategic merge: conditions merge by type, so the CCM's NetworkUnavailable stays.
        let patch = json!({"status": {"conditions": [condition]}});
        match self
            .nodes()
            .patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
        {
            Ok(_) => Ok(()),
            // The CCM deleted it (its server is gone): nothing to report on.
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Deletes the server (its kubelet goes with it).
    pub async fn delete_server(&mut self, name: &str) -> anyhow::Result<()> {
        let id = self.server(name)?.id;
        self.admin.delete_server(id).await?;
        self.server(name)?.deleted = true;
        self.report_ready(name).await
    }

    /// Powers the server on or off.
    pub async fn power(&mut self, name: &str, on: bool) -> anyhow::Result<()> {
        let id = self.server(name)?.id;
        self.admin
            .set_server_status(id, if on { "running" } else { "off" })
            .await?;
        self.server(name)?.running = on;
        self.report_ready(name).await
    }

    /// The kubelet stops or starts reporting.
    pub async fn kubelet(&mut self, name: &str, up: bool) -> anyhow::Result<()> {
        self.server(name)?.kubelet = up;
        self.report_ready(name).await
    }

    /// An administrator deletes the Node object.
    pub async fn delete_node(&mut self, name: &str) -> anyhow::Result<()> {
        self.runner_deleted.lock().insert(name.to_owned());
        match self.nodes().delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(e) => {
                self.runner_deleted.lock().remove(name);
                Err(e.into())
            }
        }
    }

    /// Sets (`Some`) or removes a Node label.
    pub async fn label_node(
        &mut self,
        name: &str,
        key: &str,
        value: Option<&str>,
    ) -> anyhow::Result<()> {
        set_metadata_entry(&self.nodes(), name, "labels", key, value).await
    }

    /// A LoadBalancer Service with two TCP ports.
    pub async fn add_service(
        &mut self,
        name: &str,
        annotations: &BTreeMap<String, String>,
    ) -> anyhow::Result<()> {
        let service: Service = serde_json::from_value(json!({
            "metadata": {"name": name, "annotations": annotations},
            "spec": {
                "type": "LoadBalancer",
                "selector": {"app": name},
                "ports": [
                    {"name": "http", "port": 80, "protocol": "TCP"},
                    {"name": "https", "port": 443, "protocol": "TCP"},
                ],
            },
        }))?;
        self.services()
            .create(&PostParams::default(), &service)
            .await?;
        Ok(())
    }

    /// Deletes the Service (the CCM's finalizer keeps it until its load balancer is gone).
    pub async fn delete_service(&mut self, name: &str) -> anyhow::Result<()> {
        self.services()
            .delete(name, &DeleteParams::default())
            .await?;
        Ok(())
    }

    /// Sets (`Some`) or removes a Service annotation.
    pub async fn annotate(
        &mut self,
        name: &str,
        key: &str,
        value: Option<&str>,
    ) -> anyhow::Result<()> {
        set_metadata_entry(&self.services(), name, "annotations", key, value).await
    }

    /// Everything the convergence checks look at.
    pub async fn snapshot(&self) -> anyhow::Result<Snapshot> {
        Ok(Snapshot {
            nodes: self.nodes().list(&ListParams::default()).await?.items,
            services: self.services().list(&ListParams::default()).await?.items,
            cloud: self.admin.state().await?,
            network: self.network,
        })
    }
}

/// Sets (`Some`) or removes (`None`: a merge patch's `null`) the entry `key` of the object's
/// `metadata.<map>`, `map` being `labels` or `annotations`.
async fn set_metadata_entry<K>(
    api: &Api<K>,
    name: &str,
    map: &str,
    key: &str,
    value: Option<&str>,
) -> anyhow::Result<()>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let patch = json!({"metadata": {map: {key: value}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// Removes what a schedule left in the cluster (its CCMs already stopped): the Services
/// (finalizers dropped), the Nodes, the events and the leader lease.
pub async fn clean(kube: &kube::Client) -> anyhow::Result<()> {
    let services: Api<Service> = Api::namespaced(kube.clone(), NAMESPACE);
    for service in services.list(&ListParams::default()).await? {
        let name = service.metadata.name.unwrap_or_default();
        let drop_finalizers = json!({"metadata": {"finalizers": null}});
        match services
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(&drop_finalizers),
            )
            .await
        {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => continue,
            Err(e) => return Err(e.into()),
        }
        match services.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(e.into()),
        }
    }
    let nodes: Api<Node> = Api::all(kube.clone());
    nodes
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await?;
    for namespace in ["default", "kube-system", NAMESPACE] {
        Api::<Event>::namespaced(kube.clone(), namespace)
            .delete_collection(&DeleteParams::default(), &ListParams::default())
            .await?;
    }
    match Api::<Lease>::namespaced(kube.clone(), "kube-system")
        .delete("cloud-controller-manager", &DeleteParams::default())
        .await
    {
        Ok(_) => {}
        Err(e) if is_not_found(&e) => {}
        Err(e) => return Err(e.into()),
    }
    // Deletions without finalizers are immediate; make sure before the next schedule.
    for _ in 0..50 {
        let left = nodes.list(&ListParams::default()).await?.items.len()
            + services.list(&ListParams::default()).await?.items.len();
        if left == 0 {
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    bail!("Nodes or Services are left after the clean-up")
}
