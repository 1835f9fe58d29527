//! Per-port load balancer settings (`load-balancer.hetzner.cloud/port-<port>.<setting>`)
//! against the simulator: one Service with a plain TCP port, a TLS-terminating HTTPS port
//! with an uploaded certificate and its HTTP->HTTPS redirect, and a port without PROXY
//! protocol; `plan` names exactly the requests ensure makes; an invalid per-port annotation
//! warns and spares the other ports.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use cloud_provider::LoadBalancer as _;
use hcloud_api::models::{LoadBalancerService, ServiceProtocol, ServiceSpec as LbServiceSpec};

use crate::load_balancers::{CLUSTER, Env, located, plan_then_ensure, service};

fn port(lb: &hcloud_api::models::LoadBalancer, listen_port: u16) -> Option<&LoadBalancerService> {
    lb.services.iter().find(|s| s.listen_port == listen_port)
}

#[tokio::test]
async fn ports_of_one_service_get_their_own_protocol_certificate_proxy_protocol_and_redirect() {
    let env = Env::start().await;
    let cert_id = env.uploaded_certificate("shop-cert").await;
    let lbs = env.lbs_with(located(), false).await;
    let nodes = [env.node(0)];
    let ports = [(80, "TCP", 30080), (443, "TCP", 30443), (22, "TCP", 30022)];
    let wide = [
        ("uses-proxyprotocol", "true"),
        ("port-22.uses-proxyprotocol", "false"),
        ("port-443.protocol", "https"),
        ("port-443.http-certificates", "shop-cert"),
    ];

    // Created with the three services in the one request.
    let made = plan_then_ensure(&env, &lbs, &service(&ports, &wide), &nodes).await;
    assert_eq!(made, vec!["POST /load_balancers".to_owned()]);
    let lb = env.only().await;
    let (plain, https, ssh) = (
        port(&lb, 80).unwrap(),
        port(&lb, 443).unwrap(),
        port(&lb, 22).unwrap(),
    );
    assert_eq!(
        (plain.protocol.clone(), plain.proxyprotocol),
        (ServiceProtocol::Tcp, true)
    );
    assert_eq!(
        (https.protocol.clone(), https.proxyprotocol),
        (ServiceProtocol::Https, true)
    );
    assert_eq!(https.http.as_ref().unwrap().certificates, vec![cert_id]);
    assert_eq!(
        (ssh.protocol.clone(), ssh.proxyprotocol),
        (ServiceProtocol::Tcp, false)
    );

    // The redirect: port 80 is given to it (deleted first, or the API refuses the update).
    let redirect = [wide.as_slice(), &[("port-443.http-redirect-http", "true")]].concat();
    let made = plan_then_ensure(&env, &lbs, &service(&ports, &redirect), &nodes).await;
    assert_eq!(
        made,
        vec![
            "POST /load_balancers/{id}/actions/delete_service".to_owned(),
            "POST /load_balancers/{id}/actions/update_service".to_owned(),
        ]
    );
    let lb = env.only().await;
    assert!(port(&lb, 80).is_none(), "{lb:#?}");
    assert!(port(&lb, 443).unwrap().http.as_ref().unwrap().redirect_http);
    // The simulator holds port 80 for the redirect, as the API does.
    let err = env
        .client
        .load_balancers()
        .add_service(
            lb.id,
            &LbServiceSpec {
                protocol: ServiceProtocol::Tcp,
                listen_port: 80,
                destination_port: 30080,
                proxyprotocol: false,
                http: None,
                health_check: None,
            },
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("port 80 is busy"), "{err}");

    // Off again: the redirect goes before port 80 comes back.
    let made = plan_then_ensure(&env, &lbs, &service(&ports, &wide), &nodes).await;
    assert_eq!(
        made,
        vec![
            "POST /load_balancers/{id}/actions/add_service".to_owned(),
            "POST /load_balancers/{id}/actions/update_service".to_owned(),
        ]
    );
    assert!(port(&env.only().await, 80).is_some());
}

