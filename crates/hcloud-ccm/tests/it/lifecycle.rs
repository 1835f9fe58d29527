//! The Node lifecycle through the binary, against the control plane and the simulator: what a
//! cluster sees when servers change while Nodes are NotReady, and when the API token belongs
//! to another project.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::{ccm, events};

use std::time::{Duration, Instant};

use ccm::{TOKEN, spawn_ccm};
use hcloud_sim::{ServerSeed, SimConfig, Simulator};
use k8s_openapi::api::core::v1::{Node, NodeSpec, Service};
use kube::api::{ObjectMeta, Patch, PatchParams};
use kube_harness::{eventually, has_taint};
use serde_json::json;

use crate::support::scope::{Access, Scope};

const SHUTDOWN_TAINT: &str = "node.cloudprovider.kubernetes.io/shutdown";

/// The binary in `scope` against `sim`, with its defaults (monitor period 5 s, status period
/// 15 s).
async fn start_ccm(scope: &Scope, sim: &Simulator) -> (Access, tokio::process::Child) {
    let access = scope.admin_access("ccm").await;
    let ccm = spawn_ccm(
        &access.kubeconfig,
        sim,
        &[("HCLOUD_LOAD_BALANCERS_LOCATION", "fsn1")],
        &[&scope.lease_flag()],
    );
    (access, ccm)
}

/// A Node of server `id` in `scope`, registered with its providerID and NotReady.
async fn not_ready_node(scope: &Scope, name: &str, id: i64) {
    let node = Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            provider_id: Some(format!("hcloud://{id}")),
            ..NodeSpec::default()
        }),
        status: None,
    };
    scope.create_node(node).await;
    set_ready(scope, name, false).await;
}

/// Set Node `name`'s Ready condition, as its kubelet would.
pub(crate) async fn set_ready(scope: &Scope, name: &str, ready: bool) {
    let (status, reason) = if ready {
        ("True", "KubeletReady")
    } else {
        ("False", "KubeletNotReady")
    };
    scope
        .nodes()
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": {"conditions": [{
                "type": "Ready", "status": status, "reason": reason,
                "lastHeartbeatTime": "2026-01-01T00:00:00Z",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }]}})),
        )
        .await
        .unwrap();
}

/// Cloud server `name` in `sim`: its ID.
pub(crate) async fn seed(sim: &Simulator, name: &str) -> i64 {
    sim.admin()
        .create_server(ServerSeed::new(name))
        .await
        .unwrap()["id"]
        .as_i64()
        .unwrap()
}

/// Within one status period a NotReady Node's server is deleted and another server powered
/// on, and a second NotReady Node's server is powered off while a new server is created: the
/// counts stay as they were, yet the first Node is deleted and the second gets the shutdown
/// taint, each within 30 s.
#[tokio::test]
async fn changes_that_cancel_out_in_one_period_are_seen_within_30_seconds() {
    let scope = Scope::new("lifecycle").await;
    let sim = Simulator::start(SimConfig::default().token(TOKEN))
        .await
        .unwrap();
    let (doomed_node, dozing_node) = (scope.name("doomed"), scope.name("dozing"));
    let doomed = seed(&sim, &doomed_node).await;
    let sleepy = seed(&sim, "sleepy").await;
    let dozing = seed(&sim, &dozing_node).await;
    sim.admin().set_server_status(sleepy, "off").await.unwrap();
    let nodes = scope.nodes();
    not_ready_node(&scope, &doomed_node, doomed).await;
    not_ready_node(&scope, &dozing_node, dozing).await;
    let _ccm = start_ccm(&scope, &sim).await;
    // Progress first: the lifecycle checks run (the status check counts the servers).
    eventually(
        "the first status checks",
        Duration::from_secs(60),
        || async {
            let counts = sim.admin().request_counts().await.unwrap();
            (counts.get("GET /servers").copied().unwrap_or(0) >= 4).then_some(())
        },
    )
    .await;

    sim.admin().delete_server(doomed).await.unwrap();
    sim.admin()
        .set_server_status(sleepy, "running")
        .await
        .unwrap();
    sim.admin().set_server_status(dozing, "off").await.unwrap();
    seed(&sim, "newcomer").await;
    let changed = Instant::now();
    eventually(
        "the deleted server's Node is deleted",
        Duration::from_secs(30),
        || async {
            nodes
                .get_opt(&doomed_node)
                .await
                .unwrap()
                .is_none()
                .then_some(())
        },
    )
    .await;
    let deleted_after = changed.elapsed();
    eventually(
        "the shutdown taint",
        Duration::from_secs(30).saturating_sub(changed.elapsed()),
        || async {
            let node = nodes.get_opt(&dozing_node).await.unwrap()?;
            has_taint(&node, SHUTDOWN_TAINT).then_some(())
        },
    )
    .await;
    eprintln!(
        "Node deleted {:.1} s after its server, shutdown taint {:.1} s after the power-off",
        deleted_after.as_secs_f64(),
        changed.elapsed().as_secs_f64()
    );
}

