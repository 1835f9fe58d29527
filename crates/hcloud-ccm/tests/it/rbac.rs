//! The shipped ClusterRole is minimal. Each scenario runs hcloud-ccm as a ServiceAccount bound
//! only to the rules of the ClusterRole of `deploy/rbac.yaml` (RBAC-enabled control plane, a
//! scope of its own on it, its own simulator): with the whole role, Node initialization,
//! addresses, routes, lifecycle (deleting the Node of a deleted server), load balancers,
//! events, leader election and the secure port's /metrics authorization all work. With one rule
//! (or verb group) removed, the behaviour that needs it fails: the apiserver refuses the call (a
//! 403 in its audit log for writes, a "forbidden" in the CCM's log for reads) and the
//! behaviour's result never appears.
//!
//! | removed from the role                     | behaviour that fails                      |
//! |-------------------------------------------|-------------------------------------------|
//! | nodes list, watch (get)                   | Node initialization (no Node cache)       |
//! | nodes patch                               | Node initialization (providerID, taint)   |
//! | nodes delete                              | Node of a deleted server is removed       |
//! | nodes/status patch                        | Node addresses                            |
//! | events create, patch                      | events                                    |
//! | services list, watch                      | load balancer creation                    |
//! | services/status patch                     | load balancer ingress in the status       |
//! | secrets get, list, watch                  | a certificate uploaded from a TLS Secret  |
//! | leases get, create, update                | leader election                           |
//! | tokenreviews create                       | /metrics for an authorized scraper        |
//! | subjectaccessreviews create               | /metrics for an authorized scraper        |
//!
//! `deploy/plan-job.yaml`'s own ClusterRole for `hcloud-ccm plan` is read-only and minimal in the
//! same way: only read verbs, the Job's args plan a cluster with that role alone and write
//! nothing, and each rule removed makes the plan fail on the refused read.
//!
//! Kept without a scenario: `nodes get` re-reads a Node after a write conflict (not reproducible
//! on demand) and `events patch` counts a repeated event on the first one (without it a new
//! Event is created instead). Rules of the official ClusterRole that this CCM does not need:
//! `nodes` verbs other than the five above, `configmaps get/list/watch`, `serviceaccounts
//! create`, `leases list/watch`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::{ccm, chart};

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use ccm::{BIN, TOKEN, audit_events_of, free_port};
use hcloud_sim::{NetworkSeed, ServerSeed, SimConfig, Simulator};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Secret, Service, ServicePort, ServiceSpec};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, ListParams, ObjectMeta, PostParams};
use kube_harness::{UNINITIALIZED_TAINT, eventually, has_taint, kubelet_node};
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use crate::support::scope::{Access, Scope};

/// The name of the shipped ServiceAccount (the scenarios run as accounts of their own).
const ACCOUNT: &str = "hcloud-cloud-controller-manager";
const WAIT: Duration = Duration::from_secs(45);

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn shipped_rbac() -> Vec<Value> {
    chart::documents(&std::fs::read_to_string(repo().join("deploy/rbac.yaml")).unwrap())
}

