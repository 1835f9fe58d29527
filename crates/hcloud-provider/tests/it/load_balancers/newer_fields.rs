//! Service fields Kubernetes 1.20 did not have, end to end: each Service is created in the real
//! apiserver (the shared control plane, dual-stack service CIDRs), which validates and
//! defaults it (no NodePort for a port under `allocateLoadBalancerNodePorts: false`,
//! `ipFamilies` from `ipFamilyPolicy`); the provider ensures the Service as the apiserver
//! returned it against the simulator, writes its Warnings to the apiserver, and the status it
//! reports is written back through the apiserver's status validation.

use hcloud_provider::load_balancers::reasons;
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube_harness::{ControlPlane, eventually, unique_name};
use serde_json::{Value, json};

use super::*;
use crate::support::{WAIT, events_with_reason};

const NAMESPACE: &str = "default";

async fn kube() -> kube::Client {
    ControlPlane::shared().unwrap().client().await.unwrap()
}

fn services(kube: &kube::Client) -> Api<Service> {
    Api::namespaced(kube.clone(), NAMESPACE)
}

/// A Service of type LoadBalancer with `spec` (the type added), as the apiserver creates it.
async fn create(kube: &kube::Client, spec: Value) -> Result<Service, kube::Error> {
    let mut spec = spec;
    spec["type"] = json!("LoadBalancer");
    let svc: Service = serde_json::from_value(json!({
        "metadata": { "name": unique_name("newer"), "namespace": NAMESPACE },
        "spec": spec,
    }))
    .unwrap();
    services(kube).create(&PostParams::default(), &svc).await
}

/// The events about the Service `svc` with `reason`.
async fn events(kube: &kube::Client, svc: &Service, reason: &str) -> Vec<Event> {
    let name = svc.metadata.name.as_deref().unwrap();
    events_with_reason(kube, NAMESPACE, name, reason).await
}

/// The load balancer of the Service `svc` (by its UID label).
async fn lb_of(env: &Env, svc: &Service) -> models::LoadBalancer {
    let mut ours = env.labelled(svc).await;
    assert_eq!(ours.len(), 1, "{ours:#?}");
    ours.remove(0)
}

fn node_ports(svc: &Service) -> Vec<Option<i32>> {
    let ports = svc.spec.as_ref().and_then(|s| s.ports.as_ref()).unwrap();
    ports.iter().map(|p| p.node_port).collect()
}

#[tokio::test]
async fn a_port_without_a_node_port_gets_no_service_and_a_warning_naming_the_fields() {
    let env = Env::start().await;
    let kube = kube().await;
    // Two TCP ports under allocateLoadBalancerNodePorts: false, the first with an explicit
    // nodePort (from the range's static band; the next one if another test holds it).
    let mut created = None;
    for node_port in 30081..30091 {
        let spec = json!({
            "allocateLoadBalancerNodePorts": false,
            "ports": [
                { "name": "http", "port": 80, "protocol": "TCP", "nodePort": node_port },
                { "name": "https", "port": 443, "protocol": "TCP" },
            ],
        });
        match create(&kube, spec).await {
            Ok(svc) => {
                created = Some((svc, node_port));
                break;
            }
            Err(kube::Error::Api(status)) if status.message.contains("already allocated") => {}
            Err(err) => panic!("creating the Service: {err}"),
        }
    }
    let (svc, node_port) = created.expect("a free nodePort in 30081..30091");
    // The apiserver keeps the field and allocates no NodePort for the second port.
    let spec = svc.spec.as_ref().unwrap();
    assert_eq!(spec.allocate_load_balancer_node_ports, Some(false));
    assert_eq!(node_ports(&svc), [Some(node_port), None]);

    let lbs = env.lbs_recording(&kube, false).await;
    let status = lbs
        .ensure_load_balancer(CLUSTER, &svc, &[env.node(0)])
        .await
        .unwrap()
        .done()
        .unwrap();
    assert_eq!(ingress(&status).len(), 2, "{status:?}");
    // One service, for the port with a NodePort (not one with destination port 0).
    let lb = lb_of(&env, &svc).await;
    let np = u16::try_from(node_port).unwrap();
    assert_eq!(ports(&lb), [(80, np, np)]);

    // A Warning on the Service names the port's field and what to do.
    let warned = eventually("the NodePortNotAllocated Warning", WAIT, || async {
        let found = events(&kube, &svc, reasons::NODE_PORT_NOT_ALLOCATED).await;
        (!found.is_empty()).then_some(found)
    })
    .await;
    assert_eq!(warned.len(), 1, "{warned:#?}");
    let event = &warned[0];
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(event.involved_object.kind.as_deref(), Some("Service"));
    assert_eq!(event.involved_object.uid, svc.metadata.uid);
    let message = event.message.as_deref().unwrap_or_default();
    assert!(
        message.starts_with("spec.ports[1].nodePort: port https (443) has no NodePort")
            && message.contains("set spec.allocateLoadBalancerNodePorts to true")
            && message.contains("explicit nodePort"),
        "{message}"
    );

    // Ensured again unchanged: the same Warning, counted on the same event.
    lbs.ensure_load_balancer(CLUSTER, &svc, &[env.node(0)])
        .await
        .unwrap();
    let counted = eventually("the Warning counted twice", WAIT, || async {
        let found = events(&kube, &svc, reasons::NODE_PORT_NOT_ALLOCATED).await;
        found.iter().any(|e| e.count == Some(2)).then_some(found)
    })
    .await;
    assert_eq!(
        counted.len(),
        1,
        "one event, not one per sync: {counted:#?}"
    );
    assert_eq!(ports(&lb_of(&env, &svc).await), [(80, np, np)]);
    services(&kube)
        .delete(svc.metadata.name.as_deref().unwrap(), &Default::default())
        .await
        .unwrap();
}

