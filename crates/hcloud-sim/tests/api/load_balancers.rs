use std::time::Duration;

use hcloud_sim::{NetworkSeed, ServerSeed, TargetRef};
use serde_json::{Value, json};

use crate::common::{Api, assert_error, start};

async fn lb(api: &Api, body: Value) -> i64 {
    let r = api.post("/load_balancers", body).await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let id = r.body["load_balancer"]["id"].as_i64().unwrap();
    let a = api
        .wait_action(r.body["action"]["id"].as_i64().unwrap())
        .await;
    assert_eq!(a["status"], "success");
    id
}

async fn get_lb(api: &Api, id: i64) -> Value {
    api.get(&format!("/load_balancers/{id}")).await.body["load_balancer"].clone()
}

async fn net(api: &Api) -> i64 {
    api.sim
        .admin()
        .create_network(NetworkSeed::new("k8s", "10.0.0.0/16").subnet("10.0.0.0/24", "eu-central"))
        .await
        .unwrap()
}

#[tokio::test]
async fn ips_are_null_until_create_succeeds() {
    let api = start().await;
    api.sim
        .admin()
        .set_action_delay(Duration::from_millis(250))
        .await
        .unwrap();
    let n = net(&api).await;
    let r = api
        .post(
            "/load_balancers",
            json!({"name": "lb", "load_balancer_type": "lb11", "location": "fsn1", "network": n,
                   "labels": {"hcloud-ccm/service-uid": "abc"},
                   "services": [{"protocol": "tcp", "listen_port": 80, "destination_port": 30080}]}),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let l = &r.body["load_balancer"];
    assert_eq!(l["public_net"]["enabled"], true);
    assert_eq!(l["public_net"]["ipv4"]["ip"], Value::Null);
    assert_eq!(l["public_net"]["ipv6"]["ip"], Value::Null);
    assert_eq!(l["private_net"], json!([]));
    assert_eq!(l["algorithm"]["type"], "round_robin");
    assert_eq!(l["services"][0]["health_check"]["protocol"], "tcp");
    assert_eq!(l["services"][0]["health_check"]["port"], 30080);
    assert_eq!(r.body["action"]["command"], "create_load_balancer");
    let id = l["id"].as_i64().unwrap();
    // Locked while creating.
    let r2 = api
        .post(
            &format!("/load_balancers/{id}/actions/change_algorithm"),
            json!({"type": "least_connections"}),
        )
        .await;
    assert_error(&r2, 423, "locked");
    api.wait_action(r.body["action"]["id"].as_i64().unwrap())
        .await;
    let l = get_lb(&api, id).await;
    assert!(
        l["public_net"]["ipv4"]["ip"]
            .as_str()
            .unwrap()
            .starts_with("198.51.100.")
    );
    assert!(
        l["public_net"]["ipv6"]["ip"]
            .as_str()
            .unwrap()
            .starts_with("2001:db8:")
    );
    assert_eq!(l["private_net"], json!([{"network": n, "ip": "10.0.0.2"}]));
    assert_eq!(
        api.get(&format!("/networks/{n}")).await.body["network"]["load_balancers"],
        json!([id])
    );
    let r = api
        .get("/load_balancers?label_selector=hcloud-ccm/service-uid%3Dabc")
        .await;
    assert_eq!(r.body["load_balancers"][0]["id"], id);
    let r = api
        .post(
            "/load_balancers",
            json!({"name": "lb", "load_balancer_type": "lb11", "location": "fsn1"}),
        )
        .await;
    assert_error(&r, 409, "uniqueness_error");
}

#[tokio::test]
async fn create_validation() {
    let api = start().await;
    let r = api
        .post(
            "/load_balancers",
            json!({"name": "x", "load_balancer_type": "lb11"}),
        )
        .await;
    assert_error(&r, 422, "invalid_input");
    let r = api
        .post("/load_balancers", json!({"name": "x", "load_balancer_type": "lb11", "location": "fsn1", "network_zone": "eu-central"}))
        .await;
    assert_error(&r, 422, "invalid_input");
    let r = api
        .post(
            "/load_balancers",
            json!({"name": "x", "load_balancer_type": "lb99", "location": "fsn1"}),
        )
        .await;
    assert_error(&r, 422, "invalid_input");
    let r = api
        .post(
            "/load_balancers",
            json!({"name": "x", "load_balancer_type": "lb11", "network_zone": "us-west",
                   "services": [{"protocol": "tcp", "listen_port": 80}, {"protocol": "tcp", "listen_port": 80}]}),
        )
        .await;
    assert_error(&r, 422, "source_port_already_used");
    let r = api
        .post(
            "/load_balancers",
            json!({"name": "x", "load_balancer_type": "lb11", "network_zone": "us-west",
                   "targets": [{"type": "server", "server": {"id": 1}, "use_private_ip": true}]}),
        )
        .await;
    assert_error(&r, 422, "load_balancer_not_attached_to_network");
    let id = lb(
        &api,
        json!({"name": "x", "load_balancer_type": "lb11", "network_zone": "us-west"}),
    )
    .await;
    assert_eq!(get_lb(&api, id).await["location"]["name"], "hil");
}

#[tokio::test]
async fn services_add_update_delete() {
    let api = start().await;
    let id = lb(
        &api,
        json!({"name": "s", "load_balancer_type": "lb11", "location": "nbg1"}),
    )
    .await;
    let p = |a: &str| format!("/load_balancers/{id}/actions/{a}");
    api.act(&p("add_service"), json!({"protocol": "tcp", "listen_port": 443, "destination_port": 30443, "proxyprotocol": true}))
        .await;
    assert_error(
        &api.post(
            &p("add_service"),
            json!({"protocol": "tcp", "listen_port": 443, "destination_port": 1}),
        )
        .await,
        422,
        "source_port_already_used",
    );
    api.act(
        &p("update_service"),
        json!({"listen_port": 443, "destination_port": 31443, "health_check": {"protocol": "http", "port": 10256, "interval": 5, "http": {"path": "/healthz"}}}),
    )
    .await;
    let l = get_lb(&api, id).await;
    let s = &l["services"][0];
    assert_eq!(s["destination_port"], 31443);
    assert_eq!(s["proxyprotocol"], true);
    assert_eq!(s["health_check"]["protocol"], "http");
    assert_eq!(s["health_check"]["port"], 10256);
    assert_eq!(s["health_check"]["interval"], 5);
    assert_eq!(s["health_check"]["http"]["path"], "/healthz");
    api.act(
        &p("update_service"),
        json!({"listen_port": 443, "protocol": "http", "http": {"sticky_sessions": true, "timeout_idle": 120}}),
    )
    .await;
    let l = get_lb(&api, id).await;
    assert_eq!(l["services"][0]["http"]["sticky_sessions"], true);
    assert_eq!(l["services"][0]["http"]["timeout_idle"], 120);
    assert_eq!(l["services"][0]["http"]["cookie_name"], "HCLBSTICKY");
    assert_error(
        &api.post(&p("update_service"), json!({"listen_port": 9999}))
            .await,
        404,
        "not_found",
    );
    assert_error(
        &api.post(
            &p("update_service"),
            json!({"listen_port": 443, "http": {"timeout_idle": 5}}),
        )
        .await,
        422,
        "invalid_input",
    );
    assert_error(
        &api.post(
            &p("add_service"),
            json!({"protocol": "https", "listen_port": 8443}),
        )
        .await,
        422,
        "invalid_input",
    );
    api.act(&p("delete_service"), json!({"listen_port": 443}))
        .await;
    assert_eq!(get_lb(&api, id).await["services"], json!([]));
    assert_error(
        &api.post(&p("delete_service"), json!({"listen_port": 443}))
            .await,
        404,
        "not_found",
    );
    // lb11 allows 5 services.
    for port in 1..=5 {
        api.act(
            &p("add_service"),
            json!({"protocol": "tcp", "listen_port": port}),
        )
        .await;
    }
    assert_error(
        &api.post(
            &p("add_service"),
            json!({"protocol": "tcp", "listen_port": 6}),
        )
        .await,
        403,
        "resource_limit_exceeded",
    );
    // And lb11 cannot be the type of an LB with 6 services.
    api.act(&p("change_type"), json!({"load_balancer_type": "lb21"}))
        .await;
    api.act(
        &p("add_service"),
        json!({"protocol": "tcp", "listen_port": 6}),
    )
    .await;
    assert_error(
        &api.post(&p("change_type"), json!({"load_balancer_type": "lb11"}))
            .await,
        422,
        "invalid_load_balancer_type",
    );
    assert_eq!(get_lb(&api, id).await["load_balancer_type"]["name"], "lb21");
}

#[tokio::test]
async fn targets_and_back_references() {
    let api = start().await;
    let admin = api.sim.admin();
    let n = net(&api).await;
    let s1 = admin
        .create_server(ServerSeed::new("w1").label("role", "worker").network(n))
        .await
        .unwrap();
    let s2 = admin
        .create_server(ServerSeed::new("w2").label("role", "worker"))
        .await
        .unwrap();
    let (id1, id2) = (s1["id"].as_i64().unwrap(), s2["id"].as_i64().unwrap());
    let id = lb(
        &api,
        json!({"name": "t", "load_balancer_type": "lb11", "location": "fsn1",
        "services": [{"protocol": "tcp", "listen_port": 80, "destination_port": 30080}]}),
    )
    .await;
    let p = |a: &str| format!("/load_balancers/{id}/actions/{a}");

    // Private targets need the LB in a network.
    assert_error(
        &api.post(
            &p("add_target"),
            json!({"type": "server", "server": {"id": id1}, "use_private_ip": true}),
        )
        .await,
        422,
        "load_balancer_not_attached_to_network",
    );
    api.act(
        &p("attach_to_network"),
        json!({"network": n, "ip": "10.0.0.50"}),
    )
    .await;
    assert_error(
        &api.post(&p("attach_to_network"), json!({"network": n}))
            .await,
        422,
        "load_balancer_already_attached",
    );
    assert_eq!(
        get_lb(&api, id).await["private_net"],
        json!([{"network": n, "ip": "10.0.0.50"}])
    );
    api.act(
        &p("add_target"),
        json!({"type": "server", "server": {"id": id1}, "use_private_ip": true}),
    )
    .await;
    assert_error(
        &api.post(
            &p("add_target"),
            json!({"type": "server", "server": {"id": id1}, "use_private_ip": true}),
        )
        .await,
        422,
        "target_already_defined",
    );
    assert_error(
        &api.post(
            &p("add_target"),
            json!({"type": "server", "server": {"id": id2}, "use_private_ip": true}),
        )
        .await,
        422,
        "server_not_attached_to_network",
    );
    api.act(
        &p("add_target"),
        json!({"type": "server", "server": {"id": id2}}),
    )
    .await;
    api.act(
        &p("add_target"),
        json!({"type": "ip", "ip": {"ip": "203.0.113.9"}}),
    )
    .await;
    let ip_of_s2 = s2["public_net"]["ipv4"]["ip"].as_str().unwrap();
    assert_error(
        &api.post(
            &p("add_target"),
            json!({"type": "ip", "ip": {"ip": ip_of_s2}}),
        )
        .await,
        422,
        "cloud_resource_ip_not_allowed",
    );
    api.act(
        &p("add_target"),
        json!({"type": "label_selector", "label_selector": {"selector": "role=worker"}}),
    )
    .await;

    let l = get_lb(&api, id).await;
    let targets = l["targets"].as_array().unwrap();
    assert_eq!(targets.len(), 4);
    assert_eq!(
        targets[0]["health_status"],
        json!([{"listen_port": 80, "status": "healthy"}])
    );
    assert_eq!(targets[2]["ip"]["ip"], "203.0.113.9");
    assert_eq!(targets[3]["type"], "label_selector");
    let resolved: Vec<i64> = targets[3]["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["server"]["id"].as_i64().unwrap())
        .collect();
    assert_eq!(resolved, vec![id1, id2]);
    let srv = api.get(&format!("/servers/{id1}")).await.body["server"].clone();
    assert_eq!(srv["load_balancers"], json!([id]));

    // Health: off servers are unhealthy; admin overrides win.
    admin.set_server_status(id2, "off").await.unwrap();
    let l = get_lb(&api, id).await;
    assert_eq!(l["targets"][1]["health_status"][0]["status"], "unhealthy");
    admin
        .set_target_health(id, TargetRef::Server(id1), Some(80), "unhealthy")
        .await
        .unwrap();
    admin
        .set_target_health(id, TargetRef::Ip("203.0.113.9".into()), None, "unknown")
        .await
        .unwrap();
    let l = get_lb(&api, id).await;
    assert_eq!(l["targets"][0]["health_status"][0]["status"], "unhealthy");
    assert_eq!(l["targets"][2]["health_status"][0]["status"], "unknown");
    assert_eq!(
        l["targets"][3]["targets"][0]["health_status"][0]["status"],
        "unhealthy"
    );

    // Remove targets.
    api.act(
        &p("remove_target"),
        json!({"type": "ip", "ip": {"ip": "203.0.113.9"}}),
    )
    .await;
    assert_error(
        &api.post(
            &p("remove_target"),
            json!({"type": "ip", "ip": {"ip": "203.0.113.9"}}),
        )
        .await,
        404,
        "not_found",
    );
    api.act(
        &p("remove_target"),
        json!({"type": "label_selector", "label_selector": {"selector": "role=worker"}}),
    )
    .await;
    // Deleting a server removes its target.
    admin.delete_server(id2).await.unwrap();
    let l = get_lb(&api, id).await;
    assert_eq!(l["targets"].as_array().unwrap().len(), 1);
    assert_eq!(l["targets"][0]["server"]["id"], id1);

    // Public interface: only with private targets and a network.
    api.act(&p("disable_public_interface"), json!({})).await;
    assert_eq!(get_lb(&api, id).await["public_net"]["enabled"], false);
    assert_error(
        &api.post(
            &p("add_target"),
            json!({"type": "ip", "ip": {"ip": "203.0.113.10"}}),
        )
        .await,
        422,
        "load_balancer_public_interface_disabled",
    );
    api.act(&p("enable_public_interface"), json!({})).await;
    api.act(&p("detach_from_network"), json!({"network": n}))
        .await;
    assert_eq!(get_lb(&api, id).await["private_net"], json!([]));
    assert_eq!(
        api.get(&format!("/networks/{n}")).await.body["network"]["load_balancers"],
        json!([])
    );
    assert_error(
        &api.post(&p("detach_from_network"), json!({"network": n}))
            .await,
        422,
        "load_balancer_not_attached_to_network",
    );
    assert_error(
        &api.post(&p("disable_public_interface"), json!({})).await,
        422,
        "load_balancer_not_attached_to_network",
    );
}

#[tokio::test]
async fn target_limit() {
    let api = start().await;
    let admin = api.sim.admin();
    for i in 0..26 {
        admin
            .create_server(ServerSeed::new(format!("n{i}")).label("pool", "big"))
            .await
            .unwrap();
    }
    let id = lb(
        &api,
        json!({"name": "lim", "load_balancer_type": "lb11", "location": "fsn1"}),
    )
    .await;
    let r = api
        .post(
            &format!("/load_balancers/{id}/actions/add_target"),
            json!({"type": "label_selector", "label_selector": {"selector": "pool=big"}}),
        )
        .await;
    assert_error(&r, 403, "resource_limit_exceeded");
    let servers = api.get("/servers?per_page=50").await.body["servers"].clone();
    for s in servers.as_array().unwrap().iter().take(25) {
        api.act(
            &format!("/load_balancers/{id}/actions/add_target"),
            json!({"type": "server", "server": {"id": s["id"]}}),
        )
        .await;
    }
    let last = &servers[25]["id"];
    let r = api
        .post(
            &format!("/load_balancers/{id}/actions/add_target"),
            json!({"type": "server", "server": {"id": last}}),
        )
        .await;
    assert_error(&r, 403, "resource_limit_exceeded");
}

#[tokio::test]
async fn other_actions_protection_and_delete() {
    let api = start().await;
    let id = lb(
        &api,
        json!({"name": "o", "load_balancer_type": "lb11", "location": "fsn1"}),
    )
    .await;
    let p = |a: &str| format!("/load_balancers/{id}/actions/{a}");
    api.act(&p("change_algorithm"), json!({"type": "least_connections"}))
        .await;
    assert_eq!(
        get_lb(&api, id).await["algorithm"]["type"],
        "least_connections"
    );
    assert_error(
        &api.post(&p("change_algorithm"), json!({"type": "random"}))
            .await,
        422,
        "invalid_input",
    );
    let ip = get_lb(&api, id).await["public_net"]["ipv4"]["ip"]
        .as_str()
        .unwrap()
        .to_string();
    api.act(
        &p("change_dns_ptr"),
        json!({"ip": ip, "dns_ptr": "lb.example.com"}),
    )
    .await;
    assert_eq!(
        get_lb(&api, id).await["public_net"]["ipv4"]["dns_ptr"],
        "lb.example.com"
    );
    assert_error(
        &api.post(
            &p("change_dns_ptr"),
            json!({"ip": "1.1.1.1", "dns_ptr": "x"}),
        )
        .await,
        422,
        "invalid_input",
    );
    let r = api
        .put(
            &format!("/load_balancers/{id}"),
            json!({"name": "renamed", "labels": {"a": "b"}}),
        )
        .await;
    assert_eq!(r.body["load_balancer"]["name"], "renamed");
    api.act(&p("change_protection"), json!({"delete": true}))
        .await;
    assert_error(
        &api.delete(&format!("/load_balancers/{id}")).await,
        423,
        "protected",
    );
    api.act(&p("change_protection"), json!({"delete": false}))
        .await;
    let r = api.delete(&format!("/load_balancers/{id}")).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["action"]["command"], "delete_load_balancer");
    let a = api
        .wait_action(r.body["action"]["id"].as_i64().unwrap())
        .await;
    assert_eq!(a["status"], "success");
    assert_error(
        &api.get(&format!("/load_balancers/{id}")).await,
        404,
        "not_found",
    );
    assert_error(
        &api.post(&p("change_algorithm"), json!({"type": "round_robin"}))
            .await,
        404,
        "not_found",
    );
}
