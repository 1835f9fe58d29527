//! The service controller through the real binary: a Service of type LoadBalancer gets a
//! Hetzner load balancer (labelled with the Service UID, one service per port to the NodePort,
//! the Node's server as target) and the load balancer's address in its status; deleting the
//! Service deletes the load balancer.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::ccm;

use std::process::Stdio;
use std::time::Duration;

use ccm::{BIN, TOKEN};
use hcloud_sim::{ServerSeed, SimConfig, Simulator};
use k8s_openapi::api::core::v1::{Node, NodeSpec, Service, ServicePort, ServiceSpec};
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use kube_harness::{ControlPlane, ensure_namespace, eventually};

#[tokio::test]
async fn a_load_balancer_service_gets_a_hetzner_load_balancer() {
    let plane = ControlPlane::start().await.unwrap();
    let admin = plane.client().await.unwrap();
    let sim = Simulator::start(SimConfig::default().token(TOKEN))
        .await
        .unwrap();
    let server = sim
        .admin()
        .create_server(ServerSeed::new("web-1"))
        .await
        .unwrap();
    let server_id = server["id"].as_i64().unwrap();

    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    plane.write_kubeconfig(&kubeconfig).unwrap();
    let _ccm = tokio::process::Command::new(BIN)
        .env_clear()
        .env("HCLOUD_TOKEN", TOKEN)
        .env("HCLOUD_ENDPOINT", sim.base_url())
        .env("HCLOUD_METRICS_ENABLED", "false")
        .env("HCLOUD_LOAD_BALANCERS_LOCATION", "fsn1")
        .args([
            "--cloud-provider=hcloud",
            &format!("--kubeconfig={}", kubeconfig.display()),
            "--secure-port=0",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();

    let nodes: Api<Node> = Api::all(admin.clone());
    let node = Node {
        metadata: ObjectMeta {
            name: Some("web-1".into()),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            provider_id: Some(format!("hcloud://{server_id}")),
            ..NodeSpec::default()
        }),
        status: None,
    };
    nodes.create(&PostParams::default(), &node).await.unwrap();

    ensure_namespace(&admin, "shop").await.unwrap();
    let services: Api<Service> = Api::namespaced(admin, "shop");
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
                node_port: Some(30080),
                protocol: Some("TCP".into()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        status: None,
    };
    let created = services
        .create(&PostParams::default(), &service)
        .await
        .unwrap();
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
    assert_eq!(lb["services"][0]["destination_port"], 30080);
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