/// The token belongs to another project: it sees none of the Nodes' servers. The CCM says so
/// at start (a `CloudProjectMismatch` Warning), deletes no NotReady Node and creates no load
/// balancer in that project, however long it runs.
#[tokio::test]
async fn a_token_of_another_project_deletes_nothing_and_creates_nothing() {
    let scope = Scope::new("other-project").await;
    let admin = scope.admin.clone();
    // The cluster's servers live in project A; the token is one of project B.
    let project_a = Simulator::start(SimConfig::default().token(TOKEN))
        .await
        .unwrap();
    let node_names = [scope.name("node-0"), scope.name("node-1")];
    let a0 = seed(&project_a, &node_names[0]).await;
    let a1 = seed(&project_a, &node_names[1]).await;
    let project_b = Simulator::start(SimConfig::default().token(TOKEN))
        .await
        .unwrap();
    let nodes = scope.nodes();
    not_ready_node(&scope, &node_names[0], a0).await;
    not_ready_node(&scope, &node_names[1], a1).await;
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80, "protocol": "TCP"}]},
    }))
    .unwrap();
    scope.create_service(service).await;
    let _ccm = start_ccm(&scope, &project_b).await;

    let warning = eventually(
        "the CloudProjectMismatch Warning",
        Duration::from_secs(60),
        || async {
            events(&admin, "default", &node_names[0], "CloudProjectMismatch")
                .await
                .pop()
        },
    )
    .await;
    assert!(
        warning
            .message
            .as_deref()
            .is_some_and(|m| m.contains("another project")),
        "{warning:?}"
    );
    // Progress: the NotReady Nodes are checked again and again (each check asks project B for
    // their servers), and the Service's sync is refused and retried.
    eventually(
        "several checks of both Nodes",
        Duration::from_secs(60),
        || async {
            let counts = project_b.admin().request_counts().await.unwrap();
            (counts.get("GET /servers/{id}").copied().unwrap_or(0) >= 6).then_some(())
        },
    )
    .await;
    eventually("the refused sync", Duration::from_secs(60), || async {
        events(&admin, scope.namespace(), "web", "SyncLoadBalancerFailed")
            .await
            .into_iter()
            .find(|e| {
                e.message
                    .as_deref()
                    .is_some_and(|m| m.contains("not creating"))
            })
    })
    .await;
    for name in &node_names {
        assert!(
            nodes.get_opt(name).await.unwrap().is_some(),
            "{name} deleted"
        );
    }
    let state = project_b.admin().state().await.unwrap();
    assert!(
        state["load_balancers"].as_array().is_none_or(Vec::is_empty),
        "a load balancer in the other project: {state}"
    );
    let counts = project_b.admin().request_counts().await.unwrap();
    assert!(!counts.contains_key("POST /load_balancers"), "{counts:?}");
}