#[tokio::test]
async fn an_invalid_per_port_annotation_warns_by_name_and_the_other_ports_are_reconciled() {
    let env = Env::start().await;
    let lbs = env.lbs_with(located(), false).await;
    let nodes = [env.node(0)];
    let ports = [(80, "TCP", 30080), (443, "TCP", 30443)];
    plan_then_ensure(&env, &lbs, &service(&ports, &[]), &nodes).await;

    // 443 asks for https without a certificate, and a port the Service does not have is
    // named: both warn, port 443 stays as it is, port 80 still changes.
    let svc = service(
        &ports,
        &[
            ("port-443.protocol", "https"),
            ("port-8443.uses-proxyprotocol", "true"),
            ("port-80.uses-proxyprotocol", "true"),
        ],
    );
    let planned = lbs.plan_load_balancer(CLUSTER, &svc, &nodes).await.unwrap();
    let warned: Vec<&str> = planned
        .warnings
        .iter()
        .filter(|w| w.reason == "InvalidPortAnnotation")
        .map(|w| w.message.as_str())
        .collect();
    assert_eq!(warned.len(), 2, "{planned:#?}");
    assert!(warned.iter().any(|m| m.starts_with(
        "load-balancer.hetzner.cloud/port-443.protocol: port 443 is https but has no certificate"
    )));
    assert!(warned.iter().any(|m| m.starts_with(
        "load-balancer.hetzner.cloud/port-8443.uses-proxyprotocol: the Service has no TCP port"
    )));
    let made = plan_then_ensure(&env, &lbs, &svc, &nodes).await;
    assert_eq!(
        made,
        vec!["POST /load_balancers/{id}/actions/update_service".to_owned()]
    );
    let lb = env.only().await;
    assert!(port(&lb, 80).unwrap().proxyprotocol);
    let https = port(&lb, 443).unwrap();
    assert_eq!(
        (https.protocol.clone(), https.proxyprotocol),
        (ServiceProtocol::Tcp, false)
    );
}

#[tokio::test]
async fn a_certificate_named_by_several_ports_is_looked_up_once() {
    let env = Env::start().await;
    let cert_id = env.uploaded_certificate("shop-cert").await;
    let lbs = env.lbs_with(located(), false).await;
    let svc = service(
        &[(443, "TCP", 30443), (8443, "TCP", 38443)],
        &[
            ("port-443.protocol", "https"),
            ("port-8443.protocol", "https"),
            ("port-443.http-certificates", "shop-cert"),
            ("port-8443.http-certificates", "shop-cert"),
        ],
    );
    env.sim.admin().reset_request_counts().await.unwrap();
    lbs.ensure_load_balancer(CLUSTER, &svc, &[env.node(0)])
        .await
        .unwrap();
    let counts = env.sim.admin().request_counts().await.unwrap();
    assert_eq!(counts.get("GET /certificates"), Some(&1), "{counts:?}");
    let lb = env.only().await;
    for listen_port in [443, 8443] {
        let http = port(&lb, listen_port).unwrap().http.clone().unwrap();
        assert_eq!(http.certificates, vec![cert_id], "{listen_port}");
    }
}

#[tokio::test]
async fn a_missing_per_port_certificate_fails_naming_the_annotations_that_name_it() {
    let env = Env::start().await;
    env.uploaded_certificate("shop-cert").await;
    let lbs = env.lbs_with(located(), false).await;
    let svc = service(
        &[
            (443, "TCP", 30443),
            (8443, "TCP", 38443),
            (9443, "TCP", 39443),
        ],
        &[
            ("port-443.protocol", "https"),
            ("port-8443.protocol", "https"),
            ("port-9443.protocol", "https"),
            ("port-443.http-certificates", "later-cert"),
            ("port-8443.http-certificates", "later-cert"),
            ("port-9443.http-certificates", "shop-cert"),
        ],
    );
    let err = lbs
        .ensure_load_balancer(CLUSTER, &svc, &[env.node(0)])
        .await
        .unwrap_err();
    assert_eq!(err.category(), cloud_provider::Category::Rejected, "{err}");
    let message = err.to_string();
    assert!(
        message.contains(
            "load-balancer.hetzner.cloud/port-443.http-certificates, load-balancer.hetzner.cloud/port-8443.http-certificates: certificate \"later-cert\" does not exist"
        ),
        "{message}"
    );
    assert!(!message.contains("port-9443"), "{message}");
}
