//! Hetzner's limits: routes, subnets and servers per network, networks per server and the load
//! balancer types' caps, at their real values and lowered by a seed or the admin API.

use std::time::Duration;

use hcloud_sim::{
    LimitsSeed, LoadBalancerSeed, NetworkSeed, SeedFile, ServerSeed, SimConfig, TargetSeed,
};
use serde_json::json;

use crate::common::{Api, Resp, assert_error, start, start_with};

/// 403 `resource_limit_exceeded` with `message`.
fn assert_limit(r: &Resp, message: &str) {
    assert_error(r, 403, "resource_limit_exceeded");
    assert_eq!(r.body["error"]["message"], message, "{:?}", r.body);
}

fn route(i: usize) -> serde_json::Value {
    json!({"destination": format!("10.{}.{}.0/24", 100 + i / 256, i % 256), "gateway": "10.0.0.2"})
}

#[tokio::test]
async fn the_real_limits_are_in_force_by_default() {
    let api = start().await;
    let limits = api.sim.admin().limits().await.unwrap();
    assert_eq!(limits.servers_per_network, Some(100));
    assert_eq!(limits.routes_per_network, Some(100));
    assert_eq!(limits.subnets_per_network, Some(50));
    assert_eq!(limits.networks_per_server, Some(3));
    let lb11 = limits.load_balancer_types["lb11"];
    assert_eq!(
        (
            lb11.max_targets,
            lb11.max_services,
            lb11.max_assigned_certificates
        ),
        (Some(25), Some(5), Some(10))
    );

    // A network with 100 routes (a seed may fill it up to the limit) takes no 101st.
    let mut seed = NetworkSeed::new("k8s", "10.0.0.0/8").subnet("10.0.0.0/16", "eu-central");
    for i in 0..100 {
        let r = route(i);
        seed = seed.route(
            r["destination"].as_str().unwrap(),
            r["gateway"].as_str().unwrap(),
        );
    }
    let id = api.sim.admin().create_network(seed).await.unwrap();
    let r = api
        .post(&format!("/networks/{id}/actions/add_route"), route(100))
        .await;
    assert_limit(&r, "route limit reached");
    // One more route than the limit in a seed fails the seed, naming the network.
    let mut over = NetworkSeed::new("big", "172.16.0.0/12");
    for i in 0..101 {
        over = over.route(format!("10.{}.{}.0/24", i / 256, i % 256), "172.16.0.2");
    }
    let err = api.sim.admin().create_network(over).await.unwrap_err();
    assert!(err.to_string().contains("route limit reached"), "{err}");
}

#[tokio::test]
async fn routes_beyond_a_lowered_limit_are_refused_until_one_goes() {
    let api = start_with(
        SimConfig::default()
            .action_delay(Duration::from_millis(20))
            .seed(SeedFile {
                limits: Some(LimitsSeed::default().routes_per_network(2)),
                networks: vec![
                    NetworkSeed::new("k8s", "10.0.0.0/8").subnet("10.0.0.0/16", "eu-central"),
                ],
                ..SeedFile::default()
            }),
    )
    .await;
    let id = api.get("/networks?name=k8s").await.body["networks"][0]["id"]
        .as_i64()
        .unwrap();
    let path = format!("/networks/{id}/actions/add_route");
    api.act(&path, route(0)).await;
    api.act(&path, route(1)).await;
    assert_limit(&api.post(&path, route(2)).await, "route limit reached");
    // A route that breaks a rule is refused for that reason first.
    let r = api
        .post(
            &path,
            json!({"destination": "8.8.8.0/24", "gateway": "10.0.0.2"}),
        )
        .await;
    assert_error(&r, 422, "invalid_input");
    let routes = &api.get(&format!("/networks/{id}")).await.body["network"]["routes"];
    assert_eq!(routes.as_array().unwrap().len(), 2, "{routes:?}");

    api.act(&format!("/networks/{id}/actions/delete_route"), route(0))
        .await;
    api.act(&path, route(2)).await;
}

