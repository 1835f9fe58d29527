//! API changes of 2026: load balancer deletion as an action, Primary IPs and load balancers
//! created with them, server type availability per location.

use std::time::Duration;

use hcloud_sim::{PrimaryIpSeed, ServerSeed};
use serde_json::{Value, json};

use crate::common::{Api, assert_error, start};

async fn create_lb(api: &Api, body: Value) -> Value {
    let r = api.post("/load_balancers", body).await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let a = api
        .wait_action(r.body["action"]["id"].as_i64().unwrap())
        .await;
    assert_eq!(a["status"], "success", "{a:?}");
    let id = r.body["load_balancer"]["id"].as_i64().unwrap();
    api.get(&format!("/load_balancers/{id}")).await.body["load_balancer"].clone()
}

async fn primary_ip(api: &Api, id: i64) -> Value {
    let r = api.get(&format!("/primary_ips/{id}")).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    r.body["primary_ip"].clone()
}

#[tokio::test]
async fn deleting_a_load_balancer_is_an_action_and_locks_it_until_done() {
    let api = start().await;
    let lb = create_lb(
        &api,
        json!({"name": "del", "load_balancer_type": "lb11", "location": "fsn1"}),
    )
    .await;
    let id = lb["id"].as_i64().unwrap();
    let v4 = lb["public_net"]["ipv4"]["id"].as_i64().expect("ipv4 id");
    api.sim
        .admin()
        .set_action_delay(Duration::from_millis(400))
        .await
        .unwrap();

    let r = api.delete(&format!("/load_balancers/{id}")).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let action = &r.body["action"];
    assert_eq!(action["command"], "delete_load_balancer");
    assert_eq!(action["status"], "running");
    assert_eq!(
        action["resources"],
        json!([{"id": id, "type": "load_balancer"}])
    );

    // While the action runs, the load balancer is still there, and locked.
    assert_eq!(api.get(&format!("/load_balancers/{id}")).await.status, 200);
    let listed = api.get("/load_balancers").await.body["load_balancers"].clone();
    assert_eq!(listed.as_array().unwrap().len(), 1);
    assert_error(
        &api.post(
            &format!("/load_balancers/{id}/actions/change_algorithm"),
            json!({"type": "least_connections"}),
        )
        .await,
        423,
        "locked",
    );
    assert_error(
        &api.delete(&format!("/load_balancers/{id}")).await,
        423,
        "locked",
    );

    let a = api.wait_action(action["id"].as_i64().unwrap()).await;
    assert_eq!(a["status"], "success");
    assert_error(
        &api.get(&format!("/load_balancers/{id}")).await,
        404,
        "not_found",
    );
    // The Primary IPs allocated for it went with it.
    assert_error(
        &api.get(&format!("/primary_ips/{v4}")).await,
        404,
        "not_found",
    );
}

#[tokio::test]
async fn a_failed_delete_action_keeps_the_load_balancer() {
    let api = start().await;
    let lb = create_lb(
        &api,
        json!({"name": "keep", "load_balancer_type": "lb11", "location": "fsn1"}),
    )
    .await;
    let id = lb["id"].as_i64().unwrap();
    api.sim
        .admin()
        .inject_fault(
            hcloud_sim::Fault::new("/load_balancers/{id}")
                .method("DELETE")
                .code("server_error")
                .fail_action(),
        )
        .await
        .unwrap();
    let r = api.delete(&format!("/load_balancers/{id}")).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let a = api
        .wait_action(r.body["action"]["id"].as_i64().unwrap())
        .await;
    assert_eq!(a["status"], "error");
    assert_eq!(api.get(&format!("/load_balancers/{id}")).await.status, 200);
}

