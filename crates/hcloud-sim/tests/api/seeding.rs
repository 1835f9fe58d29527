//! Seeding load balancers, certificates and Primary IPs (seed file, admin API, Rust types).

use hcloud_sim::{
    CertificateSeed, HealthCheckHttpSeed, HealthCheckSeed, HttpSeed, LoadBalancerSeed, NetworkSeed,
    SeedFile, ServerSeed, ServiceSeed, SimConfig, TargetSeed,
};
use serde_json::{Value, json};

use crate::common::{assert_error, start, start_with};

#[tokio::test]
async fn the_example_seed_holds_what_the_official_ccm_leaves_behind() {
    let seed: SeedFile = serde_json::from_str(include_str!("../../examples/seed.json")).unwrap();
    assert_eq!(seed.load_balancers.len(), 1);
    let api = start_with(SimConfig::default().seed(seed)).await;

    let lbs = api.get("/load_balancers").await.body["load_balancers"].clone();
    let lb = &lbs[0];
    assert_eq!(lb["name"], "a0f3c2b1e8d94c6f9e0b7a1c2d3e4f50");
    assert_eq!(
        lb["labels"]["hcloud-ccm/service-uid"],
        "0f3c2b1e-8d94-4c6f-9e0b-7a1c2d3e4f50"
    );
    assert_eq!(lb["algorithm"]["type"], "least_connections");
    assert_eq!(lb["protection"]["delete"], true);
    // Complete at once: addresses, network, no action ran.
    assert!(lb["public_net"]["ipv4"]["ip"].is_string());
    assert!(lb["public_net"]["ipv4"]["id"].is_i64());
    assert!(lb["public_net"]["ipv6"]["ip"].is_string());
    assert_eq!(lb["public_net"]["ipv4"]["dns_ptr"], "shop.example.com");
    assert_eq!(lb["private_net"][0]["ip"], "10.0.0.100");
    let state = api.sim.admin().state().await.unwrap();
    assert_eq!(state["actions"], json!([]));

    let https = &lb["services"][1];
    assert_eq!(https["protocol"], "https");
    // Not redirecting: the load balancer has a service on port 80, which a redirect would take.
    assert_eq!(https["http"]["redirect_http"], false);
    assert_eq!(https["http"]["sticky_sessions"], true);
    assert_eq!(https["http"]["cookie_name"], "SHOP");
    assert_eq!(https["http"]["cookie_lifetime"], 600);
    assert_eq!(https["http"]["timeout_idle"], 120);
    assert_eq!(https["health_check"]["http"]["path"], "/healthz");
    assert_eq!(https["health_check"]["http"]["domain"], "shop.example.com");
    assert_eq!(lb["services"][0]["proxyprotocol"], true);

    let certs = api.get("/certificates?sort=name").await.body["certificates"].clone();
    assert_eq!(certs[0]["name"], "shop-managed");
    assert_eq!(certs[0]["status"]["issuance"], "completed");
    assert!(certs[0]["certificate"].is_string());
    assert_eq!(https["http"]["certificates"], json!([certs[0]["id"]]));
    assert_eq!(
        certs[0]["used_by"],
        json!([{"id": lb["id"], "type": "load_balancer"}])
    );
    assert_eq!(certs[1]["type"], "uploaded");
    assert_eq!(certs[1]["labels"]["team"], "web");

    let targets = lb["targets"].as_array().unwrap();
    assert_eq!(targets.len(), 3);
    assert_eq!(targets[0]["type"], "server");
    assert_eq!(targets[0]["use_private_ip"], true);
    assert_eq!(
        targets[1]["label_selector"]["selector"],
        "role=control-plane"
    );
    assert_eq!(targets[1]["targets"].as_array().unwrap().len(), 1);
    assert_eq!(targets[2]["ip"]["ip"], "203.0.113.10");

    let spare = api.get("/primary_ips?name=reserved-ipv4").await.body["primary_ips"].clone();
    assert_eq!(spare[0]["assignee_type"], "unassigned");

    // Seeded protection holds like any other.
    let id = lb["id"].as_i64().unwrap();
    assert_error(
        &api.delete(&format!("/load_balancers/{id}")).await,
        423,
        "protected",
    );
}

