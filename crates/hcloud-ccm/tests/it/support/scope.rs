//! A test's own part of the shared control plane, for tests that run the `hcloud-ccm` binary.
//!
//! The binary watches every Node and Service of its cluster. On the control plane the tests
//! share it talks to a [`ScopedEndpoint`] instead: a loopback endpoint that adds the scope's
//! label selector to lists and watches of Nodes and Services, and forwards every request with
//! the identity of a ServiceAccount of the test's own (so that the audit log tells its requests
//! apart). What the test creates for the binary to see carries the scope's label
//! ([`Scope::create_node`], [`Scope::create_service`]). Names that are cluster-wide (Nodes,
//! whose Events land in namespace `default`; ServiceAccounts in `kube-system`; bindings; leases)
//! start with the scope's unique name ([`Scope::name`]), and Services live in the scope's own
//! namespace.

use std::path::PathBuf;
use std::sync::OnceLock;

use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeStatus, Service};
use kube::api::{Api, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube_harness::{ControlPlane, ScopedEndpoint, ensure_namespace, kubelet_node, unique_name};
use serde_json::json;

use super::ccm;

/// The label that puts a Node or Service into a scope (its value: the scope's name).
pub const LABEL: &str = "hcloud-ccm-test/scope";

/// One test's Nodes, Services, accounts and lease on a shared control plane.
pub struct Scope {
    pub plane: &'static ControlPlane,
    /// A cluster-admin client of the control plane (not scoped).
    pub admin: kube::Client,
    /// Unique: the label's value, the namespace, and the prefix of the test's cluster-wide
    /// names.
    id: String,
    /// Kubeconfigs and logs.
    pub dir: tempfile::TempDir,
}

/// How the binary reaches the control plane: a scoped endpoint that forwards as
/// ServiceAccount `kube-system/<account>`, and a kubeconfig file for it. The endpoint stops
/// when this is dropped.
pub struct Access {
    pub account: String,
    pub kubeconfig: PathBuf,
    pub endpoint: ScopedEndpoint,
}

impl Scope {
    /// A scope on the control plane of this test binary ([`super::plane`]); `prefix`
    /// names the test in the scope's name.
    /// Its namespace is created.
    pub async fn new(prefix: &str) -> Scope {
        Self::on(super::plane(), prefix).await
    }

    /// A scope on `plane` (e.g. [`super::ipam_plane`]).
    pub async fn on(plane: &'static ControlPlane, prefix: &str) -> Scope {
        let admin = plane.client().await.expect("client");
        let id = unique_name(prefix);
        ensure_namespace(&admin, &id).await.expect("namespace");
        Scope {
            plane,
            admin,
            id,
            dir: tempfile::tempdir().expect("temporary directory"),
        }
    }

    /// The scope's unique name.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// `<scope>-<suffix>`: a name no concurrent test uses (Nodes and the servers they match,
    /// accounts, leases).
    pub fn name(&self, suffix: &str) -> String {
        format!("{}-{suffix}", self.id)
    }

    /// The scope's own namespace, for its Services.
    pub fn namespace(&self) -> &str {
        &self.id
    }

    /// The name of the binary's leader-election Lease (in `kube-system`).
    pub fn lease(&self) -> &str {
        &self.id
    }

    /// `--leader-elect-resource-name` for [`Self::lease`].
    pub fn lease_flag(&self) -> String {
        format!("--leader-elect-resource-name={}", self.id)
    }

    /// `LABEL=<scope>`
    pub fn selector(&self) -> String {
        format!("{LABEL}={}", self.id)
    }

    /// Lists of only the scope's Nodes or Services.
    pub fn list_params(&self) -> ListParams {
        ListParams::default().labels(&self.selector())
    }

    /// Put `meta` into the scope.
    pub fn label(&self, meta: &mut ObjectMeta) {
        meta.labels
            .get_or_insert_with(Default::default)
            .insert(LABEL.to_owned(), self.id.clone());
    }

    /// Every Node, as cluster-admin (reads by name are not scoped; lists need
    /// [`Self::list_params`]).
    pub fn nodes(&self) -> Api<Node> {
        Api::all(self.admin.clone())
    }

    /// The Services of the scope's namespace, as cluster-admin.
    pub fn services(&self) -> Api<Service> {
        Api::namespaced(self.admin.clone(), &self.id)
    }

    /// Create `node` in the scope.
    pub async fn create_node(&self, mut node: Node) -> Node {
        self.label(&mut node.metadata);
        self.nodes()
            .create(&PostParams::default(), &node)
            .await
            .expect("create the Node")
    }

    /// Register Node `name` in the scope as a kubelet with `--cloud-provider=external` does: the
    /// uninitialized taint, `pod_cidr` when given, and its Hostname address in the status.
    pub async fn register_node(&self, name: &str, pod_cidr: Option<&str>) {
        let mut node = kubelet_node(name);
        if let (Some(spec), Some(cidr)) = (node.spec.as_mut(), pod_cidr) {
            spec.pod_cidr = Some(cidr.to_owned());
        }
        self.create_node(node).await;
        let status = NodeStatus {
            addresses: Some(vec![NodeAddress {
                type_: "Hostname".into(),
                address: name.into(),
            }]),
            ..NodeStatus::default()
        };
        self.nodes()
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(&json!({ "status": status })),
            )
            .await
            .expect("the Node's status");
    }

    /// Create `service` in the scope's namespace and the scope.
    pub async fn create_service(&self, mut service: Service) -> Service {
        self.label(&mut service.metadata);
        self.services()
            .create(&PostParams::default(), &service)
            .await
            .expect("create the Service")
    }

    /// ServiceAccount `kube-system/<scope>-<suffix>`, bound to `cluster-admin`, and the
    /// binary's way to the control plane as that account.
    pub async fn admin_access(&self, suffix: &str) -> Access {
        let account = self.name(suffix);
        ccm::service_account_kubeconfig(self.plane, &self.admin, &account, self.dir.path()).await;
        self.access(&account).await
    }

    /// The binary's way to the control plane as ServiceAccount `kube-system/<account>` (created
    /// when missing; its permissions are the test's business).
    pub async fn access(&self, account: &str) -> Access {
        let (plane, owner, selector) = (self.plane, account.to_owned(), self.selector());
        let endpoint = endpoint_runtime()
            .spawn(async move {
                let client = plane
                    .service_account_client("kube-system", &owner)
                    .await
                    .expect("ServiceAccount client");
                ScopedEndpoint::start(client, &selector)
                    .await
                    .expect("scoped endpoint")
            })
            .await
            .expect("the scoped endpoint's start");
        let kubeconfig = self.dir.path().join(format!("{account}.scoped.kubeconfig"));
        endpoint.write_kubeconfig(&kubeconfig).expect("kubeconfig");
        Access {
            account: account.to_owned(),
            kubeconfig,
            endpoint,
        }
    }
}

/// The runtime the scoped endpoints (and their upstream clients) run on, threads of their own:
/// a test's runtime has one thread, and whatever blocks it for a while (reading the audit log,
/// which holds every test's writes) would otherwise hold up the requests of the binary under
/// test, e.g. the renewal of its lease.
fn endpoint_runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("scoped-endpoints")
            .enable_all()
            .build()
            .expect("the scoped endpoints' runtime")
    })
}
