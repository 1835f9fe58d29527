//! Load balancers and every load balancer action against the simulator.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code

use crate::common;

use std::collections::BTreeMap;

use hcloud_api::{
    Action, Algorithm, AlgorithmType, AttachToNetworkRequest, ChangeDnsPtrRequest, Client,
    CreateLoadBalancerRequest, Error, ErrorCode, HealthCheck, HealthCheckProtocol, ListParams,
    LoadBalancer, ServiceHttp, ServiceProtocol, ServiceSpec, ServiceUpdate, TargetSpec, TargetType,
    UpdateRequest,
};
use hcloud_sim::{NetworkSeed, ServerSeed, Simulator};

use common::setup;

fn tcp_service(listen: u16, dest: u16) -> ServiceSpec {
    ServiceSpec {
        protocol: ServiceProtocol::Tcp,
        listen_port: listen,
        destination_port: dest,
        proxyprotocol: false,
        http: None,
        health_check: Some(HealthCheck {
            protocol: HealthCheckProtocol::Tcp,
            port: dest,
            interval: 15,
            timeout: 10,
            retries: 3,
            http: None,
        }),
    }
}

async fn create(client: &Client, name: &str, uid: &str) -> (LoadBalancer, Action) {
    let request = CreateLoadBalancerRequest {
        name: name.to_owned(),
        load_balancer_type: "lb11".to_owned(),
        location: Some("fsn1".to_owned()),
        algorithm: Some(Algorithm::new(AlgorithmType::RoundRobin)),
        labels: Some(BTreeMap::from([(
            "hcloud-ccm/service-uid".to_owned(),
            uid.to_owned(),
        )])),
        ..Default::default()
    };
    let created = client
        .load_balancers()
        .create(&request)
        .await
        .expect("create");
    (created.load_balancer, created.action)
}

async fn done(client: &Client, action: Action) {
    client
        .actions()
        .wait(&action)
        .await
        .expect("action succeeds");
}

async fn server(sim: &Simulator, name: &str, network: Option<i64>) -> i64 {
    let mut seed = ServerSeed::new(name);
    if let Some(net) = network {
        seed = seed.network(net);
    }
    sim.admin().create_server(seed).await.expect("server")["id"]
        .as_i64()
        .expect("id")
}

#[tokio::test]
async fn create_get_list_update_delete() {
    let (_sim, client) = setup().await;
    let (lb, action) = create(&client, "a1b2c3", "uid-1").await;
    assert_eq!(lb.name, "a1b2c3");
    assert_eq!(lb.load_balancer_type.name, "lb11");
    assert_eq!(lb.location.name, "fsn1");
    assert_eq!(lb.algorithm.kind, AlgorithmType::RoundRobin);
    assert_eq!(action.command, "create_load_balancer");
    assert!(
        lb.public_net.ipv4.ip.is_none() && lb.public_net.ipv6.ip.is_none(),
        "public IPs are null until the create action finished"
    );
    done(&client, action).await;

    let lb = client.load_balancers().get(lb.id).await.expect("get");
    assert!(lb.public_net.enabled);
    assert!(lb.public_net.ipv4.ip.is_some(), "public IPv4 after create");
    assert!(lb.public_net.ipv6.ip.is_some(), "public IPv6 after create");

    create(&client, "other", "uid-2").await;
    let by_label = client
        .load_balancers()
        .list_all(&ListParams::label_selector("hcloud-ccm/service-uid=uid-1"))
        .await
        .expect("by label");
    assert_eq!(
        by_label.iter().map(|l| l.id).collect::<Vec<_>>(),
        vec![lb.id]
    );
    let by_name = client
        .load_balancers()
        .list(&ListParams::name("other"))
        .await
        .expect("by name");
    assert_eq!(by_name.items.len(), 1);
    assert_eq!(
        client
            .load_balancers()
            .get_by_name("a1b2c3")
            .await
            .expect("name")
            .map(|l| l.id),
        Some(lb.id)
    );

    let updated = client
        .load_balancers()
        .update(
            lb.id,
            &UpdateRequest {
                name: Some("renamed".to_owned()),
                labels: Some(BTreeMap::from([("k".to_owned(), "v".to_owned())])),
            },
        )
        .await
        .expect("update");
    assert_eq!(updated.name, "renamed");
    assert_eq!(updated.labels.get("k").map(String::as_str), Some("v"));
    assert!(
        !updated.labels.contains_key("hcloud-ccm/service-uid"),
        "labels replaced"
    );

    // Duplicate names are rejected.
    let err = client
        .load_balancers()
        .update(
            lb.id,
            &UpdateRequest {
                name: Some("other".to_owned()),
                labels: None,
            },
        )
        .await
        .expect_err("duplicate");
    assert_eq!(err.code(), Some(&ErrorCode::UniquenessError));

    client
        .load_balancers()
        .delete_and_wait(lb.id)
        .await
        .expect("delete");
    let err = client.load_balancers().get(lb.id).await.expect_err("gone");
    assert!(err.is_not_found());
    let err = client
        .load_balancers()
        .delete(lb.id)
        .await
        .expect_err("gone");
    assert!(err.is_not_found());
}

