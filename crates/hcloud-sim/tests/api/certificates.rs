use hcloud_sim::Fault;
use serde_json::{Value, json};

use crate::common::{assert_error, start};

const PEM: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
const KEY: &str = "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n";

#[tokio::test]
async fn uploaded_certificates() {
    let api = start().await;
    let r = api
        .post(
            "/certificates",
            json!({"name": "up", "certificate": PEM, "private_key": KEY, "labels": {"k": "v"}}),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    assert_eq!(r.body["action"], Value::Null);
    let c = &r.body["certificate"];
    assert_eq!(c["type"], "uploaded");
    assert_eq!(c["status"], Value::Null);
    assert!(c["fingerprint"].is_string());
    let id = c["id"].as_i64().unwrap();
    assert_error(
        &api.post(
            "/certificates",
            json!({"name": "up", "certificate": PEM, "private_key": KEY}),
        )
        .await,
        409,
        "uniqueness_error",
    );
    assert_error(
        &api.post(
            "/certificates",
            json!({"name": "bad", "certificate": "nope", "private_key": KEY}),
        )
        .await,
        422,
        "invalid_input",
    );
    // Used by an https service.
    let r = api
        .post(
            "/load_balancers",
            json!({"name": "lb", "load_balancer_type": "lb11", "location": "fsn1",
                   "services": [{"protocol": "https", "listen_port": 443, "http": {"certificates": [id]}}]}),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let lb_id = r.body["load_balancer"]["id"].as_i64().unwrap();
    assert_eq!(
        r.body["load_balancer"]["services"][0]["destination_port"],
        80
    );
    let c = api.get(&format!("/certificates/{id}")).await.body["certificate"].clone();
    assert_eq!(
        c["used_by"],
        json!([{"id": lb_id, "type": "load_balancer"}])
    );
    assert_eq!(
        api.get("/certificates?type=uploaded&label_selector=k%3Dv")
            .await
            .body["certificates"][0]["id"],
        id
    );
    assert_eq!(
        api.get("/certificates?type=managed").await.body["certificates"],
        json!([])
    );
    let r = api
        .put(&format!("/certificates/{id}"), json!({"name": "up2"}))
        .await;
    assert_eq!(r.body["certificate"]["name"], "up2");
    assert_eq!(api.delete(&format!("/certificates/{id}")).await.status, 204);
    assert_error(
        &api.get(&format!("/certificates/{id}")).await,
        404,
        "not_found",
    );
}

#[tokio::test]
async fn managed_certificates_issue_through_an_action() {
    let api = start().await;
    let r = api
        .post("/certificates", json!({"name": "m", "type": "managed", "domain_names": ["example.com", "*.example.com"]}))
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let c = &r.body["certificate"];
    assert_eq!(c["status"]["issuance"], "pending");
    assert_eq!(c["certificate"], Value::Null);
    assert_eq!(r.body["action"]["command"], "create_certificate");
    let id = c["id"].as_i64().unwrap();
    api.wait_action(r.body["action"]["id"].as_i64().unwrap())
        .await;
    let c = api.get(&format!("/certificates/{id}")).await.body["certificate"].clone();
    assert_eq!(c["status"]["issuance"], "completed");
    assert!(
        c["certificate"]
            .as_str()
            .unwrap()
            .contains("BEGIN CERTIFICATE")
    );
    assert!(c["not_valid_after"].is_string());
    assert_error(
        &api.post(&format!("/certificates/{id}/actions/retry"), json!({}))
            .await,
        422,
        "unsupported_error",
    );
    assert_error(
        &api.post(
            "/certificates",
            json!({"name": "m2", "type": "managed", "domain_names": []}),
        )
        .await,
        422,
        "invalid_input",
    );

    // Failed issuance, then retry.
    api.sim
        .admin()
        .inject_fault(Fault::new("/certificates").method("POST").fail_action())
        .await
        .unwrap();
    let r = api
        .post(
            "/certificates",
            json!({"name": "f", "type": "managed", "domain_names": ["f.example.com"]}),
        )
        .await;
    let fid = r.body["certificate"]["id"].as_i64().unwrap();
    let a = api
        .wait_action(r.body["action"]["id"].as_i64().unwrap())
        .await;
    assert_eq!(a["status"], "error");
    let c = api.get(&format!("/certificates/{fid}")).await.body["certificate"].clone();
    assert_eq!(c["status"]["issuance"], "failed");
    assert!(c["status"]["error"]["code"].is_string());
    api.act(&format!("/certificates/{fid}/actions/retry"), json!({}))
        .await;
    let c = api.get(&format!("/certificates/{fid}")).await.body["certificate"].clone();
    assert_eq!(c["status"]["issuance"], "completed");
}

#[tokio::test]
async fn issuance_takes_the_configured_delay_and_fails_when_told() {
    let api = start().await;
    let admin = api.sim.admin();
    assert_eq!(
        admin.certificate_issuance().await.unwrap(),
        hcloud_sim::CertificateIssuance::default()
    );
    let issuance = hcloud_sim::CertificateIssuance::default()
        .delay(std::time::Duration::from_millis(600))
        .fail_domain("broken.example.com");
    admin.set_certificate_issuance(&issuance).await.unwrap();
    assert_eq!(admin.certificate_issuance().await.unwrap(), issuance);

    let create = |name: &str, domain: &str| json!({"name": name, "type": "managed", "domain_names": [domain]});
    let started = std::time::Instant::now();
    let ok = api
        .post("/certificates", create("ok", "ok.example.com"))
        .await;
    let bad = api
        .post("/certificates", create("bad", "broken.example.com"))
        .await;
    // Other actions keep the (short) action delay.
    let lb = api
        .post(
            "/load_balancers",
            json!({"name": "lb", "load_balancer_type": "lb11", "location": "fsn1"}),
        )
        .await;
    let lb_action = api
        .wait_action(lb.body["action"]["id"].as_i64().unwrap())
        .await;
    assert_eq!(lb_action["status"], "success");
    let ok_id = ok.body["certificate"]["id"].as_i64().unwrap();
    let c = api.get(&format!("/certificates/{ok_id}")).await.body["certificate"].clone();
    assert_eq!(c["status"]["issuance"], "pending", "still within the delay");

    let a = api
        .wait_action(ok.body["action"]["id"].as_i64().unwrap())
        .await;
    assert_eq!(a["status"], "success");
    assert!(started.elapsed() >= std::time::Duration::from_millis(550));
    let a = api
        .wait_action(bad.body["action"]["id"].as_i64().unwrap())
        .await;
    assert_eq!(a["status"], "error");
    assert_eq!(a["error"]["code"], "ca_dns_validation_failed");
    let bad_id = bad.body["certificate"]["id"].as_i64().unwrap();
    let c = api.get(&format!("/certificates/{bad_id}")).await.body["certificate"].clone();
    assert_eq!(c["status"]["issuance"], "failed");
    assert_eq!(c["certificate"], Value::Null);

    // Retrying while the domain still fails fails again; once fixed it succeeds.
    let a = api
        .post(&format!("/certificates/{bad_id}/actions/retry"), json!({}))
        .await;
    let a = api
        .wait_action(a.body["action"]["id"].as_i64().unwrap())
        .await;
    assert_eq!(a["status"], "error");
    admin
        .set_certificate_issuance(&hcloud_sim::CertificateIssuance::default())
        .await
        .unwrap();
    api.act(&format!("/certificates/{bad_id}/actions/retry"), json!({}))
        .await;
    let c = api.get(&format!("/certificates/{bad_id}")).await.body["certificate"].clone();
    assert_eq!(c["status"]["issuance"], "completed");

    // The global switch fails every issuance.
    admin
        .set_certificate_issuance(&hcloud_sim::CertificateIssuance::default().fail_all(true))
        .await
        .unwrap();
    let r = api
        .post("/certificates", create("all", "any.example.org"))
        .await;
    let a = api
        .wait_action(r.body["action"]["id"].as_i64().unwrap())
        .await;
    assert_eq!(a["status"], "error");
}
