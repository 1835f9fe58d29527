//! `hcloud-ccm plan` on a cluster with work to do: it reports what each controller would
//! change, exits 2 with `--detailed-exitcode`, and writes nothing — neither to the cloud (the
//! simulator's counters) nor to Kubernetes (the apiserver's audit log: not even an Event).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "support/ccm.rs"]
mod ccm;

use std::collections::BTreeMap;
use std::path::Path;

use hcloud_sim::{
    HealthCheckSeed, LoadBalancerSeed, NetworkSeed, ServerSeed, ServiceSeed, SimConfig, Simulator,
};
use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeCondition, NodeSpec, NodeStatus, Service};
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube_harness::{ControlPlane, ensure_namespace, kubelet_node, unique_name};
use serde_json::{Value, json};

use ccm::{BIN, TOKEN, cloud_writes, kube_writes, lb_service, service_account_kubeconfig};

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

async fn run_plan(
    sim: &Simulator,
    kubeconfig: &Path,
    network: &str,
    extra: &[&str],
) -> std::process::Output {
    tokio::process::Command::new(BIN)
        .env_clear()
        .env("HCLOUD_TOKEN", TOKEN)
        .env("HCLOUD_ENDPOINT", sim.base_url())
        .env("HCLOUD_NETWORK", network)
        .env("HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK", "true")
        .env("HCLOUD_LOAD_BALANCERS_LOCATION", "nbg1")
        .arg("plan")
        .args([
            "--cloud-provider=hcloud",
            "--allow-untagged-cloud",
            "--cluster-cidr=10.244.0.0/16",
            "--allocate-node-cidrs=true",
            &format!("--kubeconfig={}", kubeconfig.display()),
        ])
        .args(extra)
        .output()
        .await
        .unwrap()
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
    let plane = ControlPlane::shared().unwrap();
    let admin = plane.client().await.unwrap();
    let sim = Simulator::start(SimConfig::default().token(TOKEN))
        .await
        .unwrap();
    let prefix = unique_name("plan");
    let network = format!("{prefix}-net");
    let sim_admin = sim.admin();
    let network_id = sim_admin
        .create_network(
            NetworkSeed::new(&network, "10.0.0.0/16").subnet("10.0.0.0/24", "eu-central"),
        )
        .await
        .unwrap();
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
    let nodes: Api<Node> = Api::all(admin.clone());
    let new = format!("{prefix}-new");
    let mut node = kubelet_node(&new);
    if let Some(spec) = node.spec.as_mut() {
        spec.pod_cidr = Some("10.244.7.0/24".into());
        spec.pod_cidrs = Some(vec!["10.244.7.0/24".into()]);
    }
    nodes.create(&PostParams::default(), &node).await.unwrap();
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
                ..NodeSpec::default()
            }),
            status: None,
        };
        nodes.create(&PostParams::default(), &node).await.unwrap();
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
    let namespace = "plan";
    ensure_namespace(&admin, namespace).await.unwrap();
    let services: Api<Service> = Api::namespaced(admin.clone(), namespace);
    services
        .create(
            &PostParams::default(),
            &lb_service(&format!("{prefix}-fresh"), 31001, &[]),
        )
        .await
        .unwrap();
    let existing = services
        .create(
            &PostParams::default(),
            &lb_service(
                &format!("{prefix}-tuned"),
                31002,
                &[
                    ("name", &format!("{prefix}-tuned")),
                    ("algorithm-type", "least_connections"),
                ],
            ),
        )
        .await
        .unwrap();
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
                        port: Some(31002),
                        ..HealthCheckSeed::default()
                    }),
                    ..ServiceSeed::tcp(80, 31002)
                }),
        )
        .await
        .unwrap();

    let dir = tempfile::tempdir().unwrap();
    let account = format!("{prefix}-planner");
    let kubeconfig = service_account_kubeconfig(plane, &admin, &account, dir.path()).await;
    sim_admin.reset_request_counts().await.unwrap();

    let out = run_plan(
        &sim,
        &kubeconfig,
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

    // The text form says the same for people.
    let out = run_plan(&sim, &kubeconfig, &network, &[]).await;
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
    let written = kube_writes(plane, &account, &[]);
    assert!(written.is_empty(), "plan wrote to Kubernetes: {written:?}");
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
