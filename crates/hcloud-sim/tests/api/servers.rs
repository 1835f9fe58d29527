use hcloud_sim::{NetworkSeed, ServerSeed};
use serde_json::{Value, json};

use crate::common::{Api, assert_error, start};

async fn create(api: &Api, body: Value) -> Value {
    let r = api.post("/servers", body).await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    r.body
}

fn names(v: &Value) -> Vec<String> {
    v["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn create_runs_an_action_then_the_server_is_running() {
    let api = start().await;
    let b = create(
        &api,
        json!({"name": "web-1", "server_type": "cx23", "image": "ubuntu-24.04", "location": "nbg1",
               "labels": {"role": "web"}}),
    )
    .await;
    let s = &b["server"];
    assert_eq!(s["status"], "initializing");
    assert_eq!(s["location"]["name"], "nbg1");
    assert_eq!(s["location"]["network_zone"], "eu-central");
    assert!(s.get("datacenter").is_none());
    assert_eq!(s["server_type"]["name"], "cx23");
    assert_eq!(s["image"]["name"], "ubuntu-24.04");
    assert!(
        s["public_net"]["ipv4"]["ip"]
            .as_str()
            .unwrap()
            .starts_with("192.0.2.")
    );
    assert!(
        s["public_net"]["ipv6"]["ip"]
            .as_str()
            .unwrap()
            .starts_with("2001:db8:")
    );
    assert!(
        s["public_net"]["ipv6"]["ip"]
            .as_str()
            .unwrap()
            .ends_with("::/64")
    );
    assert_eq!(b["action"]["command"], "create_server");
    assert_eq!(b["action"]["status"], "running");
    assert_eq!(b["action"]["finished"], Value::Null);
    assert_eq!(
        b["action"]["resources"],
        json!([{"id": s["id"], "type": "server"}])
    );
    assert_eq!(b["next_actions"][0]["command"], "start_server");
    assert!(b["root_password"].is_string());
    let id = s["id"].as_i64().unwrap();
    let a = api.wait_action(b["action"]["id"].as_i64().unwrap()).await;
    assert_eq!(a["status"], "success");
    assert_eq!(a["progress"], 100);
    assert!(a["finished"].is_string());
    let r = api.get(&format!("/servers/{id}")).await;
    assert_eq!(r.body["server"]["status"], "running");
}

#[tokio::test]
async fn create_validates_references() {
    let api = start().await;
    let r = api
        .post(
            "/servers",
            json!({"name": "a", "server_type": "nope", "image": "ubuntu-24.04"}),
        )
        .await;
    assert_error(&r, 422, "invalid_input");
    let r = api
        .post(
            "/servers",
            json!({"name": "a", "server_type": "cx23", "image": "ubuntu-24.04", "location": "sin"}),
        )
        .await;
    assert_error(&r, 422, "invalid_input");
    let r = api
        .post(
            "/servers",
            json!({"name": "a_b", "server_type": "cx23", "image": "ubuntu-24.04"}),
        )
        .await;
    assert_error(&r, 422, "invalid_input");
    // Image by ID works, arm images need arm types.
    let imgs = api.get("/images?name=debian-12&architecture=arm").await;
    let arm_id = imgs.body["images"][0]["id"].as_i64().unwrap();
    let r = api
        .post(
            "/servers",
            json!({"name": "a", "server_type": "cax11", "image": arm_id}),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    assert_eq!(r.body["server"]["image"]["id"], arm_id);
    let r = api
        .post(
            "/servers",
            json!({"name": "b", "server_type": "cx23", "image": arm_id}),
        )
        .await;
    assert_error(&r, 422, "invalid_input");
}

#[tokio::test]
async fn names_are_unique() {
    let api = start().await;
    create(
        &api,
        json!({"name": "dup", "server_type": "cx23", "image": "ubuntu-24.04"}),
    )
    .await;
    let r = api
        .post(
            "/servers",
            json!({"name": "dup", "server_type": "cx23", "image": "ubuntu-24.04"}),
        )
        .await;
    assert_error(&r, 409, "uniqueness_error");
    let other = create(
        &api,
        json!({"name": "other", "server_type": "cx23", "image": "ubuntu-24.04"}),
    )
    .await;
    let id = other["server"]["id"].as_i64().unwrap();
    let r = api
        .put(&format!("/servers/{id}"), json!({"name": "dup"}))
        .await;
    assert_error(&r, 409, "uniqueness_error");
}

#[tokio::test]
async fn list_filters_and_sort() {
    let api = start().await;
    let admin = api.sim.admin();
    admin
        .create_server(
            ServerSeed::new("c")
                .label("env", "prod")
                .label("tier", "web"),
        )
        .await
        .unwrap();
    admin
        .create_server(ServerSeed::new("a").label("env", "dev"))
        .await
        .unwrap();
    admin
        .create_server(ServerSeed::new("b").label("env", "prod").status("off"))
        .await
        .unwrap();

    assert_eq!(names(&api.get("/servers?name=a").await.body), vec!["a"]);
    assert_eq!(
        names(&api.get("/servers?name=zzz").await.body),
        Vec::<String>::new()
    );
    assert_eq!(
        names(&api.get("/servers?label_selector=env%3Dprod").await.body),
        vec!["c", "b"]
    );
    assert_eq!(
        names(&api.get("/servers?label_selector=env!%3Dprod").await.body),
        vec!["a"]
    );
    assert_eq!(
        names(&api.get("/servers?label_selector=tier").await.body),
        vec!["c"]
    );
    assert_eq!(
        names(&api.get("/servers?label_selector=!tier").await.body),
        vec!["a", "b"]
    );
    assert_eq!(
        names(
            &api.get("/servers?label_selector=env%20in%20(dev,test)")
                .await
                .body
        ),
        vec!["a"]
    );
    assert_eq!(
        names(
            &api.get("/servers?label_selector=env%20notin%20(dev),!tier")
                .await
                .body
        ),
        vec!["b"]
    );
    assert_eq!(names(&api.get("/servers?status=off").await.body), vec!["b"]);
    assert_eq!(
        names(&api.get("/servers?status=off&status=running").await.body).len(),
        3
    );
    assert_eq!(
        names(&api.get("/servers?sort=name").await.body),
        vec!["a", "b", "c"]
    );
    assert_eq!(
        names(&api.get("/servers?sort=name:desc").await.body),
        vec!["c", "b", "a"]
    );
    assert_eq!(
        names(&api.get("/servers?sort=id:desc").await.body),
        vec!["b", "a", "c"]
    );
    assert_error(&api.get("/servers?sort=bogus").await, 422, "invalid_input");
    assert_error(
        &api.get("/servers?status=bogus").await,
        422,
        "invalid_input",
    );
    assert_error(
        &api.get("/servers?label_selector=a%20in%20(b").await,
        422,
        "invalid_input",
    );
}

#[tokio::test]
async fn update_replaces_labels() {
    let api = start().await;
    let s = api
        .sim
        .admin()
        .create_server(ServerSeed::new("x").label("a", "1"))
        .await
        .unwrap();
    let id = s["id"].as_i64().unwrap();
    let r = api
        .put(&format!("/servers/{id}"), json!({"labels": {"b": "2"}}))
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["server"]["labels"], json!({"b": "2"}));
    assert_eq!(r.body["server"]["name"], "x");
}

#[tokio::test]
async fn delete_returns_action_and_locks() {
    let api = start().await;
    api.sim
        .admin()
        .set_action_delay(std::time::Duration::from_millis(300))
        .await
        .unwrap();
    let s = api
        .sim
        .admin()
        .create_server(ServerSeed::new("gone"))
        .await
        .unwrap();
    let id = s["id"].as_i64().unwrap();
    let r = api.delete(&format!("/servers/{id}")).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["action"]["command"], "delete_server");
    assert_eq!(r.body["action"]["status"], "running");
    // Still there while the action runs, and locked.
    assert_eq!(api.get(&format!("/servers/{id}")).await.status, 200);
    assert_error(
        &api.post(&format!("/servers/{id}/actions/poweroff"), json!({}))
            .await,
        423,
        "locked",
    );
    assert_error(&api.delete(&format!("/servers/{id}")).await, 423, "locked");
    api.wait_action(r.body["action"]["id"].as_i64().unwrap())
        .await;
    assert_error(&api.get(&format!("/servers/{id}")).await, 404, "not_found");
}

