//! Which server is a Node's, through the binary, against the control plane and the simulator
//! (with its Robot webservice): a providerID the kubelet set is trusted whatever the Node's
//! name (a `NodeNameMismatch` Warning names both), a Node without one is found by its
//! InternalIP, a Node whose InternalIP is no server's stays uninitialised with a
//! `NoMatchingServer` Warning, and `ROBOT_USE_LEGACY_PROVIDER_ID` writes `hcloud://bm-N`.

use std::time::Duration;

use hcloud_sim::{NetworkSeed, ServerSeed};
use k8s_openapi::api::core::v1::{Event, Node, NodeAddress, NodeStatus};
use kube::api::{Patch, PatchParams};
use kube_harness::{UNINITIALIZED_TAINT, eventually, has_taint, kubelet_node};
use serde_json::json;

use crate::robot::{ROBOT_PASSWORD, ROBOT_USER, dedicated, simulator, start_ccm_with};
use crate::support::events;
use crate::support::scope::Scope;

const WAIT: Duration = Duration::from_secs(30);

/// Register Node `name` as a kubelet with `--cloud-provider=external` does, with
/// `provider_id` (`--provider-id`) and `internal_ip` (`--node-ip`) when given.
async fn register(scope: &Scope, name: &str, provider_id: Option<&str>, internal_ip: Option<&str>) {
    let mut node = kubelet_node(name);
    if let Some(spec) = node.spec.as_mut() {
        spec.provider_id = provider_id.map(str::to_owned);
    }
    scope.create_node(node).await;
    let mut addresses: Vec<NodeAddress> = internal_ip
        .map(|ip| NodeAddress {
            type_: "InternalIP".into(),
            address: ip.into(),
        })
        .into_iter()
        .collect();
    addresses.push(NodeAddress {
        type_: "Hostname".into(),
        address: name.into(),
    });
    let status = NodeStatus {
        addresses: Some(addresses),
        ..NodeStatus::default()
    };
    scope
        .nodes()
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({ "status": status })),
        )
        .await
        .unwrap();
}

/// Node `name` once the uninitialized taint is gone.
async fn initialised(scope: &Scope, name: &str) -> Node {
    let nodes = scope.nodes();
    eventually(&format!("Node {name} initialised"), WAIT, || async {
        let node = nodes.get(name).await.unwrap();
        (!has_taint(&node, UNINITIALIZED_TAINT)).then_some(node)
    })
    .await
}

/// The events with `reason` on Node `name`, once there is one.
async fn warned(scope: &Scope, name: &str, reason: &str) -> Vec<Event> {
    eventually(&format!("a {reason} event on {name}"), WAIT, || async {
        let found = events(&scope.admin, "default", name, reason).await;
        (!found.is_empty()).then_some(found)
    })
    .await
}

/// `hcloud-ccm plan -o json` in `scope` against `sim` with Robot on.
async fn plan(scope: &Scope, sim: &hcloud_sim::Simulator) -> serde_json::Value {
    let access = scope.admin_access("plan").await;
    let robot_url = sim.robot_url();
    let env = [
        ("ROBOT_ENABLED", "true"),
        ("ROBOT_USER", ROBOT_USER),
        ("ROBOT_PASSWORD", ROBOT_PASSWORD),
        ("ROBOT_ENDPOINT", robot_url.as_str()),
    ];
    crate::support::ccm::plan_json(&access.kubeconfig, sim, &env, &[]).await
}

/// The reasons of the Warnings `plan` names for Node `name`.
fn planned_warnings(plan: &serde_json::Value, name: &str) -> Vec<String> {
    plan["objects"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|o| o["kind"] == "Node" && o["name"] == name)
        .flat_map(|o| o["warnings"].as_array().cloned().unwrap_or_default())
        .filter_map(|w| w["reason"].as_str().map(str::to_owned))
        .collect()
}

fn provider_id(node: &Node) -> Option<&str> {
    node.spec.as_ref().and_then(|s| s.provider_id.as_deref())
}

fn label<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .map(String::as_str)
}