#[tokio::test]
async fn load_balancers_and_certificates_through_the_admin_api() {
    let api = start().await;
    let admin = api.sim.admin();
    let net = admin
        .create_network(NetworkSeed::new("k8s", "10.0.0.0/16").subnet("10.0.0.0/24", "eu-central"))
        .await
        .unwrap();
    let node = admin
        .create_server(ServerSeed::new("node-1").network(net))
        .await
        .unwrap();
    let cert = admin
        .create_certificate(CertificateSeed::uploaded("up").domain_names(["a.example.com"]))
        .await
        .unwrap();
    assert_eq!(cert["type"], "uploaded");
    assert!(cert["certificate"].is_string());
    let pending = admin
        .create_certificate(
            CertificateSeed::managed("m", ["m.example.com"])
                .issuance("pending")
                .label("k", "v"),
        )
        .await
        .unwrap();
    assert_eq!(pending["status"]["issuance"], "pending");
    assert_eq!(pending["certificate"], Value::Null);
    let failed = admin
        .create_certificate(CertificateSeed::managed("f", ["f.example.com"]).issuance("failed"))
        .await
        .unwrap();
    assert_eq!(failed["status"]["issuance"], "failed");
    assert!(failed["status"]["error"]["code"].is_string());

    let service = ServiceSeed {
        protocol: "https".to_string(),
        listen_port: 443,
        destination_port: Some(30443),
        http: Some(HttpSeed {
            certificates: vec![cert["id"].as_i64().unwrap().into()],
            ..HttpSeed::default()
        }),
        health_check: Some(HealthCheckSeed {
            protocol: Some("http".to_string()),
            http: Some(HealthCheckHttpSeed {
                path: Some("/ready".to_string()),
                ..HealthCheckHttpSeed::default()
            }),
            ..HealthCheckSeed::default()
        }),
        ..ServiceSeed::default()
    };
    let lb = admin
        .create_load_balancer(
            LoadBalancerSeed::new("lb")
                .network_zone("us-east")
                .label("hcloud-ccm/service-uid", "u1")
                .service(ServiceSeed::tcp(80, 30080))
                .service(service)
                .public_interface(true),
        )
        .await
        .unwrap();
    assert_eq!(lb["location"]["name"], "ash");
    assert_eq!(lb["services"][0]["health_check"]["port"], 30080);
    assert_eq!(lb["services"][1]["http"]["certificates"][0], cert["id"]);
    assert_eq!(lb["services"][1]["health_check"]["http"]["path"], "/ready");
    assert_eq!(lb["services"][1]["http"]["cookie_name"], "HCLBSTICKY");

    let private = admin
        .create_load_balancer(
            LoadBalancerSeed::new("private")
                .network("k8s", None)
                .public_interface(false)
                .target(TargetSeed::Server {
                    server: "node-1".into(),
                    use_private_ip: true,
                }),
        )
        .await
        .unwrap();
    assert_eq!(private["public_net"]["enabled"], false);
    assert_eq!(private["private_net"][0]["network"], net);
    assert_eq!(private["targets"][0]["server"]["id"], node["id"]);
    // Back-references see the seeded load balancer.
    let n = api.get(&format!("/networks/{net}")).await.body["network"].clone();
    assert_eq!(n["load_balancers"], json!([private["id"]]));

    // Bad seeds are refused with the field named.
    for (seed, needle) in [
        (
            LoadBalancerSeed::new("x").target(TargetSeed::Server {
                server: "nope".into(),
                use_private_ip: false,
            }),
            "targets.server",
        ),
        (
            LoadBalancerSeed::new("y").service(ServiceSeed {
                protocol: "https".to_string(),
                listen_port: 443,
                http: Some(HttpSeed {
                    certificates: vec!["missing".into()],
                    ..HttpSeed::default()
                }),
                ..ServiceSeed::default()
            }),
            "certificate",
        ),
        (LoadBalancerSeed::new("lb"), "uniqueness_error"),
        (
            LoadBalancerSeed::new("z").load_balancer_type("lb99"),
            "load_balancer_type",
        ),
    ] {
        let err = admin.create_load_balancer(seed).await.unwrap_err();
        assert!(err.to_string().contains(needle), "{needle}: {err}");
    }
    assert_eq!(
        api.get("/load_balancers").await.body["load_balancers"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

#[tokio::test]
async fn seed_files_name_the_failing_resource() {
    let seed: SeedFile = serde_json::from_value(json!({
        "load_balancers": [{"name": "lb", "network": {"network": "absent"}}]
    }))
    .unwrap();
    let err = hcloud_sim::Simulator::start(SimConfig::default().seed(seed))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("load balancer \"lb\""), "{err}");
    let seed: SeedFile = serde_json::from_value(json!({
        "certificates": [{"name": "m", "type": "managed"}]
    }))
    .unwrap();
    let err = hcloud_sim::Simulator::start(SimConfig::default().seed(seed))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("domain"), "{err}");
}
