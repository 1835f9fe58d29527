//! Taking over from the official Hetzner CCM: zero cloud writes.
//!
//! The simulator is seeded with what the official CCM leaves behind for a set of realistic
//! Services (load balancers carrying only the settings it sends, plus fields a user changed by
//! hand in the console that no annotation sets; targets, services, the network attachment,
//! uploaded and managed certificates; routes), and the control plane with the Nodes and Services
//! it initialised. `hcloud-ccm`, started with the official `deploy/ccm-networks.yaml` arguments
//! and environment, must reconcile everything once without a single write to the cloud, keep
//! every Service's ingress, and `hcloud-ccm plan` must then report nothing to do.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::ccm;

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Duration;

use hcloud_sim::{
    CertificateSeed, HttpSeed, NetworkSeed, ResourceRef, ServerSeed, ServiceSeed, SimConfig,
    Simulator, TargetSeed,
};
use hcloud_sim::{HealthCheckSeed, LoadBalancerSeed};
use k8s_openapi::api::core::v1::{
    LoadBalancerIngress, LoadBalancerStatus, Node, NodeAddress, NodeCondition, NodeSpec,
    NodeStatus, Service, ServiceStatus,
};
use kube::api::{Api, ObjectMeta, Patch, PatchParams};
use serde_json::{Value, json};

use ccm::{
    BIN, TOKEN, cloud_writes, free_port, kube_writes, lb_service, lb_service_with_ports, metric,
    metrics,
};

use crate::support::scope::Scope;

const UID_LABEL: &str = "hcloud-ccm/service-uid";
const FINALIZER: &str = "service.kubernetes.io/load-balancer-cleanup";

/// The arguments of the official `deploy/ccm-networks.yaml` (v1.35).
const OFFICIAL_ARGS: &[&str] = &[
    "--allow-untagged-cloud",
    "--cloud-provider=hcloud",
    "--feature-gates=CloudControllerManagerWatchBasedRoutesReconciliation=true",
    "--route-reconciliation-period=30s",
    "--webhook-secure-port=0",
    "--allocate-node-cidrs=true",
    "--cluster-cidr=10.244.0.0/16",
    "--leader-elect=false",
];

struct Seeded {
    /// Server ID and private IP by node name.
    servers: BTreeMap<String, (i64, String, String)>,
    network: i64,
}

async fn seed_cloud(sim: &Simulator, prefix: &str) -> Seeded {
    let admin = sim.admin();
    let network = admin
        .create_network(
            NetworkSeed::new(format!("{prefix}-net"), "10.0.0.0/16")
                .subnet("10.0.0.0/24", "eu-central"),
        )
        .await
        .unwrap();
    let mut servers = BTreeMap::new();
    for i in 1..=3 {
        let name = format!("{prefix}-node-{i}");
        let server = admin
            .create_server(ServerSeed::new(&name).location("fsn1").network(network))
            .await
            .unwrap();
        let id = server["id"].as_i64().unwrap();
        let private = server["private_net"][0]["ip"].as_str().unwrap().to_owned();
        let public = server["public_net"]["ipv4"]["ip"]
            .as_str()
            .unwrap()
            .to_owned();
        servers.insert(name, (id, private, public));
    }
    Seeded { servers, network }
}

/// A Node as the official CCM leaves it: providerID, its labels, addresses, no taint, a pod CIDR
/// with its route, Ready.
fn initialized_node(name: &str, id: i64, private: &str, public: &str, pod_cidr: &str) -> Node {
    let labels: BTreeMap<String, String> = [
        ("node.kubernetes.io/instance-type", "cx23"),
        ("beta.kubernetes.io/instance-type", "cx23"),
        ("topology.kubernetes.io/region", "fsn1"),
        ("failure-domain.beta.kubernetes.io/region", "fsn1"),
        ("topology.kubernetes.io/zone", "fsn1-dc14"),
        ("failure-domain.beta.kubernetes.io/zone", "fsn1-dc14"),
        ("instance.hetzner.cloud/provided-by", "cloud"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            provider_id: Some(format!("hcloud://{id}")),
            pod_cidr: Some(pod_cidr.to_owned()),
            pod_cidrs: Some(vec![pod_cidr.to_owned()]),
            ..NodeSpec::default()
        }),
        status: Some(NodeStatus {
            addresses: Some(vec![
                NodeAddress {
                    type_: "Hostname".into(),
                    address: name.into(),
                },
                NodeAddress {
                    type_: "ExternalIP".into(),
                    address: public.into(),
                },
                NodeAddress {
                    type_: "InternalIP".into(),
                    address: private.into(),
                },
            ]),
            conditions: Some(vec![
                NodeCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    reason: Some("KubeletReady".into()),
                    ..NodeCondition::default()
                },
                NodeCondition {
                    type_: "NetworkUnavailable".into(),
                    status: "False".into(),
                    reason: Some("RouteCreated".into()),
                    message: Some("RouteController created a route".into()),
                    ..NodeCondition::default()
                },
            ]),
            ..NodeStatus::default()
        }),
    }
}

