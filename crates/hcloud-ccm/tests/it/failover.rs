//! Two `hcloud-ccm` processes against one control plane: the leader is killed, the standby
//! takes over within the lease time, and the apiserver's audit log shows that only the leader
//! of the moment ever wrote. Each process runs as its own ServiceAccount bound to the shipped
//! ClusterRole (deploy/rbac.yaml), which also proves those rules are enough.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::ccm;

use std::path::Path;
use std::process::Stdio;
use std::str::FromStr as _;
use std::time::Duration;

use ccm::{BIN, TOKEN, audit_writes_of};
use hcloud_sim::{ServerSeed, SimConfig, Simulator};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Subject};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ObjectMeta, PostParams};
use kube_harness::{ControlPlane, UNINITIALIZED_TAINT, eventually, has_taint};
use serde::Deserialize as _;

use crate::support::scope::{Access, Scope};

const LEASE_SECONDS: u64 = 4;

/// The ClusterRole of deploy/rbac.yaml, named `<scope>-role` (cluster-wide names must not
/// collide with those of concurrent tests), bound to the `accounts` of `kube-system`.
async fn apply_shipped_rbac(scope: &Scope, accounts: &[&str]) {
    let admin = &scope.admin;
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/rbac.yaml"),
    )
    .unwrap();
    let mut role: ClusterRole = serde_yaml_ng::Deserializer::from_str(&text)
        .map(|doc| serde_yaml_ng::Value::deserialize(doc).unwrap())
        .find(|doc| doc["kind"] == "ClusterRole")
        .map(|doc| serde_yaml_ng::from_value(doc).unwrap())
        .expect("deploy/rbac.yaml has a ClusterRole");
    let role_name = scope.name("role");
    role.metadata.name = Some(role_name.clone());
    Api::<ClusterRole>::all(admin.clone())
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let binding = ClusterRoleBinding {
        metadata: ObjectMeta {
            name: Some(scope.name("failover")),
            ..ObjectMeta::default()
        },
        // Through JSON: `apiGroup` became optional in the client types of Kubernetes 1.37.
        role_ref: serde_json::from_value(serde_json::json!({
            "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role_name,
        }))
        .unwrap(),
        subjects: Some(
            accounts
                .iter()
                .map(|name| Subject {
                    kind: "ServiceAccount".into(),
                    name: (*name).into(),
                    namespace: Some("kube-system".into()),
                    ..Subject::default()
                })
                .collect(),
        ),
    };
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
}

/// The binary as ServiceAccount `account`, in `scope`; its log in `<dir>/<account>.log`.
async fn start_ccm(
    scope: &Scope,
    sim: &Simulator,
    account: &str,
    dir: &Path,
) -> (Access, tokio::process::Child) {
    let access = scope.access(account).await;
    let log = std::fs::File::create(dir.join(format!("{account}.log"))).unwrap();
    let ccm = tokio::process::Command::new(BIN)
        .env_clear()
        .env("HCLOUD_TOKEN", TOKEN)
        .env("HCLOUD_ENDPOINT", sim.base_url())
        .env("HCLOUD_METRICS_ENABLED", "false")
        .env("HCLOUD_LOAD_BALANCERS_ENABLED", "false")
        .env("RUST_LOG", "info")
        .args([
            "--cloud-provider=hcloud",
            &format!("--kubeconfig={}", access.kubeconfig.display()),
            &scope.lease_flag(),
            &format!("--leader-elect-lease-duration={LEASE_SECONDS}s"),
            "--leader-elect-renew-deadline=3s",
            "--leader-elect-retry-period=500ms",
            "--node-monitor-period=1s",
            "--secure-port=0",
        ])
        .stdout(Stdio::null())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    (access, ccm)
}

async fn holder(leases: &Api<Lease>, name: &str) -> Option<String> {
    leases
        .get_opt(name)
        .await
        .unwrap()
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
}

async fn renew_time(leases: &Api<Lease>, name: &str) -> Option<Timestamp> {
    leases
        .get_opt(name)
        .await
        .unwrap()
        .and_then(|l| l.spec)
        .and_then(|s| s.renew_time)
        .map(|t| t.0)
}

async fn initialized(nodes: &Api<Node>, name: &str) -> Option<String> {
    let node = nodes.get_opt(name).await.unwrap()?;
    if has_taint(&node, UNINITIALIZED_TAINT) {
        return None;
    }
    node.spec?.provider_id
}

fn writes_by(plane: &ControlPlane, account: &str) -> Vec<(Timestamp, String)> {
    audit_writes_of(plane, account)
        .into_iter()
        .map(|e| {
            let at = Timestamp::from_str(e["stageTimestamp"].as_str().unwrap()).unwrap();
            let what = format!(
                "{} {} {}",
                e["verb"].as_str().unwrap_or_default(),
                e["objectRef"]["resource"].as_str().unwrap_or_default(),
                e["objectRef"]["name"].as_str().unwrap_or_default()
            );
            (at, what)
        })
        .collect()
}

