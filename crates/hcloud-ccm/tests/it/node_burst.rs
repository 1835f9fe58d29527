//! Nodes joining at once, through the binary against the control plane and the simulator: each
//! costs the node controller two writes (the patch of providerID, labels and taints; the
//! status patch of its addresses), and its `Synced` event goes through a client of its own,
//! so that the events of a burst do not pace the Nodes.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::ccm;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use ccm::{TOKEN, audit_writes_of, spawn_ccm};
use hcloud_sim::{SeedFile, ServerSeed, SimConfig, Simulator};
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use kube_harness::{ControlPlane, UNINITIALIZED_TAINT, eventually, has_taint, kubelet_node};

use crate::support::scope::Scope;

/// Whether the CCM initialised `name`: its taint gone and a providerID set.
async fn initialized(nodes: &Api<Node>, name: &str) -> bool {
    let node = nodes.get(name).await.unwrap();
    !has_taint(&node, UNINITIALIZED_TAINT)
        && node
            .spec
            .and_then(|s| s.provider_id)
            .is_some_and(|id| id.starts_with("hcloud://"))
}

/// The writes of the CCM's client `client` (the last word of its user agent) as
/// ServiceAccount `kube-system/<account>`, as `verb resource[/subresource]` → count.
fn writes_of(plane: &ControlPlane, account: &str, client: &str) -> BTreeMap<String, u64> {
    let mut writes = BTreeMap::new();
    for event in audit_writes_of(plane, account) {
        let agent = event["userAgent"].as_str().unwrap_or_default();
        if !agent.starts_with("hcloud-ccm/") || agent.rsplit(' ').next() != Some(client) {
            continue;
        }
        let object = &event["objectRef"];
        let mut resource = object["resource"].as_str().unwrap_or("?").to_owned();
        if let Some(sub) = object["subresource"].as_str() {
            resource = format!("{resource}/{sub}");
        }
        let verb = event["verb"].as_str().unwrap_or("?");
        *writes.entry(format!("{verb} {resource}")).or_default() += 1;
    }
    writes
}

/// Ten tainted Nodes, their servers in place; the node controller's client may make 20
/// requests at once and then one a second. The first Node joins alone (the controller is
/// running), the other nine at once: their 18 writes fit the client's burst, their events go
/// through the events client, so all are initialised within seconds, not one a second. Each
/// Node cost the node controller exactly its two patches.
#[tokio::test]
async fn a_burst_costs_two_writes_per_node_and_its_events_do_not_pace_it() {
    let scope = Scope::new("burst").await;
    let sim = Simulator::start(SimConfig::default().token(TOKEN))
        .await
        .unwrap();
    let names: Vec<String> = (0..10)
        .map(|i| scope.name(&format!("joiner-{i}")))
        .collect();
    sim.admin()
        .seed(&SeedFile {
            servers: names.iter().map(ServerSeed::new).collect(),
            ..SeedFile::default()
        })
        .await
        .unwrap();
    let access = scope.admin_access("ccm").await;
    let _ccm = spawn_ccm(
        &access.kubeconfig,
        &sim,
        &[("HCLOUD_LOAD_BALANCERS_ENABLED", "false")],
        &[
            "--kube-api-qps=1",
            "--kube-api-burst=20",
            &scope.lease_flag(),
        ],
    );

    let nodes = scope.nodes();
    scope.create_node(kubelet_node(&names[0])).await;
    eventually(
        "the first Node initialised",
        Duration::from_secs(60),
        || async { initialized(&nodes, &names[0]).await.then_some(()) },
    )
    .await;

    let started = Instant::now();
    for name in &names[1..] {
        scope.create_node(kubelet_node(name)).await;
    }
    eventually(
        "every Node initialised",
        Duration::from_secs(60),
        || async {
            for name in &names[1..] {
                if !initialized(&nodes, name).await {
                    return None;
                }
            }
            Some(())
        },
    )
    .await;
    let took = started.elapsed();
    // With the events in the same bucket, the last Nodes wait about a second per event.
    assert!(took < Duration::from_secs(5), "the burst took {took:?}");

    let events = eventually("the Synced events", Duration::from_secs(30), || async {
        let writes = writes_of(scope.plane, &access.account, "node-controller-events");
        (writes.get("create events").copied().unwrap_or(0) >= 10).then_some(writes)
    })
    .await;
    assert_eq!(events.len(), 1, "{events:?}");
    let node_writes = writes_of(scope.plane, &access.account, "node-controller");
    assert_eq!(
        node_writes,
        BTreeMap::from([
            ("patch nodes".to_owned(), 10),
            ("patch nodes/status".to_owned(), 10)
        ]),
        "the node controller's writes"
    );
}
