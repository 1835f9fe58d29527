//! `hcloud-ccm plan` on a cluster with work to do: it reports what each controller would
//! change, exits 2 with `--detailed-exitcode`, and writes nothing — neither to the cloud (the
//! simulator's counters) nor to Kubernetes (the apiserver's audit log: not even an Event).
//!
//! Then the same cluster is reconciled, one controller after the other: for each, the writes
//! `plan` names are exactly the writes the controller makes until `plan` has nothing left to
//! change (counted at the simulator and in the audit log), including a load balancer changed
//! in several rounds, a Service with a broken annotation and Warning-only objects.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::ccm;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use hcloud_sim::{
    HealthCheckSeed, LoadBalancerSeed, NetworkSeed, ServerSeed, ServiceSeed, SimConfig, Simulator,
};
use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeCondition, NodeSpec, NodeStatus, Service};
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube_harness::{ControlPlane, kubelet_node};
use serde_json::{Value, json};

use ccm::{BIN, TOKEN, audit_writes_of, cloud_writes, kube_writes, lb_service};

use crate::support::scope::Scope;

async fn set_status(nodes: &Api<Node>, name: &str, status: NodeStatus) {
    nodes
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status })),
        )
        .await
        .unwrap();
}

fn condition(type_: &str, status: &str) -> NodeCondition {
    NodeCondition {
        type_: type_.into(),
        status: status.into(),
        ..NodeCondition::default()
    }
}

/// `hcloud-ccm` with the test's environment and flags (`plan` when the first of `extra`).
fn command(
    sim: &Simulator,
    kubeconfig: &Path,
    network: &str,
    extra: &[&str],
) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(BIN);
    command
        .env_clear()
        .env("HCLOUD_TOKEN", TOKEN)
        .env("HCLOUD_ENDPOINT", sim.base_url())
        .env("HCLOUD_NETWORK", network)
        .env("HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK", "true")
        .env("HCLOUD_LOAD_BALANCERS_LOCATION", "nbg1")
        .args(extra.first().filter(|a| **a == "plan"))
        .args([
            "--cloud-provider=hcloud",
            "--allow-untagged-cloud",
            "--cluster-cidr=10.244.0.0/16",
            "--allocate-node-cidrs=true",
            &format!("--kubeconfig={}", kubeconfig.display()),
        ])
        .args(
            extra
                .iter()
                .skip(usize::from(extra.first() == Some(&"plan"))),
        );
    command
}

async fn run_plan(
    sim: &Simulator,
    kubeconfig: &Path,
    network: &str,
    extra: &[&str],
) -> std::process::Output {
    let mut args = vec!["plan"];
    args.extend_from_slice(extra);
    command(sim, kubeconfig, network, &args)
        .output()
        .await
        .unwrap()
}

/// `plan -o json` with `extra` arguments, having exited with `status` (0: everything planned;
/// 1: something could not be), parsed.
async fn plan_json(
    sim: &Simulator,
    kubeconfig: &Path,
    network: &str,
    extra: &[&str],
    status: i32,
) -> Value {
    let mut args = vec!["-o", "json"];
    args.extend_from_slice(extra);
    let out = run_plan(sim, kubeconfig, network, &args).await;
    assert_eq!(
        out.status.code(),
        Some(status),
        "stderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A simulator with the token and the network `<scope id>-net` every plan here runs with: the
/// simulator, the network's name and its ID.
async fn simulator_with_network(scope: &Scope) -> (Simulator, String, i64) {
    let sim = Simulator::start(SimConfig::default().token(TOKEN))
        .await
        .unwrap();
    let network = format!("{}-net", scope.id());
    let id = sim
        .admin()
        .create_network(
            NetworkSeed::new(&network, "10.0.0.0/16").subnet("10.0.0.0/24", "eu-central"),
        )
        .await
        .unwrap();
    (sim, network, id)
}

fn object<'a>(plan: &'a Value, kind: &str, name: &str) -> &'a Value {
    plan["objects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["kind"] == kind && o["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in the plan: {plan:#}"))
}

fn targets(object: &Value) -> Vec<String> {
    object["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            format!(
                "{} {}",
                c["action"].as_str().unwrap(),
                c["target"].as_str().unwrap()
            )
        })
        .collect()
}