#[tokio::test]
async fn the_standby_takes_over_after_the_leader_dies_and_only_the_leader_writes() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let scope = Scope::new("failover").await;
    let plane = scope.plane;
    let sim = Simulator::start(SimConfig::default().token(TOKEN))
        .await
        .unwrap();
    let (node_1, node_2) = (scope.name("failover-1"), scope.name("failover-2"));
    for name in [&node_1, &node_2] {
        sim.admin()
            .create_server(ServerSeed::new(name))
            .await
            .unwrap();
    }
    let (account_a, account_b) = (scope.name("ccm-a"), scope.name("ccm-b"));
    apply_shipped_rbac(&scope, &[&account_a, &account_b]).await;
    let dir = scope.dir.path();
    let lease = scope.lease();
    let leases: Api<Lease> = Api::namespaced(scope.admin.clone(), "kube-system");
    let nodes: Api<Node> = scope.nodes();

    let (_access_a, mut a) = start_ccm(&scope, &sim, &account_a, dir).await;
    let leader_a = eventually("process A to lead", Duration::from_secs(30), || {
        holder(&leases, lease)
    })
    .await;
    let (_access_b, b) = start_ccm(&scope, &sim, &account_b, dir).await;
    // B runs as a standby for a while (its caches warm, it writes nothing): B has logged that
    // A holds the lease, and A renewed it twice more while B stood by.
    let b_log = dir.join(format!("{account_b}.log"));
    eventually("B to follow A", Duration::from_secs(30), || async {
        let log = std::fs::read_to_string(&b_log).unwrap_or_default();
        log.lines()
            .any(|l| l.contains("lease held by another candidate") && l.contains(&leader_a))
            .then_some(())
    })
    .await;
    let mut renewed = renew_time(&leases, lease).await;
    for n in 1..=2 {
        renewed = eventually(
            &format!("renewal {n} by A while B stands by"),
            Duration::from_secs(10),
            || async {
                renew_time(&leases, lease)
                    .await
                    .filter(|t| Some(*t) > renewed)
            },
        )
        .await
        .into();
    }
    assert_eq!(
        holder(&leases, lease).await.as_deref(),
        Some(leader_a.as_str())
    );

    scope.register_node(&node_1, None).await;
    eventually(
        "failover-1 initialized by A",
        Duration::from_secs(20),
        || initialized(&nodes, &node_1),
    )
    .await;

    let killed_at = Timestamp::now();
    a.kill().await.unwrap();
    let leader_b = eventually(
        "process B to take over",
        Duration::from_secs(30),
        || async { holder(&leases, lease).await.filter(|h| *h != leader_a) },
    )
    .await;
    let took_over_at = Timestamp::now();
    let takeover = took_over_at.duration_since(killed_at).as_secs_f64();
    assert!(
        takeover <= LEASE_SECONDS as f64 + 2.0,
        "took over {takeover:.1} s after the kill; lease duration is {LEASE_SECONDS} s"
    );

    scope.register_node(&node_2, None).await;
    eventually(
        "failover-2 initialized by B",
        Duration::from_secs(20),
        || initialized(&nodes, &node_2),
    )
    .await;

    eprintln!("takeover {takeover:.2} s after the kill");
    // Audit: A wrote only before it died, B only after it took over.
    let slack = k8s_openapi::jiff::SignedDuration::from_millis(500);
    let a_writes = writes_by(plane, &account_a);
    let b_writes = writes_by(plane, &account_b);
    eprintln!("A killed at {killed_at}\nA wrote: {a_writes:#?}\nB wrote: {b_writes:#?}");
    assert!(
        a_writes
            .iter()
            .any(|(_, w)| w.contains(&format!("nodes {node_1}"))),
        "{a_writes:?}"
    );
    assert!(
        b_writes
            .iter()
            .any(|(_, w)| w.contains(&format!("nodes {node_2}"))),
        "{b_writes:?}"
    );
    for (at, what) in &a_writes {
        assert!(
            *at <= killed_at + slack,
            "A wrote after its death: {what} at {at}"
        );
    }
    for (at, what) in &b_writes {
        assert!(
            *at >= killed_at,
            "B wrote while A led: {what} at {at} (A killed at {killed_at})"
        );
    }
    let lease = leases.get(lease).await.unwrap().spec.unwrap();
    assert_eq!(lease.holder_identity.as_deref(), Some(leader_b.as_str()));
    assert_eq!(lease.lease_transitions, Some(1));

    // Nobody wrote to the cloud (these controllers only read it).
    let counts = sim.admin().request_counts().await.unwrap();
    assert!(counts.keys().all(|k| k.starts_with("GET ")), "{counts:?}");
    drop(b);
}
