//! Several clusters in one project through the binary: with `HCLOUD_LOAD_BALANCERS_CLUSTER_NAME`
//! set, `hcloud-ccm plan` lists the cluster's orphaned load balancers as warnings and writes
//! nothing; only `hcloud-ccm delete-orphans` deletes them, and never a load balancer of a
//! Service or of another cluster. Without a cluster name the command refuses to run.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::ccm;

use std::path::Path;

use hcloud_api::api::params::ListParams;
use hcloud_sim::{LoadBalancerSeed, SimConfig, Simulator};
use serde_json::Value;

use ccm::{BIN, TOKEN, cloud_writes, lb_service};

use crate::support::scope::Scope;

const UID_LABEL: &str = "hcloud-ccm/service-uid";
const CLUSTER_LABEL: &str = "hcloud-ccm/cluster-name";

/// `hcloud-ccm <args>` against the simulator and the scoped apiserver, with `cluster` as the
/// cluster name when given.
async fn run(
    sim: &Simulator,
    kubeconfig: &Path,
    cluster: Option<&str>,
    args: &[&str],
) -> std::process::Output {
    let mut command = tokio::process::Command::new(BIN);
    command
        .env_clear()
        .env("HCLOUD_TOKEN", TOKEN)
        .env("HCLOUD_ENDPOINT", sim.base_url())
        .env("HCLOUD_LOAD_BALANCERS_LOCATION", "nbg1")
        .args(args)
        .args([
            "--cloud-provider=hcloud",
            "--allow-untagged-cloud",
            &format!("--kubeconfig={}", kubeconfig.display()),
        ]);
    if let Some(cluster) = cluster {
        command.env("HCLOUD_LOAD_BALANCERS_CLUSTER_NAME", cluster);
    }
    command.output().await.unwrap()
}

async fn names(sim: &Simulator) -> Vec<String> {
    let config =
        hcloud_api::ClientConfig::new(hcloud_api::Token::new(TOKEN)).with_endpoint(sim.base_url());
    let mut names: Vec<String> = hcloud_api::Client::new(config)
        .unwrap()
        .load_balancers()
        .list_all(&ListParams::default())
        .await
        .unwrap()
        .into_iter()
        .map(|lb| lb.name)
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn plan_lists_orphans_and_only_delete_orphans_deletes_them() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let scope = Scope::new("orphans").await;
    let sim = Simulator::start(SimConfig::default().token(TOKEN))
        .await
        .unwrap();
    let prefix = scope.id().to_owned();
    let owner = scope
        .create_service(lb_service(&format!("{prefix}-web"), &[]))
        .await;
    let admin = sim.admin();
    let seeds = [
        // The Service's own, an orphan of this cluster, another cluster's with a gone UID.
        ("owned", owner.metadata.uid.clone().unwrap(), "a"),
        (
            "orphan",
            "00000000-0000-0000-0000-000000000001".to_owned(),
            "a",
        ),
        (
            "theirs",
            "00000000-0000-0000-0000-000000000002".to_owned(),
            "b",
        ),
    ];
    let mut ids = std::collections::BTreeMap::new();
    for (name, uid, cluster) in seeds {
        let lb = admin
            .create_load_balancer(
                LoadBalancerSeed::new(format!("{prefix}-{name}"))
                    .location("nbg1")
                    .label(UID_LABEL, uid)
                    .label(CLUSTER_LABEL, cluster),
            )
            .await
            .unwrap();
        ids.insert(name, lb["id"].as_i64().unwrap());
    }
    let access = scope.admin_access("orphans").await;
    let kubeconfig = access.kubeconfig.as_path();

    // Plan: one warning for the orphan, no change for it, nothing written.
    admin.reset_request_counts().await.unwrap();
    let out = run(&sim, kubeconfig, Some("a"), &["plan", "-o", "json"]).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let orphans: Vec<&Value> = plan["objects"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["kind"] == "LoadBalancer")
        .collect();
    assert_eq!(orphans.len(), 1, "{plan:#}");
    assert_eq!(
        orphans[0]["name"],
        format!("\"{prefix}-orphan\" (ID {})", ids["orphan"])
    );
    assert_eq!(orphans[0]["warnings"][0]["reason"], "OrphanedLoadBalancer");
    assert!(
        orphans[0]
            .get("changes")
            .is_none_or(|c| c == &Value::Array(Vec::new()))
    );
    let counts = admin.request_counts().await.unwrap();
    assert!(cloud_writes(&counts).is_empty(), "{counts:?}");

    // Without a cluster name nothing is anyone's orphan: refused, nothing deleted.
    let out = run(&sim, kubeconfig, None, &["delete-orphans"]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("HCLOUD_LOAD_BALANCERS_CLUSTER_NAME"),
        "{out:?}"
    );
    assert_eq!(names(&sim).await.len(), 3);

    let out = run(&sim, kubeconfig, Some("a"), &["delete-orphans"]).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        stdout.contains(&format!("deleted load balancer \"{prefix}-orphan\"")),
        "{stdout}"
    );
    assert_eq!(
        names(&sim).await,
        [format!("{prefix}-owned"), format!("{prefix}-theirs")]
    );
}