/// The shipped role without `verbs` of `resource` (all of its rule when `verbs` is empty).
fn role_without(resource: &str, verbs: &[&str]) -> Value {
    let mut role = shipped_rbac()
        .into_iter()
        .find(|d| d["kind"] == "ClusterRole")
        .unwrap();
    let rules = role["rules"].as_array_mut().unwrap();
    let before = serde_json::to_string(rules).unwrap();
    for rule in rules.iter_mut() {
        if rule["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r == resource)
        {
            assert_eq!(
                rule["resources"].as_array().unwrap().len(),
                1,
                "one resource per rule"
            );
            let kept: Vec<Value> = rule["verbs"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|v| !verbs.is_empty() && !verbs.contains(&v.as_str().unwrap()))
                .cloned()
                .collect();
            rule["verbs"] = json!(kept);
        }
    }
    rules.retain(|r| !r["verbs"].as_array().unwrap().is_empty());
    assert_ne!(
        serde_json::to_string(rules).unwrap(),
        before,
        "{resource} {verbs:?} is not in the shipped role"
    );
    role
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Behaviour {
    NodeInit,
    Addresses,
    Routes,
    Lifecycle,
    LoadBalancer,
    Ingress,
    TlsSecret,
    Events,
    Leads,
    MetricsAuth,
}

/// How a refused call shows: a 403 write in the audit log, or a read the CCM logs as forbidden.
#[derive(Debug, Clone, Copy)]
enum Refusal {
    Write(&'static str, &'static str),
    Read,
}

/// Service `web` of type LoadBalancer, one TCP port.
fn web_service() -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some("web".into()),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".into()),
            ports: Some(vec![ServicePort {
                port: 80,
                protocol: Some("TCP".into()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

/// Service `web-tls` of type LoadBalancer, one https port with the certificate of the TLS
/// Secret `web-tls`.
fn tls_service() -> Service {
    let mut service = web_service();
    service.metadata.name = Some("web-tls".into());
    service.metadata.annotations = Some(
        [
            ("load-balancer.hetzner.cloud/protocol", "https"),
            (
                "load-balancer.hetzner.cloud/http-certificate-secret",
                "web-tls",
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect(),
    );
    if let Some(port) = service
        .spec
        .as_mut()
        .and_then(|s| s.ports.as_mut())
        .and_then(|p| p.first_mut())
    {
        port.port = 443;
    }
    service
}

/// One CCM run as ServiceAccount `<scope>-ccm`, bound to `role` (renamed `<scope>-role`) by the
/// shipped ClusterRoleBinding (renamed `<scope>-binding`): cluster-wide names must not collide
/// with those of concurrent scenarios and tests. The rules are what is tested.
struct Scenario {
    scope: Scope,
    admin: kube::Client,
    sim: Simulator,
    /// The Node (and its server's name).
    node: String,
    account: String,
    secure_port: u16,
    _access: Access,
    ccm: tokio::process::Child,
}

impl Scenario {
    async fn start(mut role: Value) -> Scenario {
        let scope = Scope::new("rbac").await;
        let admin = scope.admin.clone();
        let node = scope.name("node");
        let account = scope.name("ccm");
        let sim = Simulator::start(SimConfig::default().token(TOKEN))
            .await
            .unwrap();
        let network = sim
            .admin()
            .create_network(
                NetworkSeed::new("rbac", "10.0.0.0/16").subnet("10.0.1.0/24", "eu-central"),
            )
            .await
            .unwrap();
        sim.admin()
            .create_server(ServerSeed {
                networks: vec![network.into()],
                ..ServerSeed::new(&node)
            })
            .await
            .unwrap();
        let role_name = scope.name("role");
        role["metadata"]["name"] = json!(role_name);
        let role: ClusterRole = serde_json::from_value(role).unwrap();
        Api::<ClusterRole>::all(admin.clone())
            .create(&PostParams::default(), &role)
            .await
            .unwrap();
        for mut doc in shipped_rbac()
            .into_iter()
            .filter(|d| d["kind"] == "ClusterRoleBinding")
        {
            doc["metadata"]["name"] = json!(scope.name("binding"));
            doc["roleRef"]["name"] = json!(role_name);
            for subject in doc["subjects"].as_array_mut().unwrap() {
                assert_eq!(subject["name"], ACCOUNT, "{subject}");
                subject["name"] = json!(account);
            }
            let binding: ClusterRoleBinding = serde_json::from_value(doc).unwrap();
            Api::<ClusterRoleBinding>::all(admin.clone())
                .create(&PostParams::default(), &binding)
                .await
                .unwrap();
        }
        let access = scope.access(&account).await;
        let secure_port = free_port();
        let ccm = tokio::process::Command::new(BIN)
            .env_clear()
            .env("HCLOUD_TOKEN", TOKEN)
            .env("HCLOUD_ENDPOINT", sim.base_url())
            .env("HCLOUD_NETWORK", "rbac")
            .env("HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK", "true")
            .env("HCLOUD_METRICS_ENABLED", "false")
            .env("HCLOUD_LOAD_BALANCERS_LOCATION", "fsn1")
            .env("RUST_LOG", "info")
            .args([
                "--cloud-provider=hcloud",
                &format!("--kubeconfig={}", access.kubeconfig.display()),
                &scope.lease_flag(),
                "--allocate-node-cidrs=true",
                "--cluster-cidr=10.244.0.0/16",
                "--route-reconciliation-period=1s",
                "--node-monitor-period=1s",
                "--leader-elect-lease-duration=4s",
                "--leader-elect-renew-deadline=3s",
                "--leader-elect-retry-period=500ms",
                "--bind-address=127.0.0.1",
                &format!("--secure-port={secure_port}"),
            ])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(scope.dir.path().join("ccm.log")).unwrap())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        scope.register_node(&node, Some("10.244.1.0/24")).await;
        scope.create_service(web_service()).await;
        Api::<Secret>::namespaced(admin.clone(), scope.namespace())
            .create(
                &PostParams::default(),
                &crate::support::tls_secret("web-tls", "web.example.com"),
            )
            .await
            .unwrap();
        scope.create_service(tls_service()).await;
        Scenario {
            scope,
            admin,
            sim,
            node,
            account,
            secure_port,
            _access: access,
            ccm,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.scope.dir.path().join("ccm.log")).unwrap_or_default()
    }

    fn refused(&self, refusal: Refusal) -> bool {
        match refusal {
            Refusal::Read => self.log().to_lowercase().contains("forbidden"),
            Refusal::Write(verb, resource) => {
                let (resource, subresource) = resource.split_once('/').unwrap_or((resource, ""));
                audit_events_of(self.scope.plane, &self.account)
                    .iter()
                    .any(|e| {
                        e["verb"] == verb
                            && e["objectRef"]["resource"] == resource
                            && e["objectRef"]["subresource"].as_str().unwrap_or_default()
                                == subresource
                            && e["responseStatus"]["code"] == 403
                    })
            }
        }
    }

    /// Whether `behaviour`'s result is there now (the lifecycle check deletes the server first).
    async fn works(&self, behaviour: Behaviour) -> bool {
        let node = self.scope.nodes().get_opt(&self.node).await.unwrap();
        let service = self.scope.services().get("web").await.unwrap();
        let state = self.sim.admin().state().await.unwrap();
        match behaviour {
            Behaviour::NodeInit => node.is_some_and(|n| {
                !has_taint(&n, UNINITIALIZED_TAINT) && n.spec.and_then(|s| s.provider_id).is_some()
            }),
            Behaviour::Addresses => node
                .and_then(|n| n.status?.addresses)
                .is_some_and(|a| a.iter().any(|a| a.type_ == "InternalIP")),
            Behaviour::Routes => state.to_string().contains("10.244.1.0/24"),
            Behaviour::Lifecycle => node.is_none(),
            Behaviour::LoadBalancer => state["load_balancers"]
                .as_array()
                .is_some_and(|l| !l.is_empty()),
            Behaviour::TlsSecret => state["certificates"].as_array().is_some_and(|c| {
                c.iter()
                    .any(|c| c["labels"]["hcloud-ccm/tls-secret"] == "web-tls")
            }),
            Behaviour::Ingress => service
                .status
                .and_then(|s| s.load_balancer?.ingress)
                .is_some_and(|i| !i.is_empty()),
            Behaviour::Events => {
                let events = Api::<Event>::all(self.admin.clone())
                    .list(&ListParams::default())
                    .await
                    .unwrap();
                // Only the CCM records events on the scenario's Node and Service.
                events.items.iter().any(|e| {
                    let object = &e.involved_object;
                    object.name.as_deref() == Some(self.node.as_str())
                        || (object.namespace.as_deref() == Some(self.scope.namespace())
                            && object.name.as_deref() == Some("web"))
                })
            }
            Behaviour::Leads => Api::<Lease>::namespaced(self.admin.clone(), "kube-system")
                .get_opt(self.scope.lease())
                .await
                .unwrap()
                .and_then(|l| l.spec?.holder_identity)
                .is_some(),
            Behaviour::MetricsAuth => self.scrape().await == Some(200),
        }
    }

    /// GET /metrics on the secure port as a scraper allowed to (nonResourceURL /metrics, get).
    async fn scrape(&self) -> Option<u16> {
        // The scraper's account, ClusterRole and binding share one name.
        let scraper = self.scope.name("scraper");
        let role: ClusterRole = serde_json::from_value(json!({
            "metadata": { "name": scraper },
            "rules": [{ "nonResourceURLs": ["/metrics"], "verbs": ["get"] }],
        }))
        .unwrap();
        let _ = Api::<ClusterRole>::all(self.admin.clone())
            .create(&PostParams::default(), &role)
            .await;
        let binding: ClusterRoleBinding = serde_json::from_value(json!({
            "metadata": { "name": scraper },
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": scraper },
            "subjects": [{ "kind": "ServiceAccount", "name": scraper, "namespace": "kube-system" }],
        }))
        .unwrap();
        let _ = Api::<ClusterRoleBinding>::all(self.admin.clone())
            .create(&PostParams::default(), &binding)
            .await;
        let token = self
            .scope
            .plane
            .service_account_token("kube-system", &scraper)
            .await
            .unwrap();
        let http = reqwest::Client::builder()
            .tls_danger_accept_invalid_certs(true)
            .build()
            .unwrap();
        let response = http
            .get(format!("https://127.0.0.1:{}/metrics", self.secure_port))
            .bearer_auth(token)
            .send()
            .await
            .ok()?;
        Some(response.status().as_u16())
    }

    async fn delete_server(&self) {
        let state = self.sim.admin().state().await.unwrap();
        let id = state["servers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == self.node.as_str())
            .unwrap()["id"]
            .as_i64()
            .unwrap();
        self.sim.admin().delete_server(id).await.unwrap();
    }
}

/// The whole shipped role: every behaviour works.
#[tokio::test]
async fn the_shipped_cluster_role_is_enough_for_every_behaviour() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let role = shipped_rbac()
        .into_iter()
        .find(|d| d["kind"] == "ClusterRole")
        .unwrap();
    let s = Scenario::start(role).await;
    for behaviour in [
        Behaviour::Leads,
        Behaviour::NodeInit,
        Behaviour::Addresses,
        Behaviour::Routes,
        Behaviour::LoadBalancer,
        Behaviour::Ingress,
        Behaviour::TlsSecret,
        Behaviour::Events,
        Behaviour::MetricsAuth,
    ] {
        eventually(
            &format!("{behaviour:?} with the shipped role"),
            WAIT,
            || async { s.works(behaviour).await.then_some(()) },
        )
        .await;
    }
    s.delete_server().await;
    eventually("Lifecycle with the shipped role", WAIT, || async {
        s.works(Behaviour::Lifecycle).await.then_some(())
    })
    .await;
    let forbidden: Vec<Value> = audit_events_of(s.scope.plane, &s.account)
        .into_iter()
        .filter(|e| e["responseStatus"]["code"] == 403)
        .collect();
    assert!(
        forbidden.is_empty(),
        "refused calls with the shipped role: {forbidden:#?}"
    );
    drop(s.ccm);
}

/// Each rule removed: the apiserver refuses its call and the named behaviour fails.
#[tokio::test]
async fn removing_any_rule_breaks_a_named_behaviour() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cases: Vec<(&str, &[&str], Refusal, Behaviour)> = vec![
        (
            "nodes",
            &["list", "watch"],
            Refusal::Read,
            Behaviour::NodeInit,
        ),
        (
            "nodes",
            &["patch"],
            Refusal::Write("patch", "nodes"),
            Behaviour::NodeInit,
        ),
        (
            "nodes",
            &["delete"],
            Refusal::Write("delete", "nodes"),
            Behaviour::Lifecycle,
        ),
        (
            "nodes/status",
            &[],
            Refusal::Write("patch", "nodes/status"),
            Behaviour::Addresses,
        ),
        (
            "events",
            &[],
            Refusal::Write("create", "events"),
            Behaviour::Events,
        ),
        ("services", &[], Refusal::Read, Behaviour::LoadBalancer),
        (
            "services/status",
            &[],
            Refusal::Write("patch", "services/status"),
            Behaviour::Ingress,
        ),
        ("secrets", &[], Refusal::Read, Behaviour::TlsSecret),
        ("leases", &[], Refusal::Read, Behaviour::Leads),
        (
            "tokenreviews",
            &[],
            Refusal::Write("create", "tokenreviews"),
            Behaviour::MetricsAuth,
        ),
        (
            "subjectaccessreviews",
            &[],
            Refusal::Write("create", "subjectaccessreviews"),
            Behaviour::MetricsAuth,
        ),
    ];
    // Each case runs a CCM in a scope of its own; a few at a time.
    let slots = Arc::new(Semaphore::new(4));
    let mut runs = Vec::new();
    for (resource, verbs, refusal, behaviour) in cases {
        let role = role_without(resource, verbs);
        let slots = slots.clone();
        runs.push(tokio::spawn(async move {
            let _slot = slots.acquire().await.unwrap();
            let s = Scenario::start(role).await;
            let name = format!("without {resource} {verbs:?}");
            // What has to happen first for the behaviour to be attempted at all.
            match behaviour {
                Behaviour::Lifecycle => {
                    eventually(&format!("{name}: Node initialized"), WAIT, || async {
                        s.works(Behaviour::NodeInit).await.then_some(())
                    })
                    .await;
                    s.delete_server().await;
                }
                Behaviour::MetricsAuth => {
                    eventually(&format!("{name}: leads"), WAIT, || async {
                        s.works(Behaviour::Leads).await.then_some(())
                    })
                    .await;
                    assert_ne!(s.scrape().await, Some(200), "{name}: /metrics served");
                }
                _ => {}
            }
            let refused = tokio::time::timeout(WAIT, async {
                while !s.refused(refusal) {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            })
            .await;
            assert!(
                refused.is_ok(),
                "{name}: the apiserver did not refuse {refusal:?} within {WAIT:?}; log:\n{}",
                s.log()
            );
            assert!(
                !s.works(behaviour).await,
                "{name}: {behaviour:?} works anyway; log:\n{}",
                s.log()
            );
            eprintln!("{name}: refused as {refusal:?}, {behaviour:?} fails");
            drop(s.ccm);
        }));
    }
    for run in runs {
        run.await.unwrap();
    }
}

fn plan_job() -> Vec<Value> {
    chart::documents(&std::fs::read_to_string(repo().join("deploy/plan-job.yaml")).unwrap())
}

/// `deploy/plan-job.yaml` with its ClusterRole's `rules` replaced and its names `<scope>-<suffix>`,
/// so that each variant gets an account of its own on the shared control plane.
fn plan_rbac(
    scope: &Scope,
    suffix: &str,
    rules: &Value,
) -> (String, ClusterRole, ClusterRoleBinding) {
    let docs = plan_job();
    let account = scope.name(suffix);
    let mut role = docs
        .iter()
        .find(|d| d["kind"] == "ClusterRole")
        .unwrap()
        .clone();
    role["metadata"]["name"] = json!(account);
    role["rules"] = rules.clone();
    let mut binding = docs
        .iter()
        .find(|d| d["kind"] == "ClusterRoleBinding")
        .unwrap()
        .clone();
    binding["metadata"]["name"] = json!(account);
    binding["roleRef"]["name"] = json!(account);
    binding["subjects"][0]["name"] = json!(account);
    (
        account,
        serde_json::from_value(role).unwrap(),
        serde_json::from_value(binding).unwrap(),
    )
}

/// `deploy/plan-job.yaml`'s ServiceAccount may only read: every verb of its ClusterRole is a
/// read (so the apiserver refuses any write), the Job's own args plan a cluster with work to do
/// using that role alone and write nothing (the audit log), and without any one rule the plan
/// fails (exit 1) naming the refused read.
#[tokio::test]
async fn the_plan_jobs_role_reads_only_and_each_rule_is_needed() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let docs = plan_job();
    let role = docs.iter().find(|d| d["kind"] == "ClusterRole").unwrap();
    let rules = role["rules"].as_array().unwrap();
    for rule in rules {
        for verb in rule["verbs"].as_array().unwrap() {
            assert!(
                ["get", "list", "watch"].contains(&verb.as_str().unwrap()),
                "the plan's role may {verb}: {rule}"
            );
        }
    }
    let job = docs.iter().find(|d| d["kind"] == "Job").unwrap();
    let container = &job["spec"]["template"]["spec"]["containers"][0];
    let args: Vec<String> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(args[0], "plan");
    assert_eq!(
        job["spec"]["template"]["spec"]["serviceAccountName"],
        docs.iter().find(|d| d["kind"] == "ServiceAccount").unwrap()["metadata"]["name"]
    );

    // The plan sees only this test's Node through its scope.
    let scope = Scope::new("plan-rbac").await;
    let node = scope.name("node");
    let sim = Simulator::start(SimConfig::default().token(TOKEN))
        .await
        .unwrap();
    sim.admin()
        .create_server(ServerSeed::new(&node))
        .await
        .unwrap();
    scope.create_node(kubelet_node(&node)).await;

    let run = |suffix: &'static str, rules: Value| {
        let (scope, sim, args) = (&scope, &sim, &args);
        async move {
            let admin = &scope.admin;
            let (account, role, binding) = plan_rbac(scope, suffix, &rules);
            Api::<ClusterRole>::all(admin.clone())
                .create(&PostParams::default(), &role)
                .await
                .unwrap();
            Api::<ClusterRoleBinding>::all(admin.clone())
                .create(&PostParams::default(), &binding)
                .await
                .unwrap();
            let access = scope.access(&account).await;
            let output = tokio::process::Command::new(BIN)
                .env_clear()
                .env("HCLOUD_TOKEN", TOKEN)
                .env("HCLOUD_ENDPOINT", sim.base_url())
                .env("HCLOUD_METRICS_ENABLED", "false")
                .args(args)
                .args([
                    "-o",
                    "json",
                    &format!("--kubeconfig={}", access.kubeconfig.display()),
                ])
                .output()
                .await
                .unwrap();
            // The apiserver's audit log records writes (its policy); a plan makes none.
            let writes = ccm::kube_writes(scope.plane, &account, &[]);
            (output, writes)
        }
    };

    let (output, writes) = run("plan-full", json!(rules)).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let plan: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(
        plan["objects"]
            .as_array()
            .unwrap()
            .iter()
            .any(|o| o["kind"] == "Node" && o["name"] == node.as_str()),
        "the uninitialised Node is in the plan: {plan}"
    );
    assert!(writes.is_empty(), "the plan wrote: {writes:?}");

    for (i, rule) in rules.iter().enumerate() {
        let without: Vec<Value> = rules
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, r)| r.clone())
            .collect();
        let resource = rule["resources"][0].as_str().unwrap().to_owned();
        let suffix: &'static str = [
            "plan-without-0",
            "plan-without-1",
            "plan-without-2",
            "plan-without-3",
        ][i];
        let (output, writes) = run(suffix, json!(without)).await;
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(
            output.status.code(),
            Some(1),
            "without {resource}: {stderr}"
        );
        assert!(
            stderr.to_lowercase().contains("forbidden"),
            "without {resource}: {stderr}"
        );
        assert!(
            stderr.contains(&resource),
            "without {resource}: the refused read is named: {stderr}"
        );
        assert!(writes.is_empty(), "without {resource}: {writes:?}");
    }
    drop(sim);
}
