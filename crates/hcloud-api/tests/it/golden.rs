//! Decoding of answers taken from the examples of the API description (tests/golden/*.json).
//! Files named `get_*`/`list_*` without a full example there were assembled from the
//! per-field examples of the same description.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code

use std::collections::BTreeMap;

use hcloud_api::*;
use serde::Deserialize;
use serde::de::DeserializeOwned;

fn golden(name: &str) -> serde_json::Value {
    let path = format!("{}/tests/golden/{name}.json", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn member<T: DeserializeOwned>(value: &serde_json::Value, key: &str) -> T {
    serde_json::from_value(value[key].clone()).unwrap_or_else(|e| panic!("{key}: {e}"))
}

#[test]
fn server_from_create_example() {
    let v = golden("create_server");
    let server: Server = member(&v, "server");
    assert_eq!(server.id, 42);
    assert_eq!(server.name, "my-server");
    assert_eq!(server.status, ServerStatus::Initializing);
    assert_eq!(server.server_type.name, "cpx22");
    assert_eq!(server.server_type.cores, 2);
    assert_eq!(server.server_type.architecture, Some(Architecture::X86));
    assert_eq!(server.location.name, "fsn1");
    assert_eq!(server.location.network_zone, NetworkZone::EuCentral);
    let ipv4 = server.public_net.ipv4.as_ref().expect("ipv4");
    assert_eq!(ipv4.ip, "1.2.3.4");
    assert_eq!(ipv4.dns_ptr.as_deref(), Some("server01.example.com"));
    let ipv6 = server.public_net.ipv6.as_ref().expect("ipv6");
    assert_eq!(ipv6.ip, "2001:db8::/64");
    assert_eq!(ipv6.dns_ptr[0].ip, "2001:db8::1");
    assert_eq!(server.public_net.floating_ips, vec![478]);
    assert_eq!(server.private_net.len(), 1);
    assert_eq!(server.private_net[0].network, 4711);
    assert_eq!(server.private_net[0].ip, "10.0.0.2");
    assert_eq!(server.private_net[0].mac_address, "86:00:ff:2a:7d:e1");
    assert_eq!(server.labels.get("key").map(String::as_str), Some("value"));
    assert_eq!(server.created.to_rfc3339(), "2016-01-30T23:50:00+00:00");

    let action: Action = member(&v, "action");
    assert_eq!(action.command, "create_server");
    assert_eq!(action.status, ActionStatus::Running);
    assert!(action.finished.is_none());
    assert_eq!(action.resources[0].kind, "server");
    let next: Vec<Action> = member(&v, "next_actions");
    assert_eq!(next[0].id, 13);
}

#[test]
fn server_without_datacenter_and_with_nulls() {
    // Since 2026-07-01 the API sends no `datacenter`; public IPs may be null; new fields and
    // states appear.
    let mut v = golden("get_server");
    let s = &mut v["server"];
    let obj = s.as_object_mut().expect("object");
    obj.remove("datacenter");
    obj.insert("brand_new_field".into(), serde_json::json!({"x": 1}));
    s["public_net"]["ipv4"] = serde_json::Value::Null;
    s["public_net"]["ipv6"] = serde_json::Value::Null;
    s["status"] = "hibernating".into();
    s["location"]["network_zone"] = "moon-north".into();
    s["private_net"][0]["alias_ips"] = serde_json::Value::Null;
    let server: Server = member(&v, "server");
    assert_eq!(server.id, 42);
    assert_eq!(server.status, ServerStatus::Unknown("hibernating".into()));
    assert_eq!(server.status.as_str(), "hibernating");
    assert_eq!(
        server.location.network_zone,
        NetworkZone::Unknown("moon-north".into())
    );
    assert!(server.public_net.ipv4.is_none());
    assert!(server.public_net.ipv6.is_none());
    assert!(server.private_net[0].alias_ips.is_empty());
    // Unknown values survive a round trip unchanged.
    let back = serde_json::to_value(&server).expect("encode");
    assert_eq!(back["status"], "hibernating");
}

#[test]
fn server_list_and_pagination() {
    let v = golden("list_servers");
    let servers: Vec<Server> = member(&v, "servers");
    assert_eq!(servers.len(), 1);
    assert_eq!(servers[0].status, ServerStatus::Deleting);
    assert_eq!(
        servers[0].private_net[0].alias_ips,
        vec!["10.0.0.3", "10.0.0.4"]
    );
    assert_eq!(servers[0].load_balancers, vec![1]);
    let meta: ListMeta = member(&v, "meta");
    let p = meta.pagination.expect("pagination");
    assert_eq!((p.page, p.per_page), (3, 25));
    assert_eq!(p.next_page, Some(4));
    assert_eq!(p.previous_page, Some(2));
    assert_eq!(p.total_entries, Some(100));
}

#[test]
fn locations() {
    let list: Vec<Location> = member(&golden("list_locations"), "locations");
    assert_eq!(list[0].name, "fsn1");
    assert_eq!(list[0].country, "DE");
    assert_eq!(list[0].network_zone, NetworkZone::EuCentral);
    let one: Location = member(&golden("get_location"), "location");
    assert_eq!(one.city, "Falkenstein");
    assert!(one.latitude.is_some());
}

#[test]
fn networks() {
    let n: Network = member(&golden("get_network"), "network");
    assert_eq!(n.id, 4711);
    assert_eq!(n.ip_range, "10.0.0.0/16");
    assert_eq!(n.routes, vec![Route::new("10.100.1.0/24", "10.0.1.1")]);
    assert_eq!(n.subnets[0].kind, SubnetType::Cloud);
    assert_eq!(n.subnets[0].network_zone, NetworkZone::EuCentral);
    assert_eq!(n.subnets[0].vswitch_id, Some(1000));
    assert_eq!(n.servers, vec![42]);
    let updated: Network = member(&golden("update_network"), "network");
    assert_eq!(updated.name, "new-name");
    assert!(updated.expose_routes_to_vswitch);
    let list: Vec<Network> = member(&golden("list_networks"), "networks");
    assert_eq!(list.len(), 1);
    for name in ["action_network_add_route", "action_network_delete_route"] {
        let action: Action = member(&golden(name), "action");
        assert!(action.id > 0, "{name}");
    }
}

#[test]
fn load_balancer_full() {
    let lb: LoadBalancer = member(&golden("get_load_balancer"), "load_balancer");
    assert_eq!(lb.id, 42);
    assert_eq!(lb.algorithm.kind, AlgorithmType::LeastConnections);
    assert_eq!(lb.load_balancer_type.name, "lb11");
    assert_eq!(lb.load_balancer_type.max_targets, 25);
    assert_eq!(lb.location.name, "fsn1");
    assert_eq!(lb.public_net.ipv4.ip.as_deref(), Some("1.2.3.4"));
    assert_eq!(
        lb.public_net.ipv6.dns_ptr.as_deref(),
        Some("lb1.example.com")
    );
    assert_eq!(lb.private_net[0].network, 4711);
    let svc = &lb.services[0];
    assert_eq!(svc.protocol, ServiceProtocol::Https);
    assert_eq!((svc.listen_port, svc.destination_port), (443, 80));
    let http = svc.http.as_ref().expect("http");
    assert_eq!(http.certificates, vec![897]);
    assert_eq!(http.cookie_name.as_deref(), Some("HCLBSTICKY"));
    assert!(http.timeout_idle.is_none());
    let hc = svc.health_check.as_ref().expect("health check");
    assert_eq!(hc.protocol, HealthCheckProtocol::Http);
    assert_eq!(
        (hc.port, hc.interval, hc.timeout, hc.retries),
        (4711, 15, 10, 3)
    );
    assert_eq!(
        hc.http.as_ref().expect("hc http").status_codes,
        vec!["2??", "3??"]
    );
    let t = &lb.targets[0];
    assert_eq!(t.kind, TargetType::Ip);
    assert_eq!(t.ip.as_ref().map(|i| i.ip.as_str()), Some("203.0.113.1"));
    assert_eq!(t.health_status[0].status, HealthStatusValue::Healthy);
    assert_eq!(t.targets[0].server, Some(ResourceId { id: 42 }));

    let list: Vec<LoadBalancer> = member(&golden("list_load_balancers"), "load_balancers");
    assert_eq!(list.len(), 1);
}

#[test]
fn load_balancer_create_and_update() {
    let v = golden("create_load_balancer");
    let created: CreateLoadBalancerResponse = serde_json::from_value(v).expect("create");
    assert_eq!(created.load_balancer.id, 4711);
    assert_eq!(
        created.load_balancer.algorithm.kind,
        AlgorithmType::RoundRobin
    );
    assert_eq!(created.load_balancer.targets[0].kind, TargetType::Server);
    assert!(created.load_balancer.targets[0].use_private_ip);
    assert_eq!(created.action.command, "create_load_balancer");
    assert_eq!(created.action.status, ActionStatus::Success);

    // Until the create action finished, the public IPs are null.
    let mut pending = golden("create_load_balancer");
    pending["load_balancer"]["public_net"]["ipv4"]["ip"] = serde_json::Value::Null;
    pending["load_balancer"]["public_net"]["ipv6"] =
        serde_json::json!({"ip": null, "dns_ptr": null});
    let pending: CreateLoadBalancerResponse = serde_json::from_value(pending).expect("pending");
    assert!(pending.load_balancer.public_net.ipv4.ip.is_none());
    assert!(pending.load_balancer.public_net.ipv6.ip.is_none());

    let updated: LoadBalancer = member(&golden("update_load_balancer"), "load_balancer");
    assert!(updated.id > 0);
}

#[test]
fn load_balancer_actions() {
    for name in [
        "add_service",
        "update_service",
        "delete_service",
        "add_target",
        "remove_target",
        "attach_to_network",
        "detach_from_network",
        "change_algorithm",
        "change_type",
        "enable_public_interface",
        "disable_public_interface",
        "change_protection",
        "change_dns_ptr",
    ] {
        let v = golden(&format!("action_load_balancer_{name}"));
        let action: Action = member(&v, "action");
        assert!(action.id > 0, "{name}");
        assert!(!action.command.is_empty(), "{name}");
        assert!(!matches!(action.status, ActionStatus::Unknown(_)), "{name}");
    }
}

#[test]
fn load_balancer_types() {
    let list: Vec<LoadBalancerType> =
        member(&golden("list_load_balancer_types"), "load_balancer_types");
    assert_eq!(list[0].name, "lb11");
    assert_eq!(list[0].max_connections, 20000);
    assert_eq!(list[0].max_services, 5);
    assert_eq!(list[0].max_assigned_certificates, 10);
    let one: LoadBalancerType = member(&golden("get_load_balancer_type"), "load_balancer_type");
    assert_eq!(one.id, list[0].id);
    // Newer answers carry a `deprecation` object.
    let newer: LoadBalancerType = serde_json::from_value(serde_json::json!({
        "id": 2, "name": "lb21", "description": "LB21", "max_connections": 20000,
        "max_services": 15, "max_targets": 75, "max_assigned_certificates": 25,
        "deprecated": null, "deprecation": {"announced": "2026-01-01T00:00:00Z",
        "unavailable_after": "2026-06-01T00:00:00Z"}, "prices": []
    }))
    .expect("lb21");
    assert_eq!(newer.max_targets, 75);
    assert!(newer.deprecation.is_some());
}

#[test]
fn certificates() {
    let list: Vec<Certificate> = member(&golden("list_certificates"), "certificates");
    let c = &list[0];
    assert_eq!(c.id, 897);
    assert_eq!(c.kind, Some(CertificateType::Uploaded));
    assert!(c.status.is_none());
    assert_eq!(c.domain_names.len(), 3);
    assert_eq!(c.used_by[0].kind, "load_balancer");
    assert!(c.not_valid_after.is_some());
    let meta: ListMeta = member(&golden("list_certificates"), "meta");
    assert_eq!(meta.pagination.and_then(|p| p.next_page), None);

    let managed: CreateCertificateResponse =
        serde_json::from_value(golden("create_certificate_managed")).expect("managed");
    assert_eq!(managed.certificate.kind, Some(CertificateType::Managed));
    assert!(managed.certificate.certificate.is_none());
    let status = managed.certificate.status.as_ref().expect("status");
    assert_eq!(status.issuance, Some(IssuanceStatus::Pending));
    assert_eq!(status.renewal, Some(RenewalStatus::Unavailable));
    assert_eq!(
        managed.action.as_ref().map(|a| a.command.as_str()),
        Some("create_certificate")
    );

    let uploaded: CreateCertificateResponse =
        serde_json::from_value(golden("create_certificate_uploaded")).expect("uploaded");
    assert!(uploaded.action.is_none());
    assert!(uploaded.certificate.fingerprint.is_some());

    let one: Certificate = member(&golden("get_certificate"), "certificate");
    assert!(one.id > 0);
    let updated: Certificate = member(&golden("update_certificate"), "certificate");
    assert!(updated.id > 0);
    let retry: Action = member(&golden("action_certificate_retry"), "action");
    assert!(retry.id > 0);
}

#[test]
fn actions() {
    let list: Vec<Action> = member(&golden("list_actions"), "actions");
    let a = &list[0];
    assert_eq!(a.status, ActionStatus::Error);
    assert!(a.is_finished());
    let err = a.error.as_ref().expect("error");
    assert_eq!(
        (err.code.as_str(), err.message.as_str()),
        ("action_failed", "Action failed")
    );
    let one: Action = member(&golden("get_action"), "action");
    assert_eq!(one.progress, 100);
}

#[test]
fn error_envelope() {
    #[derive(Deserialize)]
    struct Envelope {
        error: Inner,
    }
    #[derive(Deserialize)]
    struct Inner {
        code: ErrorCode,
        message: String,
        details: Option<BTreeMap<String, serde_json::Value>>,
    }
    let e: Envelope = serde_json::from_value(golden("error_unauthorized")).expect("error");
    assert_eq!(e.error.code, ErrorCode::Unauthorized);
    assert_eq!(e.error.message, "unable to authenticate");
    assert!(e.error.details.is_none());
    let unknown: ErrorCode = serde_json::from_value("shiny_new_error".into()).expect("code");
    assert_eq!(unknown, ErrorCode::Unknown("shiny_new_error".into()));
}

#[test]
fn request_bodies_encode_as_the_api_expects() {
    let create = CreateLoadBalancerRequest {
        name: "lb".into(),
        load_balancer_type: "lb11".into(),
        location: Some("fsn1".into()),
        algorithm: Some(Algorithm::new(AlgorithmType::RoundRobin)),
        services: vec![ServiceSpec {
            protocol: ServiceProtocol::Tcp,
            listen_port: 80,
            destination_port: 30080,
            proxyprotocol: false,
            http: None,
            health_check: Some(HealthCheck {
                protocol: HealthCheckProtocol::Tcp,
                port: 30080,
                interval: 15,
                timeout: 10,
                retries: 3,
                http: None,
            }),
        }],
        targets: vec![TargetSpec::server(7, true)],
        ..Default::default()
    };
    let json = serde_json::to_value(&create).expect("encode");
    assert_eq!(
        json,
        serde_json::json!({
            "name": "lb", "load_balancer_type": "lb11", "location": "fsn1",
            "algorithm": {"type": "round_robin"},
            "services": [{"protocol": "tcp", "listen_port": 80, "destination_port": 30080,
                "proxyprotocol": false, "health_check": {"protocol": "tcp", "port": 30080,
                "interval": 15, "timeout": 10, "retries": 3}}],
            "targets": [{"type": "server", "server": {"id": 7}, "use_private_ip": true}]
        })
    );
    let update = ServiceUpdate {
        listen_port: 80,
        destination_port: Some(30081),
        ..Default::default()
    };
    assert_eq!(
        serde_json::to_value(&update).expect("encode"),
        serde_json::json!({"listen_port": 80, "destination_port": 30081})
    );
    let cert = CreateCertificateRequest::uploaded("c", "PEM", "very-secret-key");
    assert!(!format!("{cert:?}").contains("very-secret-key"));
    assert_eq!(
        serde_json::to_value(&cert).expect("encode"),
        serde_json::json!({"name": "c", "type": "uploaded", "certificate": "PEM",
            "private_key": "very-secret-key"})
    );
}
