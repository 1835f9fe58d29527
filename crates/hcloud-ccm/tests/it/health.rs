//! `/healthz` of the running binary follows its watches: a watch the apiserver keeps refusing
//! (here: RBAC without `services`) turns it red after the controller's resync period, naming
//! the watch; granting the permission turns it green again. The process keeps running: the
//! kubelet's liveness probe decides about a restart.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::ccm;

use std::process::Stdio;
use std::time::Duration;

use ccm::{BIN, TOKEN, free_port};
use hcloud_sim::{SimConfig, Simulator};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube_harness::eventually;
use serde_json::{Value, json};

use crate::support::scope::Scope;

/// Everything the CCM needs except `services`.
fn rules_without_services() -> Value {
    json!([
        { "apiGroups": [""], "resources": ["nodes", "nodes/status"], "verbs": ["*"] },
        { "apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["*"] },
        { "apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["*"] },
    ])
}

async fn get(http: &reqwest::Client, url: &str) -> Option<(u16, String)> {
    let response = http.get(url).send().await.ok()?;
    let status = response.status().as_u16();
    Some((status, response.text().await.ok()?))
}

#[tokio::test]
async fn a_refused_watch_turns_healthz_red_and_a_granted_one_green_again() {
    let scope = Scope::new("health").await;
    let admin = scope.admin.clone();
    let sim = Simulator::start(SimConfig::default().token(TOKEN))
        .await
        .unwrap();
    // The account, its ClusterRole and the binding share one name.
    let account = scope.name("without-services");
    let roles: Api<ClusterRole> = Api::all(admin.clone());
    roles
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": { "name": account },
                "rules": rules_without_services(),
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": { "name": account },
                "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": account },
                "subjects": [{ "kind": "ServiceAccount", "name": account, "namespace": "kube-system" }],
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let access = scope.access(&account).await;
    let metrics_port = free_port();
    let mut ccm = tokio::process::Command::new(BIN)
        .env_clear()
        .env("HCLOUD_TOKEN", TOKEN)
        .env("HCLOUD_ENDPOINT", sim.base_url())
        .env(
            "HCLOUD_METRICS_ADDRESS",
            format!("127.0.0.1:{metrics_port}"),
        )
        .env("HCLOUD_LOAD_BALANCERS_LOCATION", "fsn1")
        .args([
            "--cloud-provider=hcloud",
            &format!("--kubeconfig={}", access.kubeconfig.display()),
            &scope.lease_flag(),
            "--secure-port=0",
            "--leader-elect-retry-period=500ms",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let http = reqwest::Client::new();
    let healthz = format!("http://127.0.0.1:{metrics_port}/healthz?verbose");

    // Progress first: the process leads and its controllers report in, healthy so far.
    let leases: Api<Lease> = Api::namespaced(admin.clone(), "kube-system");
    eventually("the lease is held", Duration::from_secs(30), || async {
        leases
            .get_opt(scope.lease())
            .await
            .unwrap()
            .and_then(|l| l.spec?.holder_identity)
    })
    .await;
    let (status, body) = eventually(
        "healthz lists the service controller",
        Duration::from_secs(30),
        || async {
            get(&http, &healthz)
                .await
                .filter(|(_, b)| b.contains("service"))
        },
    )
    .await;
    assert_eq!(status, 200, "{body}");

    // The services watch keeps being refused: red once that lasted the resync period (30 s).
    let (status, body) = eventually("healthz turns red", Duration::from_secs(90), || async {
        get(&http, &healthz).await.filter(|(s, _)| *s != 200)
    })
    .await;
    assert_eq!(status, 500, "{body}");
    assert!(body.contains("watch of services"), "{body}");
    assert!(body.contains("forbidden") || body.contains("403"), "{body}");
    assert!(
        ccm.try_wait().unwrap().is_none(),
        "a stuck watch fails the probe; it does not end the process"
    );

    // Granted: the watch recovers and so does /healthz.
    let mut rules = rules_without_services();
    rules.as_array_mut().unwrap().push(json!({
        "apiGroups": [""], "resources": ["services", "services/status"], "verbs": ["*"],
    }));
    roles
        .patch(
            &account,
            &PatchParams::default(),
            &Patch::Merge(json!({ "rules": rules })),
        )
        .await
        .unwrap();
    let (_, body) = eventually("healthz green again", Duration::from_secs(90), || async {
        get(&http, &healthz).await.filter(|(s, _)| *s == 200)
    })
    .await;
    assert!(!body.contains("watch of services"), "{body}");
    assert!(ccm.try_wait().unwrap().is_none());
}
