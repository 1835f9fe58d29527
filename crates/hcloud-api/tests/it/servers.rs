//! Servers against the simulator.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code

use crate::common;

use hcloud_api::{ErrorCode, ListServersParams, NetworkZone, ServerStatus};
use hcloud_sim::{NetworkSeed, ServerSeed};

use common::{count, setup};

#[tokio::test]
async fn get_decodes_a_server() {
    let (sim, client) = setup().await;
    let admin = sim.admin();
    let net = admin
        .create_network(NetworkSeed::new("k8s", "10.0.0.0/16").subnet("10.0.1.0/24", "eu-central"))
        .await
        .expect("network");
    let seeded = admin
        .create_server(
            ServerSeed::new("node-1")
                .label("role", "worker")
                .location("nbg1")
                .network(net),
        )
        .await
        .expect("server");
    let id = seeded["id"].as_i64().expect("id");

    let server = client.servers().get(id).await.expect("get");
    assert_eq!(server.id, id);
    assert_eq!(server.name, "node-1");
    assert_eq!(server.status, ServerStatus::Running);
    assert_eq!(server.location.name, "nbg1");
    assert_eq!(server.location.network_zone, NetworkZone::EuCentral);
    assert!(!server.server_type.name.is_empty());
    assert_eq!(
        server.labels.get("role").map(String::as_str),
        Some("worker")
    );
    let v4 = server.public_net.ipv4.as_ref().expect("ipv4");
    assert!(v4.ip.parse::<std::net::Ipv4Addr>().is_ok(), "{}", v4.ip);
    let v6 = server.public_net.ipv6.as_ref().expect("ipv6");
    assert!(v6.ip.ends_with("/64"), "{}", v6.ip);
    assert_eq!(server.private_net.len(), 1);
    assert_eq!(server.private_net[0].network, net);
    assert!(
        server.private_net[0].ip.starts_with("10.0.1."),
        "{}",
        server.private_net[0].ip
    );
    assert_eq!(
        seeded["private_net"][0]["ip"],
        server.private_net[0].ip.as_str()
    );
}

#[tokio::test]
async fn missing_server_is_not_found() {
    let (_sim, client) = setup().await;
    let err = client.servers().get(999_999).await.expect_err("missing");
    assert!(err.is_not_found(), "{err}");
    assert_eq!(err.code(), Some(&ErrorCode::NotFound));
    assert_eq!(err.status(), Some(404));
}

#[tokio::test]
async fn server_without_public_ips_and_off() {
    let (sim, client) = setup().await;
    let v = sim
        .admin()
        .create_server(
            ServerSeed::new("private-only")
                .public_ipv4(false)
                .public_ipv6(false),
        )
        .await
        .expect("server");
    let id = v["id"].as_i64().expect("id");
    sim.admin().set_server_status(id, "off").await.expect("off");
    let server = client.servers().get(id).await.expect("get");
    assert!(server.public_net.ipv4.is_none());
    assert!(server.public_net.ipv6.is_none());
    assert_eq!(server.status, ServerStatus::Off);
}

#[tokio::test]
async fn list_filters_by_name_label_and_status() {
    let (sim, client) = setup().await;
    let admin = sim.admin();
    for (name, role) in [("a-1", "worker"), ("a-2", "worker"), ("b-1", "control")] {
        admin
            .create_server(ServerSeed::new(name).label("role", role))
            .await
            .expect("server");
    }
    let off = admin
        .create_server(ServerSeed::new("c-1").status("off"))
        .await
        .expect("server");

    let by_name = client
        .servers()
        .list(&ListServersParams::name("a-2"))
        .await
        .expect("by name");
    assert_eq!(by_name.items.len(), 1);
    assert_eq!(by_name.items[0].name, "a-2");

    let found = client.servers().get_by_name("b-1").await.expect("by name");
    assert_eq!(found.map(|s| s.name), Some("b-1".to_owned()));
    let none = client.servers().get_by_name("nope").await.expect("by name");
    assert!(none.is_none());

    let mut workers: Vec<String> = client
        .servers()
        .list_all(&ListServersParams::label_selector("role=worker"))
        .await
        .expect("selector")
        .into_iter()
        .map(|s| s.name)
        .collect();
    workers.sort();
    assert_eq!(workers, vec!["a-1", "a-2"]);

    let not_worker = client
        .servers()
        .list_all(&ListServersParams::label_selector("role!=worker,role"))
        .await
        .expect("selector");
    assert_eq!(not_worker.len(), 1);
    assert_eq!(not_worker[0].name, "b-1");

    let offs = client
        .servers()
        .list_all(&ListServersParams {
            status: vec![ServerStatus::Off],
            ..Default::default()
        })
        .await
        .expect("status");
    assert_eq!(offs.len(), 1);
    assert_eq!(Some(offs[0].id), off["id"].as_i64());
}

