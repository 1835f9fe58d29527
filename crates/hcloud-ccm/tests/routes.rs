//! The route controller through the real binary: with HCLOUD_NETWORK and --cluster-cidr, a
//! Node's pod CIDR becomes a route of the network via the Node's private IP, and the Node's
//! NetworkUnavailable condition turns False.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "support/ccm.rs"]
mod ccm;

use std::process::Stdio;
use std::time::Duration;

use ccm::{BIN, TOKEN, simulator_with_host_in_network};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, PostParams};
use kube_harness::{ControlPlane, eventually, kubelet_node};

#[tokio::test]
async fn pod_cidrs_become_routes_of_the_network() {
    let plane = ControlPlane::start().await.unwrap();
    let admin = plane.client().await.unwrap();
    // The CCM runs "on" this server: the metadata service lists its network.
    let (sim, server) = simulator_with_host_in_network("routed-1").await;
    let private_ip = server["private_net"][0]["ip"].as_str().unwrap().to_owned();

    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    plane.write_kubeconfig(&kubeconfig).unwrap();
    let _ccm = tokio::process::Command::new(BIN)
        .env_clear()
        .env("HCLOUD_TOKEN", TOKEN)
        .env("HCLOUD_ENDPOINT", sim.base_url())
        .env("HCLOUD_NETWORK", "k8s")
        .env("HCLOUD_METADATA_ENDPOINT", sim.metadata_url())
        .env("HCLOUD_METRICS_ENABLED", "false")
        .env("HCLOUD_LOAD_BALANCERS_ENABLED", "false")
        .args([
            "--cloud-provider=hcloud",
            &format!("--kubeconfig={}", kubeconfig.display()),
            "--secure-port=0",
            "--allocate-node-cidrs=true",
            "--cluster-cidr=10.244.0.0/16",
            "--route-reconciliation-period=1s",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();

    let nodes: Api<Node> = Api::all(admin);
    let mut node = kubelet_node("routed-1");
    if let Some(spec) = node.spec.as_mut() {
        spec.pod_cidr = Some("10.244.7.0/24".into());
        spec.pod_cidrs = Some(vec!["10.244.7.0/24".into()]);
    }
    nodes.create(&PostParams::default(), &node).await.unwrap();

    let admin_api = sim.admin();
    let route = eventually(
        "the route in the network",
        Duration::from_secs(30),
        || async {
            let state = admin_api.state().await.unwrap();
            state["networks"]
                .as_array()
                .unwrap()
                .iter()
                .find(|n| n["name"] == "k8s")
                .and_then(|n| n["routes"].as_array().cloned())
                .and_then(|routes| routes.into_iter().next())
        },
    )
    .await;
    assert_eq!(route["destination"], "10.244.7.0/24");
    assert_eq!(route["gateway"], private_ip.as_str());

    let condition = eventually(
        "NetworkUnavailable=False",
        Duration::from_secs(30),
        || async {
            nodes
                .get("routed-1")
                .await
                .unwrap()
                .status
                .and_then(|s| s.conditions)
                .and_then(|c| c.into_iter().find(|c| c.type_ == "NetworkUnavailable"))
                .filter(|c| c.status == "False")
        },
    )
    .await;
    assert_eq!(condition.reason.as_deref(), Some("RouteCreated"));
}