#[tokio::test]
async fn the_ingress_lists_the_services_first_ip_family_first() {
    let env = Env::start().await;
    let kube = kube().await;
    let ports = json!([{ "port": 80, "protocol": "TCP" }]);
    let dual = create(
        &kube,
        json!({
            "ipFamilyPolicy": "RequireDualStack",
            "ipFamilies": ["IPv6", "IPv4"],
            "ports": ports,
        }),
    )
    .await
    .unwrap();
    let plain = create(&kube, json!({ "ports": ports })).await.unwrap();
    // What the apiserver made of them: both families for the first (IPv6 primary), the
    // cluster's first family (IPv4) for the default one; NodePorts for both.
    let families = |svc: &Service| svc.spec.as_ref().unwrap().ip_families.clone();
    assert_eq!(families(&dual), Some(vec!["IPv6".into(), "IPv4".into()]));
    assert_eq!(families(&plain), Some(vec!["IPv4".into()]));
    let cluster_ips = dual.spec.as_ref().unwrap().cluster_ips.clone().unwrap();
    assert!(
        cluster_ips.len() == 2 && cluster_ips[0].contains(':') && !cluster_ips[1].contains(':'),
        "{cluster_ips:?}"
    );
    assert!(node_ports(&dual)[0].is_some() && node_ports(&plain)[0].is_some());

    // With the network, so that the private IP shows where it stays: last.
    let lbs = env.lbs_recording(&kube, true).await;
    for (svc, ipv6_first) in [(&dual, true), (&plain, false)] {
        let name = svc.metadata.name.as_deref().unwrap();
        let status = lbs
            .ensure_load_balancer(CLUSTER, svc, &[env.node(0)])
            .await
            .unwrap()
            .done()
            .unwrap();
        let lb = lb_of(&env, svc).await;
        let ipv4 = lb.public_net.ipv4.ip.clone().unwrap();
        let ipv6 = lb.public_net.ipv6.ip.clone().unwrap();
        let private = lb.private_net[0].ip.clone();
        let want = if ipv6_first {
            [ipv6, ipv4, private]
        } else {
            [ipv4, ipv6, private]
        };
        assert_eq!(ingress(&status), want, "{name}");
        // The apiserver takes the status as reported and keeps its order.
        let patch = json!({ "status": { "loadBalancer": status } });
        let written = services(&kube)
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
        let load_balancer = written.status.and_then(|s| s.load_balancer).unwrap();
        assert_eq!(ingress(&load_balancer), want, "{name}: as written");
        services(&kube)
            .delete(name, &Default::default())
            .await
            .unwrap();
    }
}
