use std::time::{Duration, Instant};

use hcloud_sim::{Fault, NetworkSeed, SeedFile, ServerSeed, SimConfig};
use serde_json::json;

use crate::common::{assert_error, start, start_with};

#[tokio::test]
async fn seeded_servers_look_like_api_servers() {
    let api = start().await;
    let admin = api.sim.admin();
    let net = admin
        .create_network(NetworkSeed::new("k8s", "10.0.0.0/16").subnet("10.0.0.0/24", "eu-central"))
        .await
        .unwrap();
    let s = admin
        .create_server(
            ServerSeed::new("node-1")
                .server_type("cax11")
                .location("hel1")
                .label("role", "worker")
                .status("off")
                .public_ipv4(false)
                .network(net),
        )
        .await
        .unwrap();
    assert_eq!(s["status"], "off");
    assert_eq!(s["public_net"]["ipv4"], json!(null));
    assert!(s["public_net"]["ipv6"]["ip"].is_string());
    assert_eq!(s["server_type"]["architecture"], "arm");
    assert_eq!(s["image"]["architecture"], "arm");
    assert_eq!(s["location"]["name"], "hel1");
    assert_eq!(s["private_net"][0]["ip"], "10.0.0.2");
    let id = s["id"].as_i64().unwrap();
    let r = api.get(&format!("/servers/{id}")).await;
    assert_eq!(r.body["server"], s);

    admin.set_server_status(id, "running").await.unwrap();
    assert_eq!(
        api.get(&format!("/servers/{id}")).await.body["server"]["status"],
        "running"
    );
    let err = admin.set_server_status(id, "flying").await.unwrap_err();
    assert!(
        matches!(err, hcloud_sim::Error::Api { status: 422, .. }),
        "{err}"
    );

    // Duplicate seeded names are refused too.
    let err = admin
        .create_server(ServerSeed::new("node-1"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, hcloud_sim::Error::Api { status: 409, .. }),
        "{err}"
    );

    admin.delete_server(id).await.unwrap();
    assert_error(&api.get(&format!("/servers/{id}")).await, 404, "not_found");
    assert_eq!(
        api.get(&format!("/networks/{net}")).await.body["network"]["servers"],
        json!([])
    );
}

#[tokio::test]
async fn faults_answer_with_errors_latency_and_failed_actions() {
    let api = start().await;
    let admin = api.sim.admin();
    admin
        .inject_fault(Fault::new("/servers").method("GET").count(2).status(503))
        .await
        .unwrap();
    assert_error(&api.get("/servers").await, 503, "unavailable");
    assert_error(&api.get("/servers").await, 503, "unavailable");
    assert_eq!(api.get("/servers").await.status, 200);

    admin
        .inject_fault(Fault::new("/servers/{id}").code("rate_limit_exceeded"))
        .await
        .unwrap();
    assert_eq!(api.get("/servers").await.status, 200);
    assert_error(&api.get("/servers/1").await, 429, "rate_limit_exceeded");

    admin
        .inject_fault(Fault::new("/locations*").latency(Duration::from_millis(250)))
        .await
        .unwrap();
    let t = Instant::now();
    assert_eq!(api.get("/locations").await.status, 200);
    assert!(t.elapsed() >= Duration::from_millis(250));

    let s = admin.create_server(ServerSeed::new("f")).await.unwrap();
    let id = s["id"].as_i64().unwrap();
    admin
        .inject_fault(Fault::new("/servers/*/actions/poweroff").fail_action())
        .await
        .unwrap();
    let r = api
        .post(&format!("/servers/{id}/actions/poweroff"), json!({}))
        .await;
    assert_eq!(r.status, 201);
    let a = api
        .wait_action(r.body["action"]["id"].as_i64().unwrap())
        .await;
    assert_eq!(a["status"], "error");
    assert_eq!(a["error"]["code"], "action_failed");
    // The effect did not apply.
    assert_eq!(
        api.get(&format!("/servers/{id}")).await.body["server"]["status"],
        "running"
    );
    // Only once.
    api.act(&format!("/servers/{id}/actions/poweroff"), json!({}))
        .await;
    assert_eq!(
        api.get(&format!("/servers/{id}")).await.body["server"]["status"],
        "off"
    );

    admin
        .inject_fault(Fault::new("*").status(502))
        .await
        .unwrap();
    admin.clear_faults().await.unwrap();
    assert_eq!(api.get("/servers").await.status, 200);

    // Replacing swaps every rule at once.
    admin
        .inject_fault(Fault::new("/servers").count(100).status(503))
        .await
        .unwrap();
    admin
        .replace_faults(&[Fault::new("/servers")
            .count(100)
            .code("rate_limit_exceeded")])
        .await
        .unwrap();
    // The 503 rule (first match) is gone.
    assert_error(&api.get("/servers").await, 429, "rate_limit_exceeded");
}

#[tokio::test]
async fn request_counts_by_route_template() {
    let api = start().await;
    let s = api
        .sim
        .admin()
        .create_server(ServerSeed::new("c"))
        .await
        .unwrap();
    let id = s["id"].as_i64().unwrap();
    api.get("/servers").await;
    api.get("/servers?page=1").await;
    api.get(&format!("/servers/{id}")).await;
    api.post(&format!("/servers/{id}/actions/poweroff"), json!({}))
        .await;
    let counts = api.sim.admin().request_counts().await.unwrap();
    assert_eq!(counts.get("GET /servers"), Some(&2));
    assert_eq!(counts.get("GET /servers/{id}"), Some(&1));
    assert_eq!(counts.get("POST /servers/{id}/actions/poweroff"), Some(&1));
    assert_eq!(counts.len(), 3, "{counts:?}");
    api.sim.admin().reset_request_counts().await.unwrap();
    assert!(api.sim.admin().request_counts().await.unwrap().is_empty());
}

#[tokio::test]
async fn action_delay_is_configurable() {
    let api = start_with(SimConfig::default().action_delay(Duration::from_millis(400))).await;
    let s = api
        .sim
        .admin()
        .create_server(ServerSeed::new("d"))
        .await
        .unwrap();
    let id = s["id"].as_i64().unwrap();
    let r = api
        .post(&format!("/servers/{id}/actions/poweroff"), json!({}))
        .await;
    let aid = r.body["action"]["id"].as_i64().unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(
        api.get(&format!("/actions/{aid}")).await.body["action"]["status"],
        "running"
    );
    api.sim
        .admin()
        .set_action_delay(Duration::ZERO)
        .await
        .unwrap();
    let r = api
        .post(
            "/servers",
            json!({"name": "z", "server_type": "cx23", "image": "debian-12"}),
        )
        .await;
    let zid = r.body["action"]["id"].as_i64().unwrap();
    assert_eq!(
        api.get(&format!("/actions/{zid}")).await.body["action"]["status"],
        "success"
    );
}

#[tokio::test]
async fn state_dump_and_seed_config() {
    let seed: SeedFile = serde_json::from_str(include_str!("../../examples/seed.json")).unwrap();
    let api = start_with(SimConfig::default().seed(seed)).await;
    let state = api.sim.admin().state().await.unwrap();
    assert!(!state["networks"].as_array().unwrap().is_empty());
    assert!(state["servers"].as_array().unwrap().len() >= 2);
    assert!(state.get("actions").is_some());
    let r = api.get("/servers?label_selector=role%3Dworker").await;
    for s in r.body["servers"].as_array().unwrap() {
        assert_eq!(s["private_net"].as_array().unwrap().len(), 1, "{s}");
    }
}