#[tokio::test]
async fn services_lifecycle() {
    let (_sim, client) = setup().await;
    let (lb, action) = create(&client, "svc", "uid").await;
    done(&client, action).await;
    let lbs = client.load_balancers();

    done(
        &client,
        lbs.add_service(lb.id, &tcp_service(80, 30080))
            .await
            .expect("add 80"),
    )
    .await;
    let https = ServiceSpec {
        protocol: ServiceProtocol::Http,
        http: Some(ServiceHttp {
            cookie_name: Some("HCLBSTICKY".to_owned()),
            cookie_lifetime: Some(300),
            sticky_sessions: true,
            timeout_idle: Some(60),
            ..Default::default()
        }),
        ..tcp_service(8080, 30081)
    };
    done(
        &client,
        lbs.add_service(lb.id, &https).await.expect("add 8080"),
    )
    .await;

    let err = lbs
        .add_service(lb.id, &tcp_service(80, 30099))
        .await
        .expect_err("port in use");
    assert_eq!(err.code(), Some(&ErrorCode::SourcePortAlreadyUsed));

    let update = ServiceUpdate {
        listen_port: 80,
        destination_port: Some(30090),
        proxyprotocol: Some(true),
        ..Default::default()
    };
    done(
        &client,
        lbs.update_service(lb.id, &update).await.expect("update"),
    )
    .await;
    let got = lbs.get(lb.id).await.expect("get");
    let s80 = got
        .services
        .iter()
        .find(|s| s.listen_port == 80)
        .expect("80");
    assert_eq!(s80.destination_port, 30090);
    assert!(s80.proxyprotocol);
    assert_eq!(s80.protocol, ServiceProtocol::Tcp);
    let s8080 = got
        .services
        .iter()
        .find(|s| s.listen_port == 8080)
        .expect("8080");
    assert_eq!(s8080.protocol, ServiceProtocol::Http);
    let http = s8080.http.as_ref().expect("http");
    assert!(http.sticky_sessions);
    assert_eq!(http.cookie_name.as_deref(), Some("HCLBSTICKY"));

    done(
        &client,
        lbs.delete_service(lb.id, 8080).await.expect("delete"),
    )
    .await;
    let got = lbs.get(lb.id).await.expect("get");
    assert_eq!(
        got.services
            .iter()
            .map(|s| s.listen_port)
            .collect::<Vec<_>>(),
        vec![80]
    );
    let err = lbs
        .delete_service(lb.id, 8080)
        .await
        .expect_err("no such service");
    assert!(err.code().is_some(), "{err}");
}

#[tokio::test]
async fn targets_and_networks() {
    let (sim, client) = setup().await;
    let net = sim
        .admin()
        .create_network(NetworkSeed::new("k8s", "10.0.0.0/16").subnet("10.0.1.0/24", "eu-central"))
        .await
        .expect("network");
    let attached = server(&sim, "node-1", Some(net)).await;
    let loose = server(&sim, "node-2", None).await;
    let (lb, action) = create(&client, "targets", "uid").await;
    done(&client, action).await;
    let lbs = client.load_balancers();

    done(
        &client,
        lbs.add_target(lb.id, &TargetSpec::server(loose, false))
            .await
            .expect("add"),
    )
    .await;
    let err = lbs
        .add_target(lb.id, &TargetSpec::server(loose, false))
        .await
        .expect_err("duplicate");
    assert_eq!(err.code(), Some(&ErrorCode::TargetAlreadyDefined));

    // Private targets need the load balancer in the server's network.
    let err = lbs
        .add_target(lb.id, &TargetSpec::server(attached, true))
        .await
        .expect_err("lb not attached");
    assert_eq!(
        err.code(),
        Some(&ErrorCode::LoadBalancerNotAttachedToNetwork)
    );

    let attach = AttachToNetworkRequest {
        network: net,
        ip: Some("10.0.1.100".to_owned()),
        ip_range: None,
    };
    done(
        &client,
        lbs.attach_to_network(lb.id, &attach).await.expect("attach"),
    )
    .await;
    let err = lbs
        .attach_to_network(lb.id, &attach)
        .await
        .expect_err("twice");
    assert_eq!(err.code(), Some(&ErrorCode::LoadBalancerAlreadyAttached));
    done(
        &client,
        lbs.add_target(lb.id, &TargetSpec::server(attached, true))
            .await
            .expect("private"),
    )
    .await;
    done(
        &client,
        lbs.add_target(lb.id, &TargetSpec::label_selector("role=worker", false))
            .await
            .expect("selector"),
    )
    .await;

    let got = lbs.get(lb.id).await.expect("get");
    assert_eq!(got.private_net.len(), 1);
    assert_eq!(got.private_net[0].network, net);
    assert_eq!(got.private_net[0].ip, "10.0.1.100");
    assert_eq!(got.targets.len(), 3);
    let private = got
        .targets
        .iter()
        .find(|t| t.server.map(|s| s.id) == Some(attached))
        .expect("private target");
    assert!(private.use_private_ip);
    assert!(
        got.targets
            .iter()
            .any(|t| t.kind == TargetType::LabelSelector)
    );

    done(
        &client,
        lbs.remove_target(lb.id, &TargetSpec::server(loose, false))
            .await
            .expect("remove"),
    )
    .await;
    done(
        &client,
        lbs.remove_target(lb.id, &TargetSpec::label_selector("role=worker", false))
            .await
            .expect("remove selector"),
    )
    .await;
    let got = lbs.get(lb.id).await.expect("get");
    assert_eq!(got.targets.len(), 1);

    done(
        &client,
        lbs.remove_target(lb.id, &TargetSpec::server(attached, true))
            .await
            .expect("remove"),
    )
    .await;
    done(
        &client,
        lbs.detach_from_network(lb.id, net).await.expect("detach"),
    )
    .await;
    assert!(lbs.get(lb.id).await.expect("get").private_net.is_empty());
    let err = lbs
        .detach_from_network(lb.id, net)
        .await
        .expect_err("not attached");
    assert!(err.code().is_some());
}