#[tokio::test]
async fn delete_protection() {
    let api = start().await;
    let s = api
        .sim
        .admin()
        .create_server(ServerSeed::new("p"))
        .await
        .unwrap();
    let id = s["id"].as_i64().unwrap();
    api.act(
        &format!("/servers/{id}/actions/change_protection"),
        json!({"delete": true}),
    )
    .await;
    assert_error(
        &api.delete(&format!("/servers/{id}")).await,
        423,
        "protected",
    );
    api.act(
        &format!("/servers/{id}/actions/change_protection"),
        json!({"delete": false}),
    )
    .await;
    assert_eq!(api.delete(&format!("/servers/{id}")).await.status, 200);
}

#[tokio::test]
async fn power_actions_apply_when_finished() {
    let api = start().await;
    api.sim
        .admin()
        .set_action_delay(std::time::Duration::from_millis(200))
        .await
        .unwrap();
    let s = api
        .sim
        .admin()
        .create_server(ServerSeed::new("pw"))
        .await
        .unwrap();
    let id = s["id"].as_i64().unwrap();
    let r = api
        .post(&format!("/servers/{id}/actions/poweroff"), json!({}))
        .await;
    assert_eq!(r.status, 201);
    assert_eq!(r.body["action"]["command"], "stop_server");
    assert_eq!(
        api.get(&format!("/servers/{id}")).await.body["server"]["status"],
        "running"
    );
    api.wait_action(r.body["action"]["id"].as_i64().unwrap())
        .await;
    assert_eq!(
        api.get(&format!("/servers/{id}")).await.body["server"]["status"],
        "off"
    );
    api.act(&format!("/servers/{id}/actions/poweron"), json!({}))
        .await;
    assert_eq!(
        api.get(&format!("/servers/{id}")).await.body["server"]["status"],
        "running"
    );
    api.act(&format!("/servers/{id}/actions/shutdown"), json!({}))
        .await;
    assert_eq!(
        api.get(&format!("/servers/{id}")).await.body["server"]["status"],
        "off"
    );
    api.act(&format!("/servers/{id}/actions/poweron"), json!({}))
        .await;
    api.act(&format!("/servers/{id}/actions/reset"), json!({}))
        .await;
    assert_eq!(
        api.get(&format!("/servers/{id}")).await.body["server"]["status"],
        "running"
    );
    assert_error(
        &api.post(&format!("/servers/{id}/actions/fly"), json!({}))
            .await,
        404,
        "not_found",
    );
}