#[tokio::test]
async fn plan_lists_every_controllers_changes_and_writes_nothing() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let scope = Scope::new("plan").await;
    let plane = scope.plane;
    let (sim, network, network_id) = simulator_with_network(&scope).await;
    let prefix = scope.id();
    let sim_admin = sim.admin();
    let mut servers = BTreeMap::new();
    for name in ["new", "off"] {
        let server = sim_admin
            .create_server(ServerSeed::new(format!("{prefix}-{name}")).network(network_id))
            .await
            .unwrap();
        servers.insert(name, server["id"].as_i64().unwrap());
    }
    sim_admin
        .set_server_status(servers["off"], "off")
        .await
        .unwrap();

    // Nodes: one just registered by its kubelet, one whose server is powered off, one whose
    // server is gone.
    let nodes = scope.nodes();
    let new = format!("{prefix}-new");
    // Its pod CIDR came before its initialisation: its route waits for it.
    let mut node = kubelet_node(&new);
    if let Some(spec) = node.spec.as_mut() {
        spec.pod_cidr = Some("10.244.8.0/24".into());
        spec.pod_cidrs = Some(vec!["10.244.8.0/24".into()]);
    }
    scope.create_node(node).await;
    set_status(
        &nodes,
        &new,
        NodeStatus {
            addresses: Some(vec![NodeAddress {
                type_: "Hostname".into(),
                address: new.clone(),
            }]),
            conditions: Some(vec![condition("Ready", "True")]),
            ..NodeStatus::default()
        },
    )
    .await;
    for (name, id) in [
        (format!("{prefix}-off"), servers["off"]),
        (format!("{prefix}-gone"), 987_654),
    ] {
        let node = Node {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(NodeSpec {
                provider_id: Some(format!("hcloud://{id}")),
                // An initialised Node without its route.
                pod_cidr: name.ends_with("-off").then(|| "10.244.7.0/24".to_owned()),
                pod_cidrs: name
                    .ends_with("-off")
                    .then(|| vec!["10.244.7.0/24".to_owned()]),
                ..NodeSpec::default()
            }),
            status: None,
        };
        scope.create_node(node).await;
        set_status(
            &nodes,
            &name,
            NodeStatus {
                conditions: Some(vec![condition("Ready", "Unknown")]),
                ..NodeStatus::default()
            },
        )
        .await;
    }

    // Services: one without a load balancer yet, one whose load balancer has the wrong
    // algorithm for its annotation.
    let namespace = scope.namespace();
    scope
        .create_service(lb_service(&format!("{prefix}-fresh"), &[]))
        .await;
    let existing = scope
        .create_service(lb_service(
            &format!("{prefix}-tuned"),
            &[
                ("name", &format!("{prefix}-tuned")),
                ("algorithm-type", "least_connections"),
            ],
        ))
        .await;
    let existing_port = node_port(&existing);
    sim_admin
        .create_load_balancer(
            LoadBalancerSeed::new(format!("{prefix}-tuned"))
                .location("nbg1")
                .label(
                    "hcloud-ccm/service-uid",
                    existing.metadata.uid.clone().unwrap(),
                )
                .network(network_id, None)
                .service(ServiceSeed {
                    health_check: Some(HealthCheckSeed {
                        protocol: Some("tcp".into()),
                        port: Some(existing_port),
                        ..HealthCheckSeed::default()
                    }),
                    ..ServiceSeed::tcp(80, existing_port)
                }),
        )
        .await
        .unwrap();

    let planner = scope.admin_access("planner").await;
    let (account, kubeconfig) = (&planner.account, planner.kubeconfig.as_path());
    sim_admin.reset_request_counts().await.unwrap();

    let out = run_plan(
        &sim,
        kubeconfig,
        &network,
        &["-o", "json", "--detailed-exitcode"],
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(2),
        "stdout:\n{}\nstderr:\n{stderr}",
        String::from_utf8_lossy(&out.stdout)
    );
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();

    let new_node = targets(object(&plan, "Node", &new));
    assert!(
        new_node.contains(&"add spec.providerID".to_owned()),
        "{new_node:?}"
    );
    assert!(
        new_node.contains(&"add label topology.kubernetes.io/region".to_owned()),
        "{new_node:?}"
    );
    assert!(
        new_node
            .iter()
            .any(|t| t.starts_with("remove taint node.cloudprovider.kubernetes.io/uninitialized")),
        "{new_node:?}"
    );
    let off = targets(object(&plan, "Node", &format!("{prefix}-off")));
    assert!(
        off.contains(&"add taint node.cloudprovider.kubernetes.io/shutdown:NoSchedule".to_owned()),
        "{off:?}"
    );
    let gone = targets(object(&plan, "Node", &format!("{prefix}-gone")));
    assert!(gone.contains(&"delete node".to_owned()), "{gone:?}");

    let fresh = targets(object(
        &plan,
        "Service",
        &format!("{namespace}/{prefix}-fresh"),
    ));
    assert!(
        fresh.iter().any(|t| t.starts_with("create load balancer")),
        "{fresh:?}"
    );
    assert!(
        fresh
            .iter()
            .any(|t| t == "add finalizer service.kubernetes.io/load-balancer-cleanup"),
        "{fresh:?}"
    );
    let tuned = targets(object(
        &plan,
        "Service",
        &format!("{namespace}/{prefix}-tuned"),
    ));
    assert!(
        tuned
            .iter()
            .any(|t| t.contains("algorithm") && t.contains("least_connections")),
        "{tuned:?}"
    );
    let routes = targets(object(&plan, "Routes", "kubernetes"));
    assert!(
        routes
            .iter()
            .any(|t| t.starts_with("create route 10.244.7.0/24 via node")),
        "{routes:?}"
    );
    assert!(
        !routes.iter().any(|t| t.contains("10.244.8.0/24")),
        "the uninitialised Node's route waits: {routes:?}"
    );

    // With a load balancer class set, only Services of that class are planned: none here (no
    // Service has a class), the Nodes as before.
    let classed = plan_json(
        &sim,
        kubeconfig,
        &network,
        &["--load-balancer-class=example.com/hcloud"],
        0,
    )
    .await;
    let services: Vec<&Value> = classed["objects"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["kind"] == "Service")
        .collect();
    assert!(services.is_empty(), "{services:?}");
    object(&classed, "Node", &new);

    // The text form says the same for people.
    let out = run_plan(&sim, kubeconfig, &network, &[]).await;
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&format!("Node {new}")), "{text}");
    assert!(text.contains("Plan: "), "{text}");

    // Nothing was written anywhere.
    let counts = sim_admin.request_counts().await.unwrap();
    assert!(
        counts.keys().any(|k| k.starts_with("GET /load_balancers")),
        "the plan asked the cloud: {counts:?}"
    );
    assert_eq!(cloud_writes(&counts), BTreeMap::new(), "{counts:?}");
    let written = kube_writes(plane, account, &[]);
    assert!(written.is_empty(), "plan wrote to Kubernetes: {written:?}");

    // More Services: one whose annotation is broken (an error, only the finalizer is
    // written), one with a UDP port only (a Warning and no load balancer: load balancers carry
    // TCP only; the one it got while it had a TCP port is deleted), and one whose load
    // balancer needs several rounds (a bigger type, the network, private targets).
    scope
        .create_service(lb_service(
            &format!("{prefix}-bad"),
            &[("algorithm-type", "fastest")],
        ))
        .await;
    let mut udp = lb_service(&format!("{prefix}-udp"), &[]);
    if let Some(ports) = udp.spec.as_mut().and_then(|s| s.ports.as_mut()) {
        ports[0].port = 53;
        ports[0].protocol = Some("UDP".into());
    }
    let udp = scope.create_service(udp).await;
    let udp_lb = sim_admin
        .create_load_balancer(
            LoadBalancerSeed::new(format!("{prefix}-udp"))
                .location("nbg1")
                .label("hcloud-ccm/service-uid", udp.metadata.uid.clone().unwrap())
                .service(ServiceSeed::tcp(80, node_port(&udp))),
        )
        .await
        .unwrap();
    let udp_lb_id = udp_lb["id"].as_i64().unwrap();
    let multi = scope
        .create_service(lb_service(
            &format!("{prefix}-multi"),
            &[
                ("name", &format!("{prefix}-multi")),
                ("type", "lb21"),
                ("use-private-ip", "true"),
            ],
        ))
        .await;
    sim_admin
        .create_load_balancer(
            LoadBalancerSeed::new(format!("{prefix}-multi"))
                .location("nbg1")
                .label(
                    "hcloud-ccm/service-uid",
                    multi.metadata.uid.clone().unwrap(),
                )
                .service(ServiceSeed::tcp(80, node_port(&multi))),
        )
        .await
        .unwrap();
    // A Node its kubelet registered whose server does not exist (yet): it stays as it is.
    scope
        .create_node(kubelet_node(&format!("{prefix}-ghost")))
        .await;

    // Carried out, one controller after the other (each on the world the previous one left):
    // every time, the writes the plan names are the writes made.
    let ccm = scope.admin_access("ccm").await;
    let phase = Phase {
        plane,
        sim: &sim,
        planner: kubeconfig,
        ccm: &ccm.kubeconfig,
        account: &ccm.account,
        network: &network,
        dir: scope.dir.path(),
    };
    let planned = phase.carry_out("cloud-node-controller").await;
    let ghost = format!("{prefix}-ghost");
    assert!(
        !planned.contains(&format!("patch nodes {ghost}")),
        "a Node without a server is not initialized: {planned:?}"
    );
    assert!(
        planned.contains(&format!("patch nodes {new}"))
            && planned.contains(&format!("patch nodes/status {new}")),
        "{planned:?}"
    );
    let planned = phase.carry_out("cloud-node-lifecycle-controller").await;
    assert!(
        planned.contains(&format!("delete nodes {prefix}-gone"))
            && planned.contains(&format!("patch nodes {prefix}-off")),
        "{planned:?}"
    );
    // The UDP-only Service: its load balancer deleted, a Warning naming the port, no status.
    let services_plan = phase.plan(Some("service-lb-controller")).await;
    let udp_plan = object(
        &services_plan,
        "Service",
        &format!("{namespace}/{prefix}-udp"),
    );
    assert_eq!(
        targets(udp_plan),
        [
            "add finalizer service.kubernetes.io/load-balancer-cleanup".to_owned(),
            format!("delete load balancer \"{prefix}-udp\" (ID {udp_lb_id})"),
        ],
        "{udp_plan:#}"
    );
    assert_eq!(
        udp_plan["writes"],
        json!([
            format!("patch services/status {namespace}/{prefix}-udp"),
            "DELETE /load_balancers/{id}",
        ]),
        "{udp_plan:#}"
    );
    let unsupported = |object: &Value| -> Vec<String> {
        object["warnings"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|w| w["reason"] == "UnsupportedProtocolConfigured")
            .map(|w| w["message"].as_str().unwrap().to_owned())
            .collect()
    };
    let udp_warning = format!(
        "no load balancer is made for service with name {prefix}-udp: Hetzner Cloud load balancers carry TCP only (HTTP and HTTPS run over TCP) and none of its ports is TCP: port 53 is UDP. Any load balancer it has is deleted; add a TCP port to get one"
    );
    assert_eq!(
        unsupported(udp_plan),
        [udp_warning.as_str()],
        "{udp_plan:#}"
    );
    let planned = phase.carry_out("service-lb-controller").await;
    for expected in [
        "POST /load_balancers".to_owned(),
        "DELETE /load_balancers/{id}".to_owned(),
        "POST /load_balancers/{id}/actions/change_algorithm".to_owned(),
        "POST /load_balancers/{id}/actions/change_type".to_owned(),
        "POST /load_balancers/{id}/actions/attach_to_network".to_owned(),
        format!("patch services/status {namespace}/{prefix}-bad"),
    ] {
        assert!(planned.contains(&expected), "{expected} in {planned:?}");
    }
    let planned = phase.carry_out("node-route-controller").await;
    assert!(
        planned.contains(&"POST /networks/{id}/actions/add_route".to_owned())
            && planned.contains(&format!("patch nodes/status {new}")),
        "{planned:?}"
    );

    // Settled: what is left are Warnings and the broken annotation, and every controller
    // running together writes nothing but the events that say so.
    let plan = phase.plan(None).await;
    assert_eq!(change_count(&plan), 0, "{plan:#}");
    let udp_plan = object(&plan, "Service", &format!("{namespace}/{prefix}-udp"));
    assert_eq!(unsupported(udp_plan), [udp_warning], "{udp_plan:#}");
    assert_eq!(
        udp_plan["warnings"].as_array().unwrap().len(),
        1,
        "{udp_plan:#}"
    );
    let state = sim_admin.state().await.unwrap();
    let lbs = state["load_balancers"].as_array().unwrap();
    assert!(
        !lbs.iter().any(|lb| lb["id"] == udp_lb_id),
        "the UDP-only Service's load balancer is deleted: {lbs:#?}"
    );
    let bad = object(&plan, "Service", &format!("{namespace}/{prefix}-bad"));
    assert!(
        bad["errors"][0]
            .as_str()
            .unwrap()
            .contains("algorithm-type"),
        "{bad:#}"
    );
    let events = format!("{prefix}-udp.");
    let made = phase
        .run_until(None, |written| {
            written
                .iter()
                .any(|w| w.contains(" events ") && w.contains(&events))
        })
        .await;
    assert!(
        made.iter().all(|w| w.contains(" events ")),
        "only events are written: {made:?}"
    );
}

