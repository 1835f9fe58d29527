//! API changes of 2026 in the client: load balancer deletion answers an action, load
//! balancers and Primary IPs, server type availability, and what is retried.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code

use crate::common;

use std::time::Duration;

use hcloud_api::{
    ActionStatus, Client, ClientConfig, CreateLoadBalancerPublicNet, CreateLoadBalancerRequest,
    Error, ErrorCode, ServerType, Token,
};
use hcloud_sim::{Fault, PrimaryIpSeed};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use common::{config_for, count, setup};

fn request(name: &str) -> CreateLoadBalancerRequest {
    CreateLoadBalancerRequest {
        name: name.to_owned(),
        load_balancer_type: "lb11".to_owned(),
        location: Some("fsn1".to_owned()),
        ..Default::default()
    }
}

async fn created(client: &Client, request: &CreateLoadBalancerRequest) -> i64 {
    let created = client
        .load_balancers()
        .create(request)
        .await
        .expect("create");
    client
        .actions()
        .wait(&created.action)
        .await
        .expect("created");
    created.load_balancer.id
}

#[tokio::test]
async fn delete_returns_the_action_and_the_load_balancer_stays_until_it_finished() {
    let (sim, client) = setup().await;
    let id = created(&client, &request("del")).await;
    sim.admin()
        .set_action_delay(Duration::from_millis(300))
        .await
        .expect("delay");
    let action = client
        .load_balancers()
        .delete(id)
        .await
        .expect("delete")
        .expect("an action");
    assert_eq!(action.command, "delete_load_balancer");
    assert_eq!(action.status, ActionStatus::Running);
    assert!(client.load_balancers().get(id).await.is_ok(), "still there");
    client.actions().wait(&action).await.expect("deleted");
    let err = client.load_balancers().get(id).await.expect_err("gone");
    assert!(err.is_not_found());

    // delete_and_wait returns only once the load balancer is gone.
    sim.admin()
        .set_action_delay(Duration::from_millis(150))
        .await
        .expect("delay");
    let id = created(&client, &request("del2")).await;
    client
        .load_balancers()
        .delete_and_wait(id)
        .await
        .expect("deleted");
    assert!(
        client
            .load_balancers()
            .get(id)
            .await
            .expect_err("gone")
            .is_not_found()
    );
}

#[tokio::test]
async fn a_failing_delete_action_is_an_error() {
    let (sim, client) = setup().await;
    let id = created(&client, &request("fail")).await;
    sim.admin()
        .inject_fault(
            Fault::new("/load_balancers/{id}")
                .method("DELETE")
                .code("server_error")
                .fail_action(),
        )
        .await
        .expect("fault");
    let err = client
        .load_balancers()
        .delete_and_wait(id)
        .await
        .expect_err("action fails");
    let Error::Action(action) = &err else {
        panic!("expected an action error, got {err:?}");
    };
    assert_eq!(action.command, "delete_load_balancer");
    assert!(client.load_balancers().get(id).await.is_ok(), "kept");
}

/// A stub answering one connection with `response`.
async fn stub(response: String) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let Ok((mut socket, _)) = listener.accept().await else {
            return;
        };
        let mut buf = Vec::new();
        let mut chunk = [0u8; 1024];
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
            match socket.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let _ = socket.write_all(response.as_bytes()).await;
        let _ = socket.shutdown().await;
    });
    format!("http://{addr}/v1")
}