#[tokio::test]
async fn networks_on_create_and_attach_detach() {
    let api = start().await;
    let admin = api.sim.admin();
    let net = admin
        .create_network(NetworkSeed::new("k8s", "10.0.0.0/16").subnet("10.0.0.0/24", "eu-central"))
        .await
        .unwrap();
    let other = admin
        .create_network(
            NetworkSeed::new("other", "10.1.0.0/16").subnet("10.1.0.0/24", "eu-central"),
        )
        .await
        .unwrap();
    let b = create(
        &api,
        json!({"name": "n1", "server_type": "cx23", "image": "ubuntu-24.04", "location": "fsn1", "networks": [net]}),
    )
    .await;
    let id = b["server"]["id"].as_i64().unwrap();
    assert_eq!(b["server"]["private_net"][0]["network"], net);
    assert_eq!(b["server"]["private_net"][0]["ip"], "10.0.0.2");
    assert!(b["server"]["private_net"][0]["mac_address"].is_string());
    let n = api.get(&format!("/networks/{net}")).await;
    assert_eq!(n.body["network"]["servers"], json!([id]));
    api.wait_action(b["action"]["id"].as_i64().unwrap()).await;

    // Attach with a fixed IP.
    let a = api
        .act(
            &format!("/servers/{id}/actions/attach_to_network"),
            json!({"network": other, "ip": "10.1.0.7"}),
        )
        .await;
    assert_eq!(a["command"], "attach_to_network");
    let s = api.get(&format!("/servers/{id}")).await.body["server"].clone();
    assert_eq!(s["private_net"][1]["ip"], "10.1.0.7");
    let r = api
        .post(
            &format!("/servers/{id}/actions/attach_to_network"),
            json!({"network": other}),
        )
        .await;
    assert_error(&r, 422, "server_already_attached");
    // IP taken.
    let s2 = admin.create_server(ServerSeed::new("n2")).await.unwrap();
    let id2 = s2["id"].as_i64().unwrap();
    let r = api
        .post(
            &format!("/servers/{id2}/actions/attach_to_network"),
            json!({"network": other, "ip": "10.1.0.7"}),
        )
        .await;
    assert_error(&r, 422, "ip_not_available");
    // Detach.
    api.act(
        &format!("/servers/{id}/actions/detach_from_network"),
        json!({"network": other}),
    )
    .await;
    let s = api.get(&format!("/servers/{id}")).await.body["server"].clone();
    assert_eq!(s["private_net"].as_array().unwrap().len(), 1);
    assert_eq!(
        api.get(&format!("/networks/{other}")).await.body["network"]["servers"],
        json!([])
    );
    let r = api
        .post(
            &format!("/servers/{id}/actions/detach_from_network"),
            json!({"network": other}),
        )
        .await;
    assert_error(&r, 422, "server_not_attached_to_network");
    // A server in the US cannot join an eu-central only network.
    let us = admin
        .create_server(ServerSeed::new("us").server_type("cpx22").location("ash"))
        .await
        .unwrap();
    let r = api
        .post(
            &format!("/servers/{}/actions/attach_to_network", us["id"]),
            json!({"network": net}),
        )
        .await;
    assert_error(&r, 422, "no_subnet_available");
}