#[tokio::test]
async fn list_all_follows_pages_over_120_servers() {
    let (sim, client) = setup().await;
    let admin = sim.admin();
    for i in 0..120 {
        admin
            .create_server(ServerSeed::new(format!("node-{i:03}")))
            .await
            .expect("server");
    }
    admin.reset_request_counts().await.expect("reset");

    let all = client
        .servers()
        .list_all(&ListServersParams::default())
        .await
        .expect("list all");
    assert_eq!(all.len(), 120);
    let mut names: Vec<&str> = all.iter().map(|s| s.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), 120, "no duplicates");
    // 50 per page: 3 requests.
    assert_eq!(count(&sim, "GET /servers").await, 3);

    // A single page with explicit paging.
    let page = client
        .servers()
        .list(&ListServersParams {
            page: Some(3),
            per_page: Some(50),
            ..Default::default()
        })
        .await
        .expect("page 3");
    assert_eq!(page.items.len(), 20);
    let p = page.pagination().expect("pagination");
    assert_eq!((p.page, p.per_page), (3, 50));
    assert_eq!(p.next_page, None);
    assert_eq!(p.previous_page, Some(2));
    assert_eq!(p.last_page, Some(3));
    assert_eq!(p.total_entries, Some(120));
}

#[tokio::test]
async fn invalid_status_filter_is_invalid_input() {
    let (_sim, client) = setup().await;
    let err = client
        .servers()
        .list(&ListServersParams {
            status: vec![ServerStatus::Unknown("sleeping".into())],
            ..Default::default()
        })
        .await
        .expect_err("invalid");
    assert_eq!(err.code(), Some(&ErrorCode::InvalidInput));
    assert!(!err.is_not_found());
    let hcloud_api::Error::Api(api) = err else {
        panic!("expected an API error");
    };
    assert_eq!(api.status, 422);
    assert_eq!(api.details.fields[0].name, "status");
}

/// A deletion between two page requests shifts every later server one place earlier, so the
/// first server of page 2 would be skipped. The pages then disagree about the total, and the
/// listing is made again: every server that still exists is listed.
#[tokio::test]
async fn a_listing_that_shifted_under_a_deletion_is_made_again() {
    let (sim, client) = setup().await;
    let admin = sim.admin();
    let mut ids = Vec::new();
    for i in 0..60 {
        let server = admin
            .create_server(ServerSeed::new(format!("node-{i:02}")))
            .await
            .expect("server");
        ids.push(server["id"].as_i64().expect("id"));
    }
    admin.reset_request_counts().await.expect("reset");
    // Page 1 goes through at once; page 2 is held back while the first server is deleted.
    admin
        .replace_faults(&[
            hcloud_sim::Fault::new("/servers").method("GET"),
            hcloud_sim::Fault::new("/servers")
                .method("GET")
                .latency(std::time::Duration::from_millis(500)),
        ])
        .await
        .expect("faults");
    let listing = {
        let client = client.clone();
        tokio::spawn(async move {
            client
                .servers()
                .list_all(&ListServersParams::default())
                .await
        })
    };
    while count(&sim, "GET /servers").await < 2 {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    admin.delete_server(ids[0]).await.expect("delete");
    let listed = listing.await.expect("task").expect("listing");
    let mut listed: Vec<i64> = listed.iter().map(|s| s.id).collect();
    listed.sort_unstable();
    assert_eq!(listed, ids[1..], "every server that exists, none skipped");
    assert_eq!(
        count(&sim, "GET /servers").await,
        4,
        "the shifted listing (2 pages) and the one made again (2 pages)"
    );
}
