use hcloud_sim::{NetworkSeed, ServerSeed};
use serde_json::json;

use crate::common::{Api, assert_error, start};

async fn make_net(api: &Api) -> i64 {
    let r = api
        .post(
            "/networks",
            json!({"name": "k8s", "ip_range": "10.0.0.0/16", "labels": {"a": "b"},
                   "subnets": [{"type": "cloud", "ip_range": "10.0.0.0/24", "network_zone": "eu-central"}]}),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    assert!(r.body.get("action").is_none());
    let n = &r.body["network"];
    assert_eq!(n["subnets"][0]["gateway"], "10.0.0.1");
    assert_eq!(n["routes"], json!([]));
    n["id"].as_i64().unwrap()
}

#[tokio::test]
async fn crud() {
    let api = start().await;
    let id = make_net(&api).await;
    let r = api
        .post(
            "/networks",
            json!({"name": "k8s", "ip_range": "10.1.0.0/16"}),
        )
        .await;
    assert_error(&r, 409, "uniqueness_error");
    let r = api
        .post(
            "/networks",
            json!({"name": "pub", "ip_range": "8.8.0.0/16"}),
        )
        .await;
    assert_error(&r, 422, "invalid_input");
    let r = api.get("/networks?name=k8s").await;
    assert_eq!(r.body["networks"][0]["id"], id);
    let r = api.get("/networks?label_selector=a%3Db").await;
    assert_eq!(r.body["networks"].as_array().unwrap().len(), 1);
    let r = api
        .put(
            &format!("/networks/{id}"),
            json!({"name": "renamed", "labels": {}}),
        )
        .await;
    assert_eq!(r.body["network"]["name"], "renamed");
    assert_eq!(r.body["network"]["labels"], json!({}));
    api.act(
        &format!("/networks/{id}/actions/change_protection"),
        json!({"delete": true}),
    )
    .await;
    assert_error(
        &api.delete(&format!("/networks/{id}")).await,
        423,
        "protected",
    );
    api.act(
        &format!("/networks/{id}/actions/change_protection"),
        json!({"delete": false}),
    )
    .await;
    let r = api.delete(&format!("/networks/{id}")).await;
    assert_eq!(r.status, 204);
    assert_error(&api.get(&format!("/networks/{id}")).await, 404, "not_found");
}

#[tokio::test]
async fn routes_are_added_when_the_action_finishes() {
    let api = start().await;
    api.sim
        .admin()
        .set_action_delay(std::time::Duration::from_millis(200))
        .await
        .unwrap();
    let id = make_net(&api).await;
    let r = api
        .post(
            &format!("/networks/{id}/actions/add_route"),
            json!({"destination": "10.244.0.0/24", "gateway": "10.0.0.2"}),
        )
        .await;
    assert_eq!(r.status, 201);
    assert_eq!(r.body["action"]["command"], "add_route");
    assert_eq!(
        r.body["action"]["resources"],
        json!([{"id": id, "type": "network"}])
    );
    assert_eq!(
        api.get(&format!("/networks/{id}")).await.body["network"]["routes"],
        json!([])
    );
    // A second change while the first runs: conflict.
    let r2 = api
        .post(
            &format!("/networks/{id}/actions/add_route"),
            json!({"destination": "10.244.1.0/24", "gateway": "10.0.0.2"}),
        )
        .await;
    assert_error(&r2, 409, "conflict");
    api.wait_action(r.body["action"]["id"].as_i64().unwrap())
        .await;
    assert_eq!(
        api.get(&format!("/networks/{id}")).await.body["network"]["routes"],
        json!([{"destination": "10.244.0.0/24", "gateway": "10.0.0.2"}])
    );
    api.act(
        &format!("/networks/{id}/actions/delete_route"),
        json!({"destination": "10.244.0.0/24", "gateway": "10.0.0.2"}),
    )
    .await;
    assert_eq!(
        api.get(&format!("/networks/{id}")).await.body["network"]["routes"],
        json!([])
    );
    let r = api
        .post(
            &format!("/networks/{id}/actions/delete_route"),
            json!({"destination": "10.244.0.0/24", "gateway": "10.0.0.2"}),
        )
        .await;
    assert_error(&r, 404, "not_found");
}

#[tokio::test]
async fn route_validation() {
    let api = start().await;
    let id = make_net(&api).await;
    api.act(
        &format!("/networks/{id}/actions/add_route"),
        json!({"destination": "10.244.0.0/24", "gateway": "10.0.0.2"}),
    )
    .await;
    let path = format!("/networks/{id}/actions/add_route");
    for (dest, gw, field) in [
        ("1.2.3.0/24", "10.0.0.2", "destination"),
        ("10.0.0.0/25", "10.0.0.2", "destination"),
        ("10.244.0.0/16", "10.0.0.2", "destination"),
        ("10.244.0.0/24", "10.0.0.3", "destination"),
        ("10.245.0.0/24", "10.0.0.1", "gateway"),
        ("10.245.0.0/24", "172.31.1.1", "gateway"),
        ("10.245.0.0/24", "192.168.1.1", "gateway"),
        ("10.245.0.1/24", "10.0.0.2", "destination"),
        ("garbage", "10.0.0.2", "destination"),
        ("10.245.0.0/24", "garbage", "gateway"),
    ] {
        let r = api
            .post(&path, json!({"destination": dest, "gateway": gw}))
            .await;
        assert_error(&r, 422, "invalid_input");
        let fields = crate::common::field_names(&r);
        assert!(
            fields.contains(&field.to_string()),
            "{dest} via {gw}: {fields:?}"
        );
    }
    let r = api
        .post(&path, json!({"destination": "10.245.0.0/24"}))
        .await;
    assert_error(&r, 422, "invalid_input");
    api.act(
        &path,
        json!({"destination": "0.0.0.0/0", "gateway": "10.0.0.5"}),
    )
    .await;
}

#[tokio::test]
async fn subnets() {
    let api = start().await;
    let id = make_net(&api).await;
    api.act(
        &format!("/networks/{id}/actions/add_subnet"),
        json!({"type": "cloud", "network_zone": "us-east"}),
    )
    .await;
    let n = api.get(&format!("/networks/{id}")).await.body["network"].clone();
    assert_eq!(n["subnets"][1]["ip_range"], "10.0.1.0/24");
    assert_eq!(n["subnets"][1]["network_zone"], "us-east");
    let r = api
        .post(
            &format!("/networks/{id}/actions/add_subnet"),
            json!({"type": "cloud", "network_zone": "eu-central", "ip_range": "10.0.0.128/25"}),
        )
        .await;
    assert_error(&r, 422, "invalid_input");
    let r = api
        .post(
            &format!("/networks/{id}/actions/add_subnet"),
            json!({"type": "cloud", "network_zone": "eu-central", "ip_range": "10.9.0.0/24"}),
        )
        .await;
    assert_error(&r, 422, "invalid_input");
    // A server in ash now gets an IP from the us-east subnet.
    let s = api
        .sim
        .admin()
        .create_server(
            ServerSeed::new("us-1")
                .server_type("cpx22")
                .location("ash")
                .network(id),
        )
        .await
        .unwrap();
    assert_eq!(s["private_net"][0]["ip"], "10.0.1.1");
    let r = api
        .post(
            &format!("/networks/{id}/actions/delete_subnet"),
            json!({"ip_range": "10.0.1.0/24"}),
        )
        .await;
    assert_error(&r, 409, "conflict");
    api.sim
        .admin()
        .delete_server(s["id"].as_i64().unwrap())
        .await
        .unwrap();
    api.act(
        &format!("/networks/{id}/actions/delete_subnet"),
        json!({"ip_range": "10.0.1.0/24"}),
    )
    .await;
    let n = api.get(&format!("/networks/{id}")).await.body["network"].clone();
    assert_eq!(n["subnets"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn deleting_a_network_detaches_servers() {
    let api = start().await;
    let admin = api.sim.admin();
    let net = admin
        .create_network(NetworkSeed::new("n", "10.0.0.0/16").subnet("10.0.0.0/24", "eu-central"))
        .await
        .unwrap();
    let s = admin
        .create_server(ServerSeed::new("a").network("n"))
        .await
        .unwrap();
    assert_eq!(s["private_net"][0]["network"], net);
    assert_eq!(api.delete(&format!("/networks/{net}")).await.status, 204);
    let s = api.get(&format!("/servers/{}", s["id"])).await;
    assert_eq!(s.body["server"]["private_net"], json!([]));
}