/// The node ports the apiserver gave the Service's ports, in order.
fn node_ports(service: &Service) -> Vec<u16> {
    service
        .spec
        .as_ref()
        .unwrap()
        .ports
        .as_ref()
        .unwrap()
        .iter()
        .map(|p| u16::try_from(p.node_port.unwrap()).unwrap())
        .collect()
}

/// The ingress the official CCM writes: public IPv4 and IPv6, then the private IPs, each with
/// `ipMode: VIP` (no Service of this corpus uses the PROXY protocol, which makes it `Proxy`).
fn official_ingress(lb: &Value) -> LoadBalancerStatus {
    let mut ips = Vec::new();
    if lb["public_net"]["enabled"] == true {
        ips.push(lb["public_net"]["ipv4"]["ip"].as_str().unwrap().to_owned());
        ips.push(lb["public_net"]["ipv6"]["ip"].as_str().unwrap().to_owned());
    }
    for private in lb["private_net"].as_array().unwrap() {
        ips.push(private["ip"].as_str().unwrap().to_owned());
    }
    LoadBalancerStatus {
        ingress: Some(
            ips.into_iter()
                .map(|ip| LoadBalancerIngress {
                    ip: Some(ip),
                    ip_mode: Some("VIP".to_owned()),
                    ..LoadBalancerIngress::default()
                })
                .collect(),
        ),
    }
}

async fn take_over_status(api: &Api<Service>, name: &str, status: &LoadBalancerStatus) {
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({ "metadata": { "finalizers": [FINALIZER] } })),
    )
    .await
    .unwrap();
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": ServiceStatus {
            load_balancer: Some(status.clone()),
            ..ServiceStatus::default()
        } })),
    )
    .await
    .unwrap();
}

fn server_targets(seeded: &Seeded) -> Vec<TargetSeed> {
    seeded
        .servers
        .values()
        .map(|(id, _, _)| TargetSeed::Server {
            server: ResourceRef::Id(*id),
            use_private_ip: false,
        })
        .collect()
}

/// A TCP health check as the official CCM configures it by default: on the NodePort, the rest
/// the API's defaults.
fn tcp_check(node_port: u16) -> HealthCheckSeed {
    HealthCheckSeed {
        protocol: Some("tcp".into()),
        port: Some(node_port),
        ..HealthCheckSeed::default()
    }
}