#[tokio::test]
async fn load_balancer_ips_carry_their_primary_ip() {
    let api = start().await;
    let lb = create_lb(
        &api,
        json!({"name": "ids", "load_balancer_type": "lb11", "location": "nbg1"}),
    )
    .await;
    let id = lb["id"].as_i64().unwrap();
    for (key, kind) in [("ipv4", "ipv4"), ("ipv6", "ipv6")] {
        let pid = lb["public_net"][key]["id"].as_i64().expect("id");
        let p = primary_ip(&api, pid).await;
        assert_eq!(p["type"], kind);
        assert_eq!(p["assignee_type"], "load_balancer");
        assert_eq!(p["assignee_id"], id);
        assert_eq!(p["auto_delete"], true);
        assert_eq!(p["location"]["name"], "nbg1");
    }
    let p4 = primary_ip(&api, lb["public_net"]["ipv4"]["id"].as_i64().unwrap()).await;
    assert_eq!(p4["ip"], lb["public_net"]["ipv4"]["ip"]);
    assert_eq!(p4["dns_ptr"][0]["ip"], lb["public_net"]["ipv4"]["ip"]);
    let p6 = primary_ip(&api, lb["public_net"]["ipv6"]["id"].as_i64().unwrap()).await;
    let net: ipnet::Ipv6Net = p6["ip"].as_str().unwrap().parse().unwrap();
    let addr: std::net::Ipv6Addr = lb["public_net"]["ipv6"]["ip"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(net.contains(&addr), "{net} {addr}");
}

#[tokio::test]
async fn primary_ips_are_created_unassigned_listed_and_deleted() {
    let api = start().await;
    let r = api
        .post(
            "/primary_ips",
            json!({"name": "spare", "type": "ipv4", "location": "fsn1", "labels": {"a": "b"}}),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    assert_eq!(r.body["action"], Value::Null);
    let p = &r.body["primary_ip"];
    assert_eq!(p["assignee_type"], "unassigned");
    assert_eq!(p["assignee_id"], Value::Null);
    assert_eq!(p["auto_delete"], false);
    assert_eq!(p["labels"]["a"], "b");
    assert!(p.get("datacenter").is_none());
    let id = p["id"].as_i64().unwrap();

    let seeded = api
        .sim
        .admin()
        .create_primary_ip(PrimaryIpSeed::ipv6("spare6").location("hel1"))
        .await
        .unwrap();
    assert_eq!(seeded["type"], "ipv6");
    assert_eq!(seeded["assignee_type"], "unassigned");
    assert!(seeded["ip"].as_str().unwrap().ends_with("/64"));

    // A server's addresses are Primary IPs too.
    let server = api
        .sim
        .admin()
        .create_server(ServerSeed::new("node-1"))
        .await
        .unwrap();
    let sp = primary_ip(&api, server["public_net"]["ipv4"]["id"].as_i64().unwrap()).await;
    assert_eq!(sp["assignee_type"], "server");
    assert_eq!(sp["assignee_id"], server["id"]);
    assert_eq!(sp["ip"], server["public_net"]["ipv4"]["ip"]);

    let all = api.get("/primary_ips").await.body["primary_ips"].clone();
    assert_eq!(all.as_array().unwrap().len(), 4);
    let by_name = api.get("/primary_ips?name=spare").await.body["primary_ips"].clone();
    assert_eq!(by_name.as_array().unwrap().len(), 1);
    assert_eq!(by_name[0]["id"], id);
    let by_label = api.get("/primary_ips?label_selector=a%3Db").await.body["primary_ips"].clone();
    assert_eq!(by_label.as_array().unwrap().len(), 1);

    assert_error(
        &api.post(
            "/primary_ips",
            json!({"name": "spare", "type": "ipv4", "location": "fsn1"}),
        )
        .await,
        409,
        "uniqueness_error",
    );
    assert_error(
        &api.post(
            "/primary_ips",
            json!({"name": "x", "type": "ipv5", "location": "fsn1"}),
        )
        .await,
        422,
        "invalid_input",
    );
    assert_error(
        &api.delete(&format!(
            "/primary_ips/{}",
            server["public_net"]["ipv4"]["id"]
        ))
        .await,
        422,
        "primary_ip_assigned",
    );
    assert_eq!(api.delete(&format!("/primary_ips/{id}")).await.status, 204);
    assert_error(
        &api.get(&format!("/primary_ips/{id}")).await,
        404,
        "not_found",
    );
}

#[tokio::test]
async fn a_load_balancer_created_with_existing_primary_ips_uses_them() {
    let api = start().await;
    let admin = api.sim.admin();
    let v4 = admin
        .create_primary_ip(PrimaryIpSeed::ipv4("lb-v4"))
        .await
        .unwrap();
    let v6 = admin
        .create_primary_ip(PrimaryIpSeed::ipv6("lb-v6"))
        .await
        .unwrap();
    let (v4_id, v6_id) = (v4["id"].as_i64().unwrap(), v6["id"].as_i64().unwrap());
    admin
        .set_action_delay(Duration::from_millis(300))
        .await
        .unwrap();
    let r = api
        .post(
            "/load_balancers",
            json!({"name": "mine", "load_balancer_type": "lb11", "location": "fsn1",
                   "public_net": {"ipv4": v4_id, "ipv6": v6_id}}),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let id = r.body["load_balancer"]["id"].as_i64().unwrap();
    // Taken at once: nobody else gets them while the create action runs.
    assert_eq!(primary_ip(&api, v4_id).await["assignee_id"], id);
    assert_error(
        &api.post(
            "/load_balancers",
            json!({"name": "thief", "load_balancer_type": "lb11", "location": "fsn1",
                   "public_net": {"ipv4": v4_id}}),
        )
        .await,
        422,
        "primary_ip_already_assigned",
    );
    let a = api
        .wait_action(r.body["action"]["id"].as_i64().unwrap())
        .await;
    assert_eq!(a["status"], "success");
    let lb = api.get(&format!("/load_balancers/{id}")).await.body["load_balancer"].clone();
    assert_eq!(lb["public_net"]["ipv4"]["id"], v4_id);
    assert_eq!(lb["public_net"]["ipv4"]["ip"], v4["ip"]);
    assert_eq!(lb["public_net"]["ipv6"]["id"], v6_id);
    let net: ipnet::Ipv6Net = v6["ip"].as_str().unwrap().parse().unwrap();
    let addr: std::net::Ipv6Addr = lb["public_net"]["ipv6"]["ip"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(net.contains(&addr));
    assert_eq!(
        primary_ip(&api, v6_id).await["assignee_type"],
        "load_balancer"
    );

    // Deleting the load balancer hands the given IPs back, unassigned.
    admin
        .set_action_delay(Duration::from_millis(20))
        .await
        .unwrap();
    let r = api.delete(&format!("/load_balancers/{id}")).await;
    api.wait_action(r.body["action"]["id"].as_i64().unwrap())
        .await;
    for pid in [v4_id, v6_id] {
        let p = primary_ip(&api, pid).await;
        assert_eq!(p["assignee_type"], "unassigned");
        assert_eq!(p["assignee_id"], Value::Null);
    }
}

#[tokio::test]
async fn given_primary_ips_are_checked() {
    let api = start().await;
    let admin = api.sim.admin();
    let v4 = admin
        .create_primary_ip(PrimaryIpSeed::ipv4("v4"))
        .await
        .unwrap()["id"]
        .as_i64()
        .unwrap();
    let far = admin
        .create_primary_ip(PrimaryIpSeed::ipv4("far").location("ash"))
        .await
        .unwrap()["id"]
        .as_i64()
        .unwrap();
    let create = |public_net: Value| {
        json!({"name": "x", "load_balancer_type": "lb11", "location": "fsn1",
               "public_net": public_net})
    };
    assert_error(
        &api.post("/load_balancers", create(json!({"ipv6": v4})))
            .await,
        422,
        "primary_ip_version_mismatch",
    );
    let r = api
        .post("/load_balancers", create(json!({"ipv4": 999_999})))
        .await;
    assert_error(&r, 422, "invalid_input");
    assert_eq!(crate::common::field_names(&r), vec!["public_net.ipv4"]);
    assert_error(
        &api.post("/load_balancers", create(json!({"ipv4": far})))
            .await,
        422,
        "invalid_input",
    );
    assert_error(
        &api.post("/load_balancers", create(json!({"ipv4": "one"})))
            .await,
        422,
        "invalid_input",
    );
    // Nothing was created or taken by the refused requests.
    assert_eq!(primary_ip(&api, v4).await["assignee_type"], "unassigned");
    let lbs = api.get("/load_balancers").await.body["load_balancers"].clone();
    assert_eq!(lbs, json!([]));
}

#[tokio::test]
async fn server_types_say_where_they_can_be_ordered() {
    let api = start().await;
    let types = api.get("/server_types?per_page=50").await.body["server_types"].clone();
    let find = |name: &str| {
        types
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .cloned()
            .unwrap()
    };
    let entry = |t: &Value, location: &str| {
        t["locations"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["name"] == location)
            .cloned()
            .unwrap()
    };
    let cax = find("cax11");
    for l in cax["locations"].as_array().unwrap() {
        for key in ["id", "name", "deprecation", "available", "recommended"] {
            assert!(l.get(key).is_some(), "{key} missing in {l}");
        }
    }
    assert_eq!(entry(&cax, "fsn1")["available"], true);
    assert_eq!(entry(&cax, "fsn1")["recommended"], true);
    assert_eq!(entry(&cax, "ash")["available"], false);
    assert_eq!(entry(&cax, "ash")["recommended"], false);
    assert_eq!(entry(&find("cpx22"), "sin")["available"], true);
    let cx22 = find("cx22");
    assert_eq!(entry(&cx22, "fsn1")["available"], true);
    assert_eq!(entry(&cx22, "fsn1")["recommended"], false, "deprecated");
    assert!(entry(&cx22, "fsn1")["deprecation"].is_object());

    // Ordering where a type is not available is refused.
    let r = api
        .post(
            "/servers",
            json!({"name": "arm-us", "server_type": "cax11", "image": "ubuntu-24.04",
                   "location": "ash"}),
        )
        .await;
    assert_error(&r, 422, "invalid_input");
}
