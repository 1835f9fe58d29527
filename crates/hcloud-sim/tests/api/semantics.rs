use hcloud_sim::{RateLimitConfig, ServerSeed, SimConfig};
use reqwest::Method;
use serde_json::json;

use crate::common::{assert_error, field_names, start, start_with};

#[tokio::test]
async fn bad_token_gets_401_envelope() {
    let api = start().await;
    let r = api
        .http
        .get(format!("{}/servers", api.sim.base_url()))
        .bearer_auth("wrong")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(
        body,
        json!({"error": {"code": "unauthorized", "message": "unable to authenticate", "details": null}})
    );
    let r = api
        .http
        .get(format!("{}/servers", api.sim.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
}

#[tokio::test]
async fn unknown_paths_and_methods_use_the_envelope() {
    let api = start().await;
    assert_error(&api.get("/nope").await, 404, "not_found");
    assert_error(&api.get("/servers/999999").await, 404, "not_found");
    assert_error(
        &api.call(Method::PATCH, "/servers", None).await,
        405,
        "method_not_allowed",
    );
    let r = api.get("/servers/abc").await;
    assert_error(&r, 422, "invalid_input");
}

#[tokio::test]
async fn bad_bodies_get_json_error_or_invalid_input() {
    let api = start().await;
    let r = api
        .http
        .post(format!("{}/servers", api.sim.base_url()))
        .bearer_auth(api.sim.token())
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "json_error");

    let r = api
        .post("/servers", json!({"name": 7, "server_type": true}))
        .await;
    assert_error(&r, 422, "invalid_input");
    let names = field_names(&r);
    assert!(names.contains(&"name".to_string()), "{names:?}");
    assert!(names.contains(&"server_type".to_string()), "{names:?}");
    assert!(names.contains(&"image".to_string()), "{names:?}");

    let r = api.post("/networks", json!([1, 2])).await;
    assert_error(&r, 400, "json_error");
    let r = api
        .post(
            "/networks",
            json!({"name": "n", "ip_range": "10.0.0.0/16", "subnets": [{"type": "cloud"}]}),
        )
        .await;
    assert_error(&r, 422, "invalid_input");
    assert_eq!(field_names(&r), vec!["subnets[0].network_zone"]);
    let r = api.post("/servers", json!({"name": "x", "server_type": "cx23", "image": "ubuntu-24.04", "labels": {"bad key": "v"}})).await;
    assert_error(&r, 422, "invalid_input");
    assert_eq!(field_names(&r), vec!["labels"]);
}

#[tokio::test]
async fn rate_limit_headers_and_429() {
    let api = start().await;
    let r = api.get("/locations").await;
    assert_eq!(r.headers["ratelimit-limit"], "3600");
    assert_eq!(r.headers["ratelimit-remaining"], "3599");
    let reset: i64 = r.headers["ratelimit-reset"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let now = chrono_now();
    assert!(reset >= now && reset <= now + 3, "reset {reset} now {now}");
    // Errors carry the headers too.
    assert!(
        api.get("/nope")
            .await
            .headers
            .contains_key("ratelimit-remaining")
    );

    let api = start_with(SimConfig::default().rate_limit_bucket(3, 0.0)).await;
    for expected in ["2", "1", "0"] {
        let r = api.get("/servers").await;
        assert_eq!(r.status, 200);
        assert_eq!(r.headers["ratelimit-remaining"], expected);
    }
    let r = api.get("/servers").await;
    assert_error(&r, 429, "rate_limit_exceeded");
    assert_eq!(r.headers["ratelimit-limit"], "3");
    assert_eq!(r.headers["ratelimit-remaining"], "0");

    // Reconfigure at runtime: off.
    api.sim
        .admin()
        .set_rate_limit(RateLimitConfig::Off)
        .await
        .unwrap();
    assert_eq!(api.get("/servers").await.status, 200);
}

#[tokio::test]
async fn rate_limit_refills() {
    let api = start_with(SimConfig::default().rate_limit_bucket(1, 20.0)).await;
    assert_eq!(api.get("/servers").await.status, 200);
    assert_error(&api.get("/servers").await, 429, "rate_limit_exceeded");
    tokio::time::sleep(std::time::Duration::from_millis(120)).await;
    assert_eq!(api.get("/servers").await.status, 200);
}

fn chrono_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

#[tokio::test]
async fn pagination_meta_and_link_header() {
    let api = start().await;
    let admin = api.sim.admin();
    for i in 0..60 {
        admin
            .create_server(ServerSeed::new(format!("node-{i:02}")).label("pool", "a"))
            .await
            .unwrap();
    }
    let r = api
        .get("/servers?per_page=25&label_selector=pool%3Da")
        .await;
    assert_eq!(r.body["servers"].as_array().unwrap().len(), 25);
    let p = &r.body["meta"]["pagination"];
    assert_eq!(p["page"], 1);
    assert_eq!(p["per_page"], 25);
    assert_eq!(p["previous_page"], json!(null));
    assert_eq!(p["next_page"], 2);
    assert_eq!(p["last_page"], 3);
    assert_eq!(p["total_entries"], 60);
    let link = r.headers["link"].to_str().unwrap();
    assert!(link.contains("rel=\"next\""), "{link}");
    assert!(link.contains("page=2"), "{link}");
    assert!(link.contains("label_selector=pool%3Da"), "{link}");
    assert!(link.contains("rel=\"last\""), "{link}");

    let r = api.get("/servers?page=3&per_page=25").await;
    assert_eq!(r.body["servers"].as_array().unwrap().len(), 10);
    assert_eq!(r.body["meta"]["pagination"]["next_page"], json!(null));
    assert_eq!(r.body["meta"]["pagination"]["previous_page"], 2);

    // per_page is capped at 50.
    let r = api.get("/servers?per_page=100").await;
    assert_eq!(r.body["servers"].as_array().unwrap().len(), 50);
    assert_eq!(r.body["meta"]["pagination"]["per_page"], 50);
    assert_error(&api.get("/servers?page=0").await, 422, "invalid_input");
    // Default page size.
    let r = api.get("/servers").await;
    assert_eq!(r.body["servers"].as_array().unwrap().len(), 25);
}

#[tokio::test]
async fn catalog_endpoints() {
    let api = start().await;
    let r = api.get("/locations").await;
    let names: Vec<&str> = r.body["locations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["fsn1", "nbg1", "hel1", "ash", "hil", "sin"]);
    let zones: Vec<&str> = r.body["locations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["network_zone"].as_str().unwrap())
        .collect();
    assert_eq!(
        zones,
        vec![
            "eu-central",
            "eu-central",
            "eu-central",
            "us-east",
            "us-west",
            "ap-southeast"
        ]
    );
    let r = api.get("/server_types?name=cx23").await;
    assert_eq!(r.body["server_types"][0]["cores"], 2);
    assert_eq!(r.body["server_types"][0]["architecture"], "x86");
    let r = api.get("/load_balancer_types").await;
    let lb21 = r.body["load_balancer_types"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "lb21")
        .unwrap()
        .clone();
    assert_eq!(lb21["max_connections"], 20000);
    assert_eq!(lb21["max_services"], 15);
    assert_eq!(lb21["max_targets"], 75);
    assert_eq!(lb21["max_assigned_certificates"], 25);
    assert!(lb21.as_object().unwrap().contains_key("deprecation"));
    assert_error(
        &api.get("/datacenters").await,
        410,
        "deprecated_api_endpoint",
    );
    let r = api.get("/images?type=system&name=debian-12").await;
    let imgs = r.body["images"].as_array().unwrap();
    assert_eq!(imgs.len(), 2);
    assert!(
        imgs.iter()
            .all(|i| i["name"] == "debian-12" && i["type"] == "system")
    );
    let r = api.get("/images?type=snapshot").await;
    assert_eq!(r.body["images"].as_array().unwrap().len(), 0);
    assert_error(&api.get("/images?type=bogus").await, 422, "invalid_input");
}

#[tokio::test]
async fn tokens_are_added_revoked_and_belong_to_a_project() {
    let api = start().await;
    let admin = api.sim.admin();
    admin
        .create_server(ServerSeed::new("node-1"))
        .await
        .unwrap();
    let servers_with = |token: &'static str| {
        let request = api
            .http
            .get(format!("{}/servers", api.sim.base_url()))
            .bearer_auth(token);
        async move {
            let r = request.send().await.unwrap();
            let status = r.status().as_u16();
            let body: serde_json::Value = r.json().await.unwrap();
            (status, body["servers"].as_array().map(Vec::len))
        }
    };
    assert_eq!(servers_with("second").await.0, 401);
    admin.add_token("second", false).await.unwrap();
    admin.add_token("foreign", true).await.unwrap();
    assert_eq!(servers_with("second").await, (200, Some(1)));
    assert_eq!(servers_with("test-token").await, (200, Some(1)));
    // Another project's token is valid but sees none of this project's servers.
    assert_eq!(servers_with("foreign").await, (200, Some(0)));
    admin.revoke_token("test-token").await.unwrap();
    assert_eq!(servers_with("test-token").await.0, 401);
    assert_eq!(servers_with("second").await, (200, Some(1)));
    let counts = admin.token_request_counts().await.unwrap();
    assert_eq!(counts.get("second"), Some(&2));
    assert_eq!(
        counts.get("test-token"),
        Some(&1),
        "refused requests are not counted"
    );
    assert_eq!(counts.get("foreign"), Some(&1));
    let empty = admin.add_token(" ", false).await.unwrap_err();
    assert!(
        matches!(empty, hcloud_sim::Error::Api { status: 422, .. }),
        "{empty}"
    );
}