/// A dedicated Node whose kubelet set `hrobot://N` under a name unlike the Robot server's is
/// initialised as that server, with a Warning naming both names; a Node without a providerID
/// named unlike any server is its cloud server's by its InternalIP (the server's private IP);
/// a Node whose InternalIP no server has keeps its taint, with a Warning naming the IP.
#[tokio::test]
async fn a_kubelet_provider_id_is_trusted_and_a_nameless_node_is_found_by_its_internal_ip() {
    let scope = Scope::new("identity").await;
    let sim = simulator().await;
    let network = sim
        .admin()
        .create_network(NetworkSeed::new("k8s", "10.0.0.0/16").subnet("10.0.1.0/24", "eu-central"))
        .await
        .unwrap();
    let server = sim
        .admin()
        .create_server(ServerSeed {
            networks: vec![network.into()],
            ..ServerSeed::new(scope.name("srv"))
        })
        .await
        .unwrap();
    let server_id = server["id"].as_i64().unwrap();
    let private_ip = server["private_net"][0]["ip"].as_str().unwrap().to_owned();
    let robot_name = scope.name("dedi");
    let (number, _) = dedicated(&sim, &robot_name).await;
    let (worker, nameless, stray) = (
        scope.name("worker"),
        scope.name("nameless"),
        scope.name("stray"),
    );
    let kubelet_id = format!("hrobot://{number}");
    register(&scope, &worker, Some(&kubelet_id), None).await;
    register(&scope, &nameless, None, Some(&private_ip)).await;
    register(&scope, &stray, None, Some("10.0.9.9")).await;

    // plan names the Warnings the node controller records, from the same decision.
    let planned = plan(&scope, &sim).await;
    assert_eq!(
        planned_warnings(&planned, &worker),
        ["NodeNameMismatch"],
        "{planned:#}"
    );
    assert_eq!(
        planned_warnings(&planned, &stray),
        ["NoMatchingServer"],
        "{planned:#}"
    );
    assert!(
        planned_warnings(&planned, &nameless).is_empty(),
        "{planned:#}"
    );
    let _ccm = start_ccm_with(&scope, &sim, &[]).await;

    // The kubelet's providerID: the Robot server's metadata, the providerID kept, and one
    // Warning that names both names.
    let node = initialised(&scope, &worker).await;
    assert_eq!(provider_id(&node), Some(kubelet_id.as_str()));
    assert_eq!(
        label(&node, "instance.hetzner.cloud/provided-by"),
        Some("robot")
    );
    let mismatch = warned(&scope, &worker, "NodeNameMismatch").await;
    let message = mismatch[0].message.clone().unwrap_or_default();
    assert!(
        message.contains(&worker) && message.contains(&robot_name),
        "{message}"
    );

    // No providerID, no server of its name: the cloud server whose private IP it reports.
    let node = initialised(&scope, &nameless).await;
    assert_eq!(
        provider_id(&node),
        Some(format!("hcloud://{server_id}").as_str())
    );
    assert_eq!(
        label(&node, "instance.hetzner.cloud/provided-by"),
        Some("cloud")
    );

    // An InternalIP no server has: uninitialised, with the Warning that says which.
    let unmatched = warned(&scope, &stray, "NoMatchingServer").await;
    let message = unmatched[0].message.clone().unwrap_or_default();
    assert!(message.contains("10.0.9.9"), "{message}");
    let node = scope.nodes().get(&stray).await.unwrap();
    assert!(has_taint(&node, UNINITIALIZED_TAINT));
    assert_eq!(provider_id(&node), None);
}

/// With `ROBOT_USE_LEGACY_PROVIDER_ID=true` a dedicated Node without a providerID gets
/// `hcloud://bm-N`, which the CCM reads as the same server afterwards (it keeps following it).
#[tokio::test]
async fn the_legacy_provider_id_is_written_when_asked_for() {
    let scope = Scope::new("identity-legacy").await;
    let sim = simulator().await;
    let name = scope.name("dedi");
    let (number, server_ip) = dedicated(&sim, &name).await;
    let _ccm = start_ccm_with(&scope, &sim, &[("ROBOT_USE_LEGACY_PROVIDER_ID", "true")]).await;
    register(&scope, &name, None, None).await;
    let node = initialised(&scope, &name).await;
    assert_eq!(
        provider_id(&node),
        Some(format!("hcloud://bm-{number}").as_str())
    );
    // The addresses come with a patch of their own, for the legacy form as for the other.
    let nodes = scope.nodes();
    eventually("the dedicated Node's ExternalIP", WAIT, || async {
        let node = nodes.get(&name).await.unwrap();
        node.status
            .as_ref()
            .and_then(|s| s.addresses.as_ref())
            .is_some_and(|a| a.iter().any(|a| a.address == server_ip))
            .then_some(())
    })
    .await;
}