#[tokio::test]
async fn subnets_beyond_the_limit_are_refused() {
    let api = start().await;
    let admin = api.sim.admin();
    let set = admin
        .set_limits(&LimitsSeed::default().subnets_per_network(2))
        .await
        .unwrap();
    assert_eq!(set.subnets_per_network, Some(2));
    assert_eq!(set.routes_per_network, Some(100), "the others stay");
    let id = admin
        .create_network(NetworkSeed::new("k8s", "10.0.0.0/16").subnet("10.0.0.0/24", "eu-central"))
        .await
        .unwrap();
    let path = format!("/networks/{id}/actions/add_subnet");
    api.act(
        &path,
        json!({"type": "cloud", "network_zone": "eu-central"}),
    )
    .await;
    let r = api
        .post(
            &path,
            json!({"type": "cloud", "network_zone": "eu-central"}),
        )
        .await;
    assert_limit(&r, "subnet limit reached");
    // Created with too many at once.
    let r = api
        .post(
            "/networks",
            json!({"name": "wide", "ip_range": "10.1.0.0/16", "subnets": [
                {"type": "cloud", "ip_range": "10.1.0.0/24", "network_zone": "eu-central"},
                {"type": "cloud", "ip_range": "10.1.1.0/24", "network_zone": "eu-central"},
                {"type": "cloud", "ip_range": "10.1.2.0/24", "network_zone": "eu-central"}]}),
        )
        .await;
    assert_limit(&r, "subnet limit reached");
    assert!(api.get("/networks?name=wide").await.body["networks"][0].is_null());
}

#[tokio::test]
async fn a_full_network_takes_no_more_servers_counting_attachments_under_way() {
    let api = start().await;
    let admin = api.sim.admin();
    admin
        .set_limits(&LimitsSeed::default().servers_per_network(2))
        .await
        .unwrap();
    let net = admin
        .create_network(NetworkSeed::new("k8s", "10.0.0.0/16").subnet("10.0.0.0/24", "eu-central"))
        .await
        .unwrap();
    admin
        .create_server(ServerSeed::new("in-1").network(net))
        .await
        .unwrap();
    let second = admin.create_server(ServerSeed::new("out-2")).await.unwrap();
    let third = admin.create_server(ServerSeed::new("out-3")).await.unwrap();
    // The second attachment is under way (its action runs): it counts.
    admin
        .set_action_delay(Duration::from_millis(500))
        .await
        .unwrap();
    let r = api
        .post(
            &format!("/servers/{}/actions/attach_to_network", second["id"]),
            json!({"network": net}),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let r = api
        .post(
            &format!("/servers/{}/actions/attach_to_network", third["id"]),
            json!({"network": net}),
        )
        .await;
    assert_limit(&r, "server limit of network reached");
    // Neither a new server nor a seeded one gets in.
    let r = api
        .post(
            "/servers",
            json!({"name": "new-4", "server_type": "cx23", "image": "ubuntu-24.04",
                   "location": "fsn1", "networks": [net]}),
        )
        .await;
    assert_limit(&r, "server limit of network reached");
    let err = admin
        .create_server(ServerSeed::new("seeded-5").network(net))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("server limit of network reached"),
        "{err}"
    );
    let state = admin.state().await.unwrap();
    let names: Vec<&str> = state["servers"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert_eq!(names, ["in-1", "out-2", "out-3"]);
}

#[tokio::test]
async fn a_server_joins_no_more_networks_than_its_limit() {
    let api = start().await;
    let admin = api.sim.admin();
    admin
        .set_limits(&LimitsSeed::default().networks_per_server(1))
        .await
        .unwrap();
    let a = admin
        .create_network(NetworkSeed::new("a", "10.0.0.0/16").subnet("10.0.0.0/24", "eu-central"))
        .await
        .unwrap();
    let b = admin
        .create_network(NetworkSeed::new("b", "10.1.0.0/16").subnet("10.1.0.0/24", "eu-central"))
        .await
        .unwrap();
    let server = admin
        .create_server(ServerSeed::new("s").network(a))
        .await
        .unwrap();
    let r = api
        .post(
            &format!("/servers/{}/actions/attach_to_network", server["id"]),
            json!({"network": b}),
        )
        .await;
    assert_limit(&r, "network limit of server reached");
    let err = admin
        .create_server(ServerSeed::new("t").network(a).network(b))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("network limit of server reached"),
        "{err}"
    );
}

