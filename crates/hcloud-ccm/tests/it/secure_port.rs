//! The secure port against a real kube-apiserver: health paths open, /metrics only for callers
//! the apiserver authenticates (TokenReview) and authorises (SubjectAccessReview).
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code

use std::net::SocketAddr;

use hcloud_ccm::config::SecureServingSettings;
use hcloud_ccm::http::{Endpoints, MetricsRegistry, serve_secure};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Subject};
use kube::api::{Api, ObjectMeta, PostParams};
use kube_harness::unique_name;
use prometheus_client::metrics::counter::Counter;
use reqwest::StatusCode;
use tokio_util::sync::CancellationToken;

const NAMESPACE: &str = "metrics-readers";

struct Fixture {
    addr: SocketAddr,
    http: reqwest::Client,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

async fn start() -> Fixture {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let plane = crate::support::plane();
    let client = plane.client().await.expect("client");
    let endpoints = Endpoints::new(MetricsRegistry::new());
    let counter: Counter = Counter::default();
    counter.inc();
    endpoints
        .metrics
        .register("secure_port_test_events", "Test events", counter);
    let settings = SecureServingSettings {
        bind_address: "127.0.0.1".parse().unwrap(),
        port: 0,
        tls_files: None,
        always_allow_paths: vec!["/healthz".into(), "/readyz".into(), "/livez".into()],
    };
    // Port 0 is refused by validation but fine here: the OS picks one.
    let shutdown = CancellationToken::new();
    let server = serve_secure(&settings, &endpoints, client, shutdown.clone())
        .await
        .expect("serve");
    let http = reqwest::Client::builder()
        .tls_danger_accept_invalid_certs(true)
        .build()
        .expect("http client");
    Fixture {
        addr: server.local_addr,
        http,
        shutdown,
        task: server.task,
    }
}

impl Fixture {
    async fn get(&self, path: &str, token: Option<&str>) -> (StatusCode, String) {
        let mut request = self.http.get(format!("https://{}{path}", self.addr));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.expect("request");
        let status = response.status();
        (status, response.text().await.expect("body"))
    }

    async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(std::time::Duration::from_secs(5), self.task)
            .await
            .unwrap()
            .unwrap();
    }
}

#[tokio::test]
async fn health_paths_are_open() {
    let f = start().await;
    assert_eq!(f.get("/healthz", None).await, (StatusCode::OK, "ok".into()));
    assert_eq!(f.get("/livez", None).await, (StatusCode::OK, "ok".into()));
    assert_eq!(
        f.get("/readyz", Some("garbage")).await,
        (StatusCode::OK, "ok".into())
    );
    f.stop().await;
}

#[tokio::test]
async fn metrics_need_an_authorised_token() {
    let f = start().await;
    let plane = crate::support::plane();
    let admin = plane.client().await.unwrap();

    // No token, or one the apiserver rejects: 401.
    assert_eq!(f.get("/metrics", None).await.0, StatusCode::UNAUTHORIZED);
    assert_eq!(
        f.get("/metrics", Some("not-a-token")).await.0,
        StatusCode::UNAUTHORIZED
    );

    // A valid ServiceAccount token without RBAC: 403.
    let nobody = unique_name("nobody");
    let token = plane
        .service_account_token(NAMESPACE, &nobody)
        .await
        .unwrap();
    let (status, body) = f.get("/metrics", Some(&token)).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(body.contains(&nobody), "{body}");

    // A ServiceAccount bound to a ClusterRole allowing GET on /metrics: 200.
    let reader = unique_name("reader");
    let role = unique_name("metrics-reader");
    Api::<ClusterRole>::all(admin.clone())
        .create(
            &PostParams::default(),
            &ClusterRole {
                metadata: ObjectMeta {
                    name: Some(role.clone()),
                    ..ObjectMeta::default()
                },
                rules: Some(vec![PolicyRule {
                    non_resource_urls: Some(vec!["/metrics".into()]),
                    verbs: vec!["get".into()],
                    ..PolicyRule::default()
                }]),
                ..ClusterRole::default()
            },
        )
        .await
        .unwrap();
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(
            &PostParams::default(),
            &ClusterRoleBinding {
                metadata: ObjectMeta {
                    name: Some(role.clone()),
                    ..ObjectMeta::default()
                },
                // Through JSON: `apiGroup` became optional in the client types of Kubernetes 1.37.
                role_ref: serde_json::from_value(serde_json::json!({
                    "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role.clone(),
                }))
                .unwrap(),
                subjects: Some(vec![Subject {
                    kind: "ServiceAccount".into(),
                    name: reader.clone(),
                    namespace: Some(NAMESPACE.into()),
                    ..Subject::default()
                }]),
            },
        )
        .await
        .unwrap();
    let token = plane
        .service_account_token(NAMESPACE, &reader)
        .await
        .unwrap();
    let (status, body) = f.get("/metrics", Some(&token)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body.contains("secure_port_test_events_total 1"), "{body}");
    // The same token is not good for other paths.
    assert_eq!(
        f.get("/metrics/slis", Some(&token)).await.0,
        StatusCode::FORBIDDEN
    );
    f.stop().await;
}