#[tokio::test]
async fn taking_over_from_the_official_ccm_writes_nothing_to_the_cloud() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let scope = Scope::new("mig").await;
    let sim = Simulator::start(SimConfig::default().token(TOKEN))
        .await
        .unwrap();
    let prefix = scope.id();
    let seeded = seed_cloud(&sim, prefix).await;
    let services = scope.services();
    let nodes = scope.nodes();

    // Nodes as the official CCM initialised them, and their routes in the network.
    let api = hcloud_api::Client::new(
        hcloud_api::ClientConfig::new(hcloud_api::Token::new(TOKEN)).with_endpoint(sim.base_url()),
    )
    .unwrap();
    for (i, (name, (id, private, public))) in seeded.servers.iter().enumerate() {
        let pod_cidr = format!("10.244.{}.0/24", i + 1);
        let node = initialized_node(name, *id, private, public, &pod_cidr);
        let status = node.status.clone();
        scope.create_node(node).await;
        nodes
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": status })),
            )
            .await
            .unwrap();
        let action = api
            .networks()
            .add_route(
                seeded.network,
                &hcloud_api::models::Route {
                    destination: pod_cidr.clone(),
                    gateway: private.clone(),
                },
            )
            .await
            .unwrap();
        api.actions().wait(&action).await.unwrap();
    }

    // 1. A plain TCP Service: the official defaults (env location fsn1, lb11, network attached).
    let plain = scope.create_service(lb_service("plain", &[])).await;
    // 2. A named load balancer a user tuned in the console: algorithm, health-check timings and
    //    retries, reverse DNS; no annotation sets any of them.
    let tuned = scope
        .create_service(lb_service_with_ports(
            "tuned",
            &[80, 443],
            &[
                ("name", &format!("{prefix}-tuned")),
                ("use-private-ip", "true"),
            ],
        ))
        .await;
    // 3. HTTPS with an uploaded certificate, referenced by name.
    let uploaded = scope
        .create_service(lb_service_with_ports(
            "uploaded",
            &[443],
            &[
                ("protocol", "https"),
                ("http-certificates", &format!("{prefix}-cert")),
            ],
        ))
        .await;
    // 4. HTTPS with a managed certificate the official CCM created.
    let managed = scope
        .create_service(lb_service_with_ports(
            "managed",
            &[443],
            &[
                ("protocol", "https"),
                ("certificate-type", "managed"),
                ("http-managed-certificate-domains", "shop.example.com"),
            ],
        ))
        .await;
    let (plain_port, uploaded_port, managed_port) = (
        node_ports(&plain)[0],
        node_ports(&uploaded)[0],
        node_ports(&managed)[0],
    );
    let tuned_ports = node_ports(&tuned);
    let uid = |s: &Service| s.metadata.uid.clone().unwrap();
    let default_name = |s: &Service| -> String {
        std::iter::once('a')
            .chain(uid(s).chars().filter(|c| *c != '-'))
            .take(32)
            .collect()
    };

    let sim_admin = sim.admin();
    let uploaded_cert = sim_admin
        .create_certificate(CertificateSeed::uploaded(format!("{prefix}-cert")))
        .await
        .unwrap();
    let managed_cert = sim_admin
        .create_certificate(
            CertificateSeed::managed(
                format!("ccm-managed-certificate-{}", uid(&managed)),
                ["shop.example.com"],
            )
            .label(UID_LABEL, uid(&managed)),
        )
        .await
        .unwrap();
    let cert_id = |c: &Value| ResourceRef::Id(c["id"].as_i64().unwrap());
    let https = |listen: u16, node_port: u16, cert: &Value| ServiceSeed {
        protocol: "https".into(),
        listen_port: listen,
        destination_port: Some(node_port),
        http: Some(HttpSeed {
            certificates: vec![cert_id(cert)],
            ..HttpSeed::default()
        }),
        health_check: Some(tcp_check(node_port)),
        ..ServiceSeed::default()
    };
    let with_check = |mut service: ServiceSeed, check: HealthCheckSeed| {
        service.health_check = Some(check);
        service
    };
    let lbs = [
        (
            &plain,
            LoadBalancerSeed::new(default_name(&plain))
                .location("fsn1")
                .label(UID_LABEL, uid(&plain))
                .service(with_check(
                    ServiceSeed::tcp(80, plain_port),
                    tcp_check(plain_port),
                )),
        ),
        (
            &tuned,
            LoadBalancerSeed::new(format!("{prefix}-tuned"))
                .location("fsn1")
                .label(UID_LABEL, uid(&tuned))
                .label("team", "shop")
                .algorithm("least_connections")
                .service(with_check(
                    ServiceSeed::tcp(80, tuned_ports[0]),
                    HealthCheckSeed {
                        interval: Some(5),
                        timeout: Some(3),
                        retries: Some(5),
                        ..tcp_check(tuned_ports[0])
                    },
                ))
                .service(with_check(
                    ServiceSeed::tcp(443, tuned_ports[1]),
                    tcp_check(tuned_ports[1]),
                )),
        ),
        (
            &uploaded,
            LoadBalancerSeed::new(default_name(&uploaded))
                .location("fsn1")
                .label(UID_LABEL, uid(&uploaded))
                .service(https(443, uploaded_port, &uploaded_cert)),
        ),
        (
            &managed,
            LoadBalancerSeed::new(default_name(&managed))
                .location("fsn1")
                .label(UID_LABEL, uid(&managed))
                .service(https(443, managed_port, &managed_cert)),
        ),
    ];
    let mut statuses = BTreeMap::new();
    for (service, seed) in lbs {
        let use_private_ip = service.metadata.name.as_deref() == Some("tuned");
        let mut seed = seed.network(seeded.network, None);
        for target in server_targets(&seeded) {
            seed = seed.target(match target {
                TargetSeed::Server { server, .. } => TargetSeed::Server {
                    server,
                    use_private_ip,
                },
                other => other,
            });
        }
        let lb = sim_admin.create_load_balancer(seed).await.unwrap();
        let status = official_ingress(&lb);
        let name = service.metadata.name.clone().unwrap();
        take_over_status(&services, &name, &status).await;
        statuses.insert(name, status);
    }

    // The official CCM is gone; hcloud-ccm starts with its arguments and environment.
    sim_admin.reset_request_counts().await.unwrap();
    let dir = scope.dir.path();
    // hcloud-ccm runs as a ServiceAccount of its own, so the audit log tells its writes apart.
    let access = scope.admin_access("ccm").await;
    let (account, kubeconfig) = (&access.account, &access.kubeconfig);
    let metrics_port = free_port();
    // The CCM's host is the first server, attached to the network (the attached check).
    let first_server = seeded
        .servers
        .values()
        .next()
        .map(|(id, _, _)| *id)
        .unwrap();
    sim_admin
        .set_metadata_server(Some(first_server))
        .await
        .unwrap();
    let env = |cmd: &mut tokio::process::Command| {
        cmd.env_clear()
            .env("HCLOUD_TOKEN", TOKEN)
            .env("HCLOUD_ENDPOINT", sim.base_url())
            .env("HCLOUD_METADATA_ENDPOINT", sim.metadata_url())
            .env("HCLOUD_NETWORK", format!("{prefix}-net"))
            .env("HCLOUD_LOAD_BALANCERS_LOCATION", "fsn1")
            .env(
                "HCLOUD_METRICS_ADDRESS",
                format!("127.0.0.1:{metrics_port}"),
            )
            .env("RUST_LOG", "info");
    };
    let log = std::fs::File::create(dir.join("ccm.log")).unwrap();
    let mut command = tokio::process::Command::new(BIN);
    env(&mut command);
    let mut ccm = command
        .args(OFFICIAL_ARGS)
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg("--secure-port=0")
        .stdout(Stdio::null())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .unwrap();

    // Progress: every Service reconciled once, a route pass done, the Nodes' lifecycle checked.
    let service_count = statuses.len() as f64;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(Some(status)) = ccm.try_wait() {
            let log = std::fs::read_to_string(dir.join("ccm.log")).unwrap_or_default();
            panic!("hcloud-ccm exited with {status}:\n{log}");
        }
        if let Some(text) = metrics(metrics_port).await {
            let services = metric(
                &text,
                "cloud_controller_reconcile_total",
                "controller=\"service\"",
            );
            let routes = metric(&text, "route_controller_route_sync_total", "");
            if services >= service_count && routes >= 1.0 {
                break;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no first reconcile of every Service and of the routes within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let counts = sim_admin.request_counts().await.unwrap();
    let log = std::fs::read_to_string(dir.join("ccm.log")).unwrap_or_default();
    assert_eq!(
        cloud_writes(&counts),
        BTreeMap::new(),
        "hcloud-ccm wrote to the cloud on takeover; all requests: {counts:?}\nlog:\n{log}"
    );
    for (name, status) in &statuses {
        let service = services.get(name).await.unwrap();
        let current = service.status.and_then(|s| s.load_balancer);
        assert_eq!(current.as_ref(), Some(status), "ingress of {name} changed");
    }
    // No Service or Node was written either (events aside).
    let written = kube_writes(scope.plane, account, &["nodes", "services"]);
    assert!(written.is_empty(), "hcloud-ccm wrote {written:?}");
    ccm.kill().await.unwrap();

    // The plan agrees: nothing to do, and asking cost no write either.
    sim_admin.reset_request_counts().await.unwrap();
    let mut command = tokio::process::Command::new(BIN);
    env(&mut command);
    let plan = command
        .arg("plan")
        .args(OFFICIAL_ARGS)
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg("--detailed-exitcode")
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&plan.stdout);
    assert_eq!(
        plan.status.code(),
        Some(0),
        "plan:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&plan.stderr)
    );
    assert!(stdout.contains("No changes"), "{stdout}");
    let counts = sim_admin.request_counts().await.unwrap();
    assert_eq!(
        cloud_writes(&counts),
        BTreeMap::new(),
        "plan wrote: {counts:?}"
    );
}
