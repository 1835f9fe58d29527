//! Per-port load balancer settings through the binary and the control plane: a Service with
//! ports 80 and 443, port 443 TLS-terminated with an uploaded certificate and redirecting HTTP,
//! and a per-port annotation for a port the Service does not have. The load balancer gets the
//! https service with the redirect (port 80 is the redirect's), and the Service an
//! `InvalidPortAnnotation` Warning naming the ignored annotation.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use hcloud_sim::CertificateSeed;
use k8s_openapi::api::core::v1::{Event, Service};
use kube::api::{Api, ListParams};
use kube_harness::eventually;
use serde_json::json;

use crate::load_balancer_races::Setup;

#[tokio::test]
async fn per_port_annotations_shape_the_load_balancer_and_warn_by_name() {
    let setup = Setup::start(1, &[]).await;
    let cert = setup
        .sim
        .admin()
        .create_certificate(CertificateSeed::uploaded("web-cert"))
        .await
        .unwrap();
    setup.add_node(0).await;
    let service: Service = serde_json::from_value(json!({
        "metadata": {
            "name": "web",
            "annotations": {
                "load-balancer.hetzner.cloud/port-https.protocol": "https",
                "load-balancer.hetzner.cloud/port-443.http-certificates": "web-cert",
                "load-balancer.hetzner.cloud/port-443.http-redirect-http": "true",
                "load-balancer.hetzner.cloud/port-8443.uses-proxyprotocol": "true",
            },
        },
        "spec": {
            "type": "LoadBalancer",
            "ports": [
                {"name": "http", "port": 80, "protocol": "TCP"},
                {"name": "https", "port": 443, "protocol": "TCP"},
            ],
        },
    }))
    .unwrap();
    setup.scope.create_service(service).await;

    let lb = eventually("the load balancer", Duration::from_secs(40), || async {
        setup.load_balancers().await.into_iter().next()
    })
    .await;
    let services = lb["services"].as_array().unwrap();
    assert_eq!(services.len(), 1, "{lb}");
    assert_eq!(services[0]["listen_port"], 443);
    assert_eq!(services[0]["protocol"], "https");
    assert_eq!(services[0]["http"]["redirect_http"], true);
    assert_eq!(services[0]["http"]["certificates"][0], cert["id"]);

    let events: Api<Event> = Api::namespaced(setup.admin.clone(), setup.scope.namespace());
    let warning = eventually(
        "the InvalidPortAnnotation Warning",
        Duration::from_secs(40),
        || async {
            let params = ListParams::default()
                .fields("involvedObject.name=web,reason=InvalidPortAnnotation");
            let listed = events.list(&params).await.unwrap();
            listed.items.into_iter().next()
        },
    )
    .await;
    assert_eq!(warning.type_.as_deref(), Some("Warning"));
    let message = warning.message.unwrap_or_default();
    assert!(
        message.starts_with(
            "load-balancer.hetzner.cloud/port-8443.uses-proxyprotocol: the Service has no TCP port"
        ),
        "{message}"
    );
}
