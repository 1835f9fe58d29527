//! The service controller through the real binary: a Service of type LoadBalancer gets a
//! Hetzner load balancer (labelled with the Service UID, one service per port to the NodePort,
//! the Node's server as target) and the load balancer's address in its status; deleting the
//! Service deletes the load balancer.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::ccm;

use std::time::Duration;

use ccm::{TOKEN, spawn_ccm};
use hcloud_sim::{ServerSeed, SimConfig, Simulator};
use k8s_openapi::api::core::v1::{Node, NodeSpec, Service, ServicePort, ServiceSpec};
use kube::api::{DeleteParams, ObjectMeta};
use kube_harness::eventually;

use crate::support::scope::Scope;

#[tokio::test]
async fn a_load_balancer_service_gets_a_hetzner_load_balancer() {
    let scope = Scope::new("lb").await;
    let sim = Simulator::start(SimConfig::default().token(TOKEN))
        .await
        .unwrap();
    let name = scope.name("web-1");
    let server = sim
        .admin()
        .create_server(ServerSeed::new(&name))
        .await
        .unwrap();
    let server_id = server["id"].as_i64().unwrap();

    let access = scope.admin_access("ccm").await;
    let _ccm = spawn_ccm(
        &access.kubeconfig,
        &sim,
        &[("HCLOUD_LOAD_BALANCERS_LOCATION", "fsn1")],
        &[&scope.lease_flag()],
    );

    scope
        .create_node(Node {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(NodeSpec {
                provider_id: Some(format!("hcloud://{server_id}")),
                ..NodeSpec::default()
            }),
            status: None,
        })
        .await;

    let services = scope.services();
    let service = Service {
        metadata: ObjectMeta {
            name: Some("web".into()),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".into()),
            ports: Some(vec![ServicePort {
                name: Some("http".into()),
                port: 80,
                protocol: Some("TCP".into()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        status: None,
    };
    let created = scope.create_service(service).await;
    let uid = created.metadata.uid.clone().unwrap();

    let admin_api = sim.admin();
    let lb = eventually("the load balancer", Duration::from_secs(40), || async {
        let state = admin_api.state().await.unwrap();
        state["load_balancers"]
            .as_array()
            .and_then(|lbs| lbs.first().cloned())
            .filter(|lb| !lb["targets"].as_array().is_none_or(|t| t.is_empty()))
    })
    .await;
    assert_eq!(lb["labels"]["hcloud-ccm/service-uid"], uid.as_str());
    let expected_name: String = std::iter::once('a')
        .chain(uid.chars().filter(|c| *c != '-'))
        .take(32)
        .collect();
    assert_eq!(lb["name"], expected_name.as_str());
    assert_eq!(lb["services"][0]["listen_port"], 80);
    // The node port is the one the apiserver picked.
    let node_port = created.spec.as_ref().unwrap().ports.as_ref().unwrap()[0].node_port;
    assert!(node_port.is_some(), "{created:?}");
    assert_eq!(lb["services"][0]["destination_port"], node_port.unwrap());
    assert_eq!(lb["targets"][0]["server"]["id"], server_id);

    let ingress = eventually("status ingress", Duration::from_secs(40), || async {
        services
            .get("web")
            .await
            .unwrap()
            .status
            .and_then(|s| s.load_balancer)
            .and_then(|lb| lb.ingress)
            .filter(|i| !i.is_empty())
    })
    .await;
    // IPs are assigned when the create action finishes; read the load balancer again.
    let state = admin_api.state().await.unwrap();
    let public_ip = state["load_balancers"][0]["public_net"]["ipv4"]["ip"]
        .as_str()
        .map(str::to_owned);
    assert!(public_ip.is_some(), "{state}");
    let reported: Vec<Option<String>> = ingress.iter().map(|i| i.ip.clone()).collect();
    assert!(
        reported.contains(&public_ip),
        "{reported:?} vs {public_ip:?}"
    );

    services
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "the Service and its load balancer gone",
        Duration::from_secs(40),
        || async {
            let gone = services.get_opt("web").await.unwrap().is_none();
            let state = admin_api.state().await.unwrap();
            let lbs_left = state["load_balancers"].as_array().map_or(0, Vec::len);
            (gone && lbs_left == 0).then_some(())
        },
    )
    .await;
}
