//! The sandbox's load balancer demo: a Service of type LoadBalancer, and the Hetzner load
//! balancer hcloud-ccm makes for it.

use std::time::{Duration, Instant};

use hcloud_sim::AdminClient;
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use kube::api::{Api, ObjectMeta, PostParams};

/// Create `default/web` (port 80 → NodePort 30080) and wait up to `timeout` for its ingress.
/// Returns a readable summary of the Service status and the load balancer.
pub async fn demo(
    client: kube::Client,
    admin: &AdminClient,
    timeout: Duration,
) -> anyhow::Result<String> {
    let services: Api<Service> = Api::namespaced(client, "default");
    let service = Service {
        // No annotation: the location is the CCM's default (HCLOUD_LOAD_BALANCERS_LOCATION),
        // as an operator's chart values set it, so `kubectl expose` works as it does here.
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
    services.create(&PostParams::default(), &service).await?;
    let deadline = Instant::now() + timeout;
    let ingress = loop {
        let ingress: Vec<String> = services
            .get("web")
            .await?
            .status
            .and_then(|s| s.load_balancer)
            .and_then(|lb| lb.ingress)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|i| i.ip.or(i.hostname))
            .collect();
        if !ingress.is_empty() {
            break ingress;
        }
        if Instant::now() > deadline {
            anyhow::bail!("Service default/web got no load balancer within {timeout:?}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let state = admin.state().await?;
    let lb = state["load_balancers"]
        .as_array()
        .and_then(|lbs| lbs.first().cloned())
        .unwrap_or_default();
    let targets: Vec<String> = lb["targets"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| match t["type"].as_str() {
            // Dedicated (Robot) servers are IP targets.
            Some("ip") => t["ip"]["ip"].as_str().map(|ip| format!("ip {ip}")),
            _ => t["server"]["id"].as_i64().map(|id| format!("server {id}")),
        })
        .collect();
    let services_line: Vec<String> = lb["services"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| {
            let check = &s["health_check"];
            let path = check["http"]["path"].as_str().unwrap_or_default();
            format!(
                "{} -> {} (checked {} {}{path})",
                s["listen_port"],
                s["destination_port"],
                check["protocol"].as_str().unwrap_or("?"),
                check["port"]
            )
        })
        .collect();
    Ok(format!(
        "Service default/web (type LoadBalancer): ingress {}\n  Hetzner load balancer {} ({}, {}), label hcloud-ccm/service-uid={}\n  services {}; targets {}",
        ingress.join(", "),
        lb["name"].as_str().unwrap_or("?"),
        lb["load_balancer_type"]["name"].as_str().unwrap_or("?"),
        lb["location"]["name"].as_str().unwrap_or("?"),
        lb["labels"]["hcloud-ccm/service-uid"]
            .as_str()
            .unwrap_or("?"),
        services_line.join(", "),
        targets.join(", "),
    ))
}