#[tokio::test]
async fn an_old_style_delete_answer_means_no_action() {
    for response in [
        "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n".to_owned(),
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 16\r\nConnection: close\r\n\r\n{\"action\": null}".to_owned(),
    ] {
        let endpoint = stub(response).await;
        let client = Client::new(ClientConfig::new(Token::new("t")).with_endpoint(endpoint))
            .expect("client");
        let answer = client.load_balancers().delete(7).await.expect("deleted");
        assert_eq!(answer, None);
    }
}

#[tokio::test]
async fn load_balancer_ips_name_their_primary_ips_and_existing_ones_can_be_given() {
    let (sim, client) = setup().await;
    let id = created(&client, &request("ids")).await;
    let lb = client.load_balancers().get(id).await.expect("get");
    assert!(lb.public_net.ipv4.id.is_some());
    assert!(lb.public_net.ipv6.id.is_some());
    assert_ne!(lb.public_net.ipv4.id, lb.public_net.ipv6.id);

    let v4 = sim
        .admin()
        .create_primary_ip(PrimaryIpSeed::ipv4("mine"))
        .await
        .expect("primary ip");
    let v4_id = v4["id"].as_i64().expect("id");
    let request = CreateLoadBalancerRequest {
        public_net: Some(CreateLoadBalancerPublicNet {
            ipv4: Some(v4_id),
            ipv6: None,
        }),
        ..request("given")
    };
    let body = serde_json::to_value(&request).expect("encode");
    assert_eq!(body["public_net"], serde_json::json!({"ipv4": v4_id}));
    let id = created(&client, &request).await;
    let lb = client.load_balancers().get(id).await.expect("get");
    assert_eq!(lb.public_net.ipv4.id, Some(v4_id));
    assert_eq!(lb.public_net.ipv4.ip.as_deref(), v4["ip"].as_str());
    assert!(lb.public_net.ipv6.id.is_some(), "a new IPv6 was allocated");

    // Without public_net nothing is sent.
    let body = serde_json::to_value(self::request("plain")).expect("encode");
    assert!(body.get("public_net").is_none());

    let err = client
        .load_balancers()
        .create(&CreateLoadBalancerRequest {
            public_net: Some(CreateLoadBalancerPublicNet {
                ipv4: Some(v4_id),
                ipv6: None,
            }),
            ..self::request("again")
        })
        .await
        .expect_err("taken");
    assert_eq!(
        err.code(),
        Some(&ErrorCode::Unknown("primary_ip_already_assigned".into()))
    );
}

#[tokio::test]
async fn server_types_tell_where_they_can_be_ordered() {
    // The type, with its locations, comes with each server.
    let (sim, client) = setup().await;
    let server = sim
        .admin()
        .create_server(hcloud_sim::ServerSeed::new("arm").server_type("cax21"))
        .await
        .expect("server");
    let server = client
        .servers()
        .get(server["id"].as_i64().expect("id"))
        .await
        .expect("get");
    let t = &server.server_type;
    assert!(t.available_in("fsn1"));
    assert!(t.location("fsn1").expect("fsn1").recommended);
    assert!(!t.available_in("ash"), "arm types are EU only");
    assert!(t.location("ash").is_some(), "listed, but not available");
    assert!(!t.available_in("moon1"));
}

#[test]
fn server_type_locations_are_read_leniently() {
    let t: ServerType = serde_json::from_value(serde_json::json!({
        "id": 1, "name": "cx23",
        "locations": [
            {"id": 1, "name": "fsn1", "deprecation": null},
            {"id": 2, "name": "nbg1", "deprecation": null, "available": false, "recommended": true},
            {"id": 3, "name": "hel1", "available": null, "recommended": null},
        ]
    }))
    .expect("decode");
    // Before April 2026 a listed location was orderable.
    assert!(t.available_in("fsn1"));
    assert!(!t.location("fsn1").expect("fsn1").recommended);
    assert!(!t.available_in("nbg1"));
    assert!(t.location("nbg1").expect("nbg1").recommended);
    assert!(t.available_in("hel1"));
    let t: ServerType =
        serde_json::from_value(serde_json::json!({"id": 1, "name": "cx23", "locations": null}))
            .expect("decode");
    assert!(t.locations.is_empty());
}

#[tokio::test]
async fn a_post_that_timed_out_is_not_retried_other_methods_are() {
    let sim = common::start_sim().await;
    let client = Client::new(config_for(&sim).with_request_timeout(Duration::from_millis(300)))
        .expect("client");
    sim.admin()
        .inject_fault(
            Fault::new("/load_balancers")
                .method("POST")
                .latency(Duration::from_millis(1000))
                .count(1),
        )
        .await
        .expect("fault");
    let err = client
        .load_balancers()
        .create(&request("slow"))
        .await
        .expect_err("timeout");
    let Error::Transport(t) = &err else {
        panic!("expected a transport error, got {err:?}");
    };
    assert!(t.is_timeout());
    assert_eq!(count(&sim, "POST /load_balancers").await, 1, "not retried");

    // PUT and DELETE are idempotent: retried after a timeout.
    let id = created(&client, &request("fast")).await;
    for method in ["PUT", "DELETE"] {
        sim.admin().reset_request_counts().await.expect("reset");
        sim.admin()
            .inject_fault(
                Fault::new("/load_balancers/{id}")
                    .method(method)
                    .latency(Duration::from_millis(1000))
                    .count(1),
            )
            .await
            .expect("fault");
        if method == "PUT" {
            client
                .load_balancers()
                .update(
                    id,
                    &hcloud_api::UpdateRequest {
                        name: Some("renamed".into()),
                        labels: None,
                    },
                )
                .await
                .expect("second try");
        } else {
            client
                .load_balancers()
                .delete_and_wait(id)
                .await
                .expect("second try");
        }
        assert_eq!(
            count(&sim, &format!("{method} /load_balancers/{{id}}")).await,
            2,
            "{method}"
        );
    }
}

#[tokio::test]
async fn failed_connects_are_retried_for_posts_too() {
    // Nothing listens on the port: every try fails to connect, and each is retried.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    let client = Client::new(
        ClientConfig::new(Token::new("t"))
            .with_endpoint(format!("http://{addr}/v1"))
            .with_retry(common::fast_retry()),
    )
    .expect("client");
    let started = std::time::Instant::now();
    let err = client
        .load_balancers()
        .create(&request("x"))
        .await
        .expect_err("refused");
    assert!(matches!(err, Error::Transport(_)), "{err:?}");
    // Five tries with backoff between them take at least the four (jittered) base delays.
    assert!(
        started.elapsed() >= common::fast_retry().base * 4,
        "{:?}",
        started.elapsed()
    );
}