#[tokio::test]
async fn settings_actions() {
    let (sim, client) = setup().await;
    let (lb, action) = create(&client, "settings", "uid").await;
    done(&client, action).await;
    let lbs = client.load_balancers();

    done(
        &client,
        lbs.change_algorithm(lb.id, AlgorithmType::LeastConnections)
            .await
            .expect("algo"),
    )
    .await;
    done(&client, lbs.change_type(lb.id, "lb21").await.expect("type")).await;
    let got = lbs.get(lb.id).await.expect("get");
    assert_eq!(got.algorithm.kind, AlgorithmType::LeastConnections);
    assert_eq!(got.load_balancer_type.name, "lb21");
    let err = lbs.change_type(lb.id, "lb999").await.expect_err("bad type");
    assert!(matches!(err, Error::Api(_)), "{err:?}");

    // Without a private network the public interface must stay on.
    let err = lbs
        .disable_public_interface(lb.id)
        .await
        .expect_err("needs a network");
    assert_eq!(
        err.code(),
        Some(&ErrorCode::LoadBalancerNotAttachedToNetwork)
    );
    let net = sim
        .admin()
        .create_network(NetworkSeed::new("k8s", "10.0.0.0/16").subnet("10.0.1.0/24", "eu-central"))
        .await
        .expect("network");
    let attach = AttachToNetworkRequest {
        network: net,
        ..Default::default()
    };
    done(
        &client,
        lbs.attach_to_network(lb.id, &attach).await.expect("attach"),
    )
    .await;
    done(
        &client,
        lbs.disable_public_interface(lb.id).await.expect("disable"),
    )
    .await;
    assert!(!lbs.get(lb.id).await.expect("get").public_net.enabled);
    done(
        &client,
        lbs.enable_public_interface(lb.id).await.expect("enable"),
    )
    .await;
    let got = lbs.get(lb.id).await.expect("get");
    assert!(got.public_net.enabled);

    let ipv4 = got.public_net.ipv4.ip.clone().expect("ipv4");
    let ptr = ChangeDnsPtrRequest {
        ip: ipv4,
        dns_ptr: Some("lb.example.com".to_owned()),
    };
    done(&client, lbs.change_dns_ptr(lb.id, &ptr).await.expect("ptr")).await;
    assert_eq!(
        lbs.get(lb.id)
            .await
            .expect("get")
            .public_net
            .ipv4
            .dns_ptr
            .as_deref(),
        Some("lb.example.com")
    );

    done(
        &client,
        lbs.change_protection(lb.id, true).await.expect("protect"),
    )
    .await;
    assert!(lbs.get(lb.id).await.expect("get").protection.delete);
    let err = lbs.delete(lb.id).await.expect_err("protected");
    assert_eq!(err.code(), Some(&ErrorCode::Protected));
    done(
        &client,
        lbs.change_protection(lb.id, false)
            .await
            .expect("unprotect"),
    )
    .await;
    lbs.delete_and_wait(lb.id).await.expect("delete");
}

#[tokio::test]
async fn busy_load_balancer_is_locked_and_not_retried() {
    let (sim, client) = setup().await;
    sim.admin()
        .set_action_delay(std::time::Duration::from_millis(500))
        .await
        .expect("delay");
    let (lb, action) = create(&client, "busy", "uid").await;
    client.actions().wait(&action).await.expect("created");
    let first = client
        .load_balancers()
        .add_service(lb.id, &tcp_service(80, 30080))
        .await
        .expect("first");
    sim.admin().reset_request_counts().await.expect("reset");
    let err = client
        .load_balancers()
        .add_service(lb.id, &tcp_service(443, 30443))
        .await
        .expect_err("locked");
    assert_eq!(err.code(), Some(&ErrorCode::Locked));
    assert_eq!(err.status(), Some(423));
    assert!(err.is_locked_or_conflict());
    assert_eq!(
        common::count(&sim, "POST /load_balancers/{id}/actions/add_service").await,
        1,
        "locked is not retried blindly"
    );
    client.actions().wait(&first).await.expect("first done");
}