async fn lb_with_targets(api: &Api, targets: &[&str]) -> i64 {
    let mut seed = LoadBalancerSeed::new("web");
    for name in targets {
        seed = seed.target(TargetSeed::Server {
            server: (*name).into(),
            use_private_ip: false,
        });
    }
    api.sim.admin().create_load_balancer(seed).await.unwrap()["id"]
        .as_i64()
        .unwrap()
}

#[tokio::test]
async fn lowered_load_balancer_caps_show_in_the_type_and_hold_until_a_larger_type() {
    let api = start().await;
    let admin = api.sim.admin();
    let set = admin
        .set_limits(
            &LimitsSeed::default()
                .max_targets("lb11", 2)
                .max_services("lb11", 1),
        )
        .await
        .unwrap();
    assert_eq!(set.load_balancer_types["lb11"].max_targets, Some(2));
    assert_eq!(set.load_balancer_types["lb21"].max_targets, Some(75));
    let types = api.get("/load_balancer_types?name=lb11").await.body;
    assert_eq!(types["load_balancer_types"][0]["max_targets"], 2);
    assert_eq!(types["load_balancer_types"][0]["max_services"], 1);

    let mut ids = Vec::new();
    for i in 1..=3 {
        let s = admin
            .create_server(ServerSeed::new(format!("w-{i}")))
            .await
            .unwrap();
        ids.push(s["id"].as_i64().unwrap());
    }
    let lb = lb_with_targets(&api, &["w-1", "w-2"]).await;
    let add = format!("/load_balancers/{lb}/actions/add_target");
    let target = json!({"type": "server", "server": {"id": ids[2]}});
    let r = api.post(&add, target.clone()).await;
    assert_error(&r, 403, "resource_limit_exceeded");
    let r = api
        .post(
            &format!("/load_balancers/{lb}/actions/add_service"),
            json!({"protocol": "tcp", "listen_port": 81, "destination_port": 30081}),
        )
        .await;
    assert_eq!(r.status, 201, "the first service fits: {:?}", r.body);
    api.wait_action(r.body["action"]["id"].as_i64().unwrap())
        .await;
    let r = api
        .post(
            &format!("/load_balancers/{lb}/actions/add_service"),
            json!({"protocol": "tcp", "listen_port": 82, "destination_port": 30082}),
        )
        .await;
    assert_error(&r, 403, "resource_limit_exceeded");

    // A seeded load balancer over the cap fails the seed.
    let mut too_many = LoadBalancerSeed::new("too-many");
    for name in ["w-1", "w-2", "w-3"] {
        too_many = too_many.target(TargetSeed::Server {
            server: name.into(),
            use_private_ip: false,
        });
    }
    let err = admin.create_load_balancer(too_many).await.unwrap_err();
    assert!(err.to_string().contains("resource_limit_exceeded"), "{err}");

    api.act(
        &format!("/load_balancers/{lb}/actions/change_type"),
        json!({"load_balancer_type": "lb21"}),
    )
    .await;
    api.act(&add, target).await;
}

#[tokio::test]
async fn limits_of_an_unknown_type_are_refused_naming_it() {
    let api = start().await;
    let err = api
        .sim
        .admin()
        .set_limits(
            &LimitsSeed::default()
                .routes_per_network(1)
                .max_targets("lb99", 1),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("lb99"), "{err}");
    // Nothing changed.
    let limits = api.sim.admin().limits().await.unwrap();
    assert_eq!(limits.routes_per_network, Some(100));
    // A field the simulator does not know is an error too, not silently ignored.
    let r = api
        .http
        .put(api.sim.admin_url() + "/limits")
        .json(&json!({"routes_per_net": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 422);
}