/// Runs of `hcloud-ccm` (as `account`, with `ccm`) and of its plan (with `planner`) against one
/// cluster and simulator.
struct Phase<'a> {
    plane: &'a ControlPlane,
    sim: &'a Simulator,
    planner: &'a Path,
    ccm: &'a Path,
    account: &'a str,
    network: &'a str,
    dir: &'a Path,
}

impl Phase<'_> {
    /// The plan as JSON, of `controller` (`None`: all).
    async fn plan(&self, controller: Option<&str>) -> Value {
        let only = controller.map(|c| format!("--controllers={c}"));
        let mut args = vec!["-o", "json"];
        args.extend(only.as_deref());
        let out = run_plan(self.sim, self.planner, self.network, &args).await;
        serde_json::from_slice(&out.stdout).unwrap_or_else(|err| {
            panic!(
                "plan: {err}\n{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        })
    }

    /// Plan `controller`, then run it until the plan names no change; the writes it made are
    /// the writes the plan named. Returns them.
    async fn carry_out(&self, controller: &str) -> Vec<String> {
        let plan = self.plan(Some(controller)).await;
        let mut named: Vec<String> = plan["objects"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|o| o["writes"].as_array().cloned().unwrap_or_default())
            .map(|w| w.as_str().unwrap().to_owned())
            .collect();
        named.sort();
        assert!(!named.is_empty(), "{controller} has work: {plan:#}");
        let made = self.run_until(Some(controller), |_| true).await;
        let mut made: Vec<String> = made
            .into_iter()
            .filter(|w| !w.contains(" events "))
            .collect();
        made.sort();
        assert_eq!(
            named, made,
            "{controller}: named by the plan, then made; plan: {plan:#}"
        );
        named
    }

    /// Run `controller` (`None`: all) until the plan names no change and `done` holds for the
    /// writes made so far (Kubernetes writes as `verb resource[/subresource] [namespace/]name`,
    /// then the cloud's as `METHOD /path`). Returns the writes.
    async fn run_until(
        &self,
        controller: Option<&str>,
        mut done: impl FnMut(&[String]) -> bool,
    ) -> Vec<String> {
        self.sim.admin().reset_request_counts().await.unwrap();
        let before = audit_writes(self.plane, self.account).len();
        let name = controller.unwrap_or("all");
        let log_path = self.dir.join(format!("{name}.log"));
        let log = std::fs::File::create(&log_path).unwrap();
        let only = controller.map(|c| format!("--controllers={c}"));
        let mut args = vec!["--leader-elect=false", "--secure-port=0"];
        args.extend(only.as_deref());
        let mut ccm = command(self.sim, self.ccm, self.network, &args)
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
        let made = loop {
            if let Ok(Some(status)) = ccm.try_wait() {
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                panic!("hcloud-ccm ({name}) exited with {status}:\n{log}");
            }
            let plan = self.plan(controller).await;
            let made = self.writes_since(before).await;
            if change_count(&plan) == 0 && done(&made) {
                break made;
            }
            if tokio::time::Instant::now() > deadline {
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                panic!("{name} did not finish; plan: {plan:#}\nwrites: {made:?}\nlog:\n{log}");
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        };
        if let Some(pid) = ccm.id() {
            let _ = std::process::Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status();
        }
        if tokio::time::timeout(Duration::from_secs(10), ccm.wait())
            .await
            .is_err()
        {
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            panic!("hcloud-ccm ({name}) did not stop within 10 s of SIGTERM:\n{log}");
        }
        // Nothing more after the plan had nothing left (events aside: a failure that repeats
        // is reported again).
        let objects = |writes: Vec<String>| -> Vec<String> {
            writes
                .into_iter()
                .filter(|w| !w.contains(" events "))
                .collect()
        };
        let after = self.writes_since(before).await;
        assert_eq!(
            objects(made.clone()),
            objects(after),
            "{name} wrote after it had nothing left to do"
        );
        made
    }

    async fn writes_since(&self, audit_before: usize) -> Vec<String> {
        let mut made = audit_writes(self.plane, self.account)[audit_before..].to_vec();
        let counts = self.sim.admin().request_counts().await.unwrap();
        for (request, n) in cloud_writes(&counts) {
            made.extend(std::iter::repeat_n(request, n as usize));
        }
        made
    }
}

/// The node port the apiserver gave the Service's first port.
fn node_port(service: &Service) -> u16 {
    let port = service.spec.as_ref().unwrap().ports.as_ref().unwrap()[0].node_port;
    u16::try_from(port.unwrap()).unwrap()
}

fn change_count(plan: &Value) -> usize {
    plan["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["changes"].as_array().map_or(0, Vec::len))
        .sum()
}

/// The writes `account` made, oldest first, as `verb resource[/subresource] [namespace/]name`
/// (its leader-election leases aside).
fn audit_writes(plane: &ControlPlane, account: &str) -> Vec<String> {
    audit_writes_of(plane, account)
        .into_iter()
        .filter(|e| e["objectRef"]["resource"] != "leases")
        .map(|e| {
            let r = &e["objectRef"];
            let resource = match r["subresource"].as_str() {
                Some(sub) => format!("{}/{sub}", r["resource"].as_str().unwrap_or_default()),
                None => r["resource"].as_str().unwrap_or_default().to_owned(),
            };
            let name = match r["namespace"].as_str() {
                Some(ns) => format!("{ns}/{}", r["name"].as_str().unwrap_or_default()),
                None => r["name"].as_str().unwrap_or_default().to_owned(),
            };
            format!(
                "{} {resource} {name}",
                e["verb"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

/// The plan command's exit statuses are distinct: an invalid command line or configuration exits
/// 3, never 2 (which means "changes" with `--detailed-exitcode`), and `--help` documents them in
/// a section of its own.
#[test]
fn invalid_configuration_exits_3_and_help_has_a_plan_section() {
    let plan = |args: &[&str], token: Option<&str>| {
        let mut command = std::process::Command::new(BIN);
        command.env_clear().arg("plan").args(args);
        if let Some(token) = token {
            command.env("HCLOUD_TOKEN", token);
        }
        command.output().unwrap()
    };
    for (args, token, names) in [
        (
            &["-o", "yaml", "--detailed-exitcode"][..],
            Some(TOKEN),
            "--output",
        ),
        (
            &["--detailed-exitcode", "--no-such-flag"],
            Some(TOKEN),
            "--no-such-flag",
        ),
        (
            &["--detailed-exitcode", "--cloud-provider=hcloud"],
            None,
            "HCLOUD_TOKEN",
        ),
        (
            &[
                "--cloud-provider=hcloud",
                "--route-reconciliation-period=soon",
            ],
            Some(TOKEN),
            "--route-reconciliation-period",
        ),
    ] {
        let out = plan(args, token);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{args:?}: {stderr}");
        assert!(stderr.contains(names), "{args:?} names {names}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}: no plan");
    }
    // The controller manager itself keeps the upstream status 2.
    let out = std::process::Command::new(BIN)
        .env_clear()
        .arg("--no-such-flag")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));

    for args in [&["--help"][..], &["plan", "--help"]] {
        let out = std::process::Command::new(BIN)
            .env_clear()
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(
            help.contains("\nPlan: hcloud-ccm plan [-o text|json] [--detailed-exitcode]"),
            "{args:?}: {help}"
        );
        for status in [
            "0 the plan was written",
            "2 changes",
            "1 an error",
            "3 an invalid",
        ] {
            assert!(help.contains(status), "{args:?}: {status} missing");
        }
    }
    let short = std::process::Command::new(BIN)
        .env_clear()
        .arg("-h")
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&short.stdout).contains("hcloud-ccm plan [-o text|json]"),
        "-h shows the plan usage"
    );
}

/// The reasons and messages of `object`'s Warnings, as `reason: message`.
fn warnings(object: &Value) -> Vec<String> {
    object["warnings"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|w| {
            format!(
                "{}: {}",
                w["reason"].as_str().unwrap_or_default(),
                w["message"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

#[tokio::test]
async fn plan_shows_the_honest_warnings_and_the_adoption_of_a_re_created_services_load_balancer() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let scope = Scope::new("planwarn").await;
    let (sim, network, _) = simulator_with_network(&scope).await;
    let prefix = scope.id();
    let sim_admin = sim.admin();

    // A re-created Service, with a typo, source ranges and a location its load balancer is not
    // in; the load balancer its deleted predecessor left, labelled with that one's UID.
    let kept = format!("{prefix}-kept");
    let mut reborn = lb_service(
        &format!("{prefix}-reborn"),
        &[("name", &kept), ("locaton", "nbg1"), ("location", "nbg1")],
    );
    if let Some(spec) = reborn.spec.as_mut() {
        spec.load_balancer_source_ranges = Some(vec!["203.0.113.0/24".into()]);
    }
    let reborn = scope.create_service(reborn).await;
    let reborn_uid = reborn.metadata.uid.clone().unwrap();
    sim_admin
        .create_load_balancer(LoadBalancerSeed::new(&kept).location("fsn1").label(
            "hcloud-ccm/service-uid",
            "0d1e7e0d-0000-4000-8000-000000000001",
        ))
        .await
        .unwrap();
    // A live Service's load balancer, and a second Service asking for it by name.
    let taken = format!("{prefix}-taken");
    let owner = scope
        .create_service(lb_service(&format!("{prefix}-owner"), &[("name", &taken)]))
        .await;
    let owner_uid = owner.metadata.uid.clone().unwrap();
    sim_admin
        .create_load_balancer(
            LoadBalancerSeed::new(&taken)
                .location("nbg1")
                .label("hcloud-ccm/service-uid", owner_uid.clone()),
        )
        .await
        .unwrap();
    scope
        .create_service(lb_service(
            &format!("{prefix}-intruder"),
            &[("name", &taken)],
        ))
        .await;

    let planner = scope.admin_access("planner").await;
    let plan = plan_json(&sim, &planner.kubeconfig, &network, &[], 0).await;
    let namespace = scope.namespace();

    let reborn = object(&plan, "Service", &format!("{namespace}/{prefix}-reborn"));
    let changes = targets(reborn);
    assert!(
        changes
            .iter()
            .any(|c| c.ends_with(&format!("set label hcloud-ccm/service-uid={reborn_uid}"))),
        "{changes:?}"
    );
    assert!(
        !changes
            .iter()
            .any(|c| c.starts_with("create load balancer")),
        "adopted, not created: {changes:?}"
    );
    let said = warnings(reborn);
    let has = |part: &str| said.iter().any(|w| w.contains(part));
    assert!(
        has("LoadBalancerSourceRangesIgnored: spec.loadBalancerSourceRanges is ignored"),
        "{said:?}"
    );
    assert!(
        has(
            "UnknownAnnotation: annotation load-balancer.hetzner.cloud/locaton is not one this CCM reads and is ignored; the closest known key is load-balancer.hetzner.cloud/location"
        ),
        "{said:?}"
    );
    assert!(
        has("LoadBalancerNotMoved: load-balancer.hetzner.cloud/location: load balancer"),
        "{said:?}"
    );
    assert!(has("stays in fsn1, not nbg1"), "{said:?}");

    let intruder = object(&plan, "Service", &format!("{namespace}/{prefix}-intruder"));
    assert!(
        warnings(intruder)
            .iter()
            .any(|w| w.starts_with("LoadBalancerOwnedByOtherService:")
                && w.contains(&format!("belongs to the Service with UID {owner_uid}"))
                && w.contains("which exists in this cluster")),
        "{intruder:#}"
    );
    assert!(
        !targets(intruder).iter().any(|c| c.contains("set label")),
        "{intruder:#}"
    );
}

/// `plan` shows, before the load balancer is made, that a server without a public IPv4 in its
/// network is a target over it and that the Node of one in no network is left out, and why;
/// with the opt-in setting, a cordoned Node is no target either.
#[tokio::test]
async fn plan_shows_servers_without_a_public_ipv4_as_private_targets_or_left_out() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let scope = Scope::new("plannov4").await;
    let (sim, network, network_id) = simulator_with_network(&scope).await;
    let prefix = scope.id();
    let sim_admin = sim.admin();
    // A cordoned Node besides: no target with the opt-in setting.
    for (suffix, public_ipv4, in_network) in [
        ("public", true, true),
        ("private", false, true),
        ("isolated", false, false),
        ("cordoned", true, true),
    ] {
        let name = format!("{prefix}-{suffix}");
        let id =
            ccm::create_server(&sim, &name, public_ipv4, in_network.then_some(network_id)).await;
        scope
            .create_node(Node {
                metadata: ObjectMeta {
                    name: Some(name),
                    ..ObjectMeta::default()
                },
                spec: Some(NodeSpec {
                    provider_id: Some(format!("hcloud://{id}")),
                    unschedulable: Some(suffix == "cordoned"),
                    ..NodeSpec::default()
                }),
                status: None,
            })
            .await;
    }
    scope
        .create_service(lb_service(&format!("{prefix}-web"), &[]))
        .await;

    let planner = scope.admin_access("planner").await;
    let plan = plan_json(
        &sim,
        &planner.kubeconfig,
        &network,
        &["--hcloud-load-balancers-exclude-cordoned-nodes=true"],
        0,
    )
    .await;
    let web = object(
        &plan,
        "Service",
        &format!("{}/{prefix}-web", scope.namespace()),
    );
    let changes = targets(web);
    assert!(
        changes.iter().any(|c| c.starts_with("create load balancer")
            && c.ends_with("2 targets, 1 of them over the private network)")),
        "{changes:?}"
    );
    let said = warnings(web);
    let isolated = format!("{prefix}-isolated");
    assert!(
        said.iter().any(|w| w.starts_with(&format!(
            "ServerWithoutPublicIPv4: (on Node {isolated}) Node {isolated} is no target"
        ))),
        "{said:?}"
    );
    assert!(
        !said
            .iter()
            .any(|w| w.contains(&format!("{prefix}-private "))),
        "{said:?}"
    );
    // Nothing was made.
    let state = sim_admin.state().await.unwrap();
    assert!(
        state["load_balancers"].as_array().is_none_or(Vec::is_empty),
        "{state}"
    );
}

/// `plan` shows, before anything is made, that a Service naming a TLS Secret gets its
/// certificate uploaded from that Secret; with Secrets turned off, it says why the Service
/// cannot be planned instead.
#[tokio::test]
async fn plan_shows_the_upload_of_a_services_tls_secret() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let scope = Scope::new("plantls").await;
    let (sim, network, _) = simulator_with_network(&scope).await;
    let prefix = scope.id();
    Api::<k8s_openapi::api::core::v1::Secret>::namespaced(scope.admin.clone(), scope.namespace())
        .create(
            &PostParams::default(),
            &crate::support::tls_secret("web-tls", "web.example.com"),
        )
        .await
        .unwrap();
    scope
        .create_service(lb_service(
            &format!("{prefix}-web"),
            &[
                ("protocol", "https"),
                ("http-certificate-secret", "web-tls"),
            ],
        ))
        .await;
    let planner = scope.admin_access("planner").await;
    let web = |plan: &Value| {
        object(
            plan,
            "Service",
            &format!("{}/{prefix}-web", scope.namespace()),
        )
        .clone()
    };
    // The plan, having exited with `status` (1: a Service could not be planned).
    let plan = |extra: &'static [&'static str], status: i32| {
        let (sim, network, kubeconfig) = (&sim, &network, planner.kubeconfig.clone());
        async move { plan_json(sim, &kubeconfig, network, extra, status).await }
    };
    let changes = targets(&web(&plan(&[], 0).await));
    let upload = format!(
        "create certificate \"ccm-tls-secret-{}\" uploaded from Secret {}/web-tls (content ",
        scope
            .services()
            .get(&format!("{prefix}-web"))
            .await
            .unwrap()
            .metadata
            .uid
            .unwrap(),
        scope.namespace()
    );
    assert!(
        changes.iter().any(|c| c.starts_with(&upload)),
        "{upload} in {changes:?}"
    );
    assert!(
        changes
            .iter()
            .any(|c| c.starts_with("create load balancer")),
        "{changes:?}"
    );

    let off = web(&plan(&["--hcloud-load-balancers-tls-secrets=false"], 1).await);
    assert!(
        off.to_string()
            .contains("this controller reads no Secrets (turned off in its settings)"),
        "{off:#}"
    );
    // Nothing was made.
    let state = sim.admin().state().await.unwrap();
    assert!(
        state["certificates"].as_array().is_none_or(Vec::is_empty),
        "{state}"
    );
}

/// `plan` shows the owners of a shared load balancer that does not exist yet: each would
/// create it when synced first, and says that the others then add their ports.
#[tokio::test]
async fn plan_shows_a_shared_load_balancer_before_it_is_made() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let scope = Scope::new("planshared").await;
    let (sim, network, _) = simulator_with_network(&scope).await;
    let prefix = scope.id();
    for name in ["web", "api"] {
        scope
            .create_service(lb_service(
                &format!("{prefix}-{name}"),
                &[("shared-load-balancer", "shop-lb")],
            ))
            .await;
    }
    let planner = scope.admin_access("planner").await;
    let plan = plan_json(&sim, &planner.kubeconfig, &network, &[], 0).await;
    for name in ["web", "api"] {
        let service = object(
            &plan,
            "Service",
            &format!("{}/{prefix}-{name}", scope.namespace()),
        );
        let changes = targets(service);
        assert!(
            changes
                .iter()
                .any(|c| c.starts_with("create load balancer \"shop-lb\"")
                    && c.contains("shared: created by the first of its owners synced")),
            "{changes:?}"
        );
    }
    let state = sim.admin().state().await.unwrap();
    assert!(
        state["load_balancers"].as_array().is_none_or(Vec::is_empty),
        "{state}"
    );
}
