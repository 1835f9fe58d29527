//! The Kubernetes API groups and versions hcloud-ccm calls, from the apiserver's audit log: the
//! binary runs every controller (Nodes, lifecycle, routes, load balancers, leader election, the
//! secure port's delegated authorization) against a control plane that audits every request,
//! and the group/versions and resources it called are exactly the rows of the table in
//! `docs/deploy.md` ("Supported Kubernetes versions"). The manifests' own apiVersions are the
//! rows of the second table there.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::ccm;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use ccm::{BIN, TOKEN, audit_events_of, free_port, lb_service, simulator_with_host_in_network};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, PostParams};
use kube_harness::{UNINITIALIZED_TAINT, eventually, has_taint};
use serde_json::json;

use crate::support::scope::Scope;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The rows of the table under `heading` in docs/deploy.md whose first cell names an API
/// group/version: group/version → the second cell's items.
fn table(heading: &str) -> BTreeMap<String, BTreeSet<String>> {
    let doc = std::fs::read_to_string(repo().join("docs/deploy.md")).unwrap();
    let start = doc
        .find(heading)
        .unwrap_or_else(|| panic!("docs/deploy.md has no {heading:?}"));
    let section = &doc[start + heading.len()..];
    let section = &section[..section.find("\n#").unwrap_or(section.len())];
    let mut rows = BTreeMap::new();
    for line in section.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        let items = cells[1]
            .split(',')
            .map(|i| i.trim().trim_matches('`').to_owned())
            .filter(|i| !i.is_empty())
            .collect();
        rows.insert(cells[0].trim_matches('`').to_owned(), items);
    }
    rows
}

#[test]
fn the_manifests_api_versions_are_the_documented_ones() {
    let documented = table("### What the manifests and the chart need");
    let mut used: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut files = vec![
        "deploy/ccm.yaml",
        "deploy/ccm-networks.yaml",
        "deploy/ccm-ha.yaml",
        "deploy/rbac.yaml",
        "deploy/plan-job.yaml",
    ]
    .into_iter()
    .map(|f| std::fs::read_to_string(repo().join(f)).unwrap())
    .collect::<Vec<_>>();
    for template in std::fs::read_dir(repo().join("deploy/chart/templates")).unwrap() {
        files.push(std::fs::read_to_string(template.unwrap().path()).unwrap());
    }
    for text in files {
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let Some(version) = line.strip_prefix("apiVersion: ") else {
                continue;
            };
            // The kind is the next line that starts with "kind:" (before or after).
            let kind = lines
                .iter()
                .skip(i.saturating_sub(2))
                .take(5)
                .find_map(|l| l.strip_prefix("kind: "))
                .unwrap();
            let kind = if kind.contains("{{") {
                // The workload template: Deployment or DaemonSet.
                "Deployment".to_owned()
            } else {
                kind.trim().to_owned()
            };
            used.entry(version.trim().to_owned())
                .or_default()
                .insert(kind);
        }
    }
    used.entry("apps/v1".into())
        .or_default()
        .insert("DaemonSet".into());
    let documented_kinds: BTreeMap<String, BTreeSet<String>> = documented.clone();
    assert_eq!(
        used, documented_kinds,
        "the apiVersions and kinds of deploy/ and the chart against docs/deploy.md"
    );
}

#[tokio::test]
async fn the_binary_calls_only_the_documented_api_versions() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    // A control plane that audits reads too.
    let scope = Scope::new("versions").await;
    let (plane, admin) = (scope.plane, scope.admin.clone());
    let node = scope.name("versions-node");
    let (sim, _) = simulator_with_host_in_network(&node).await;
    let access = scope.admin_access("ccm").await;
    let secure_port = free_port();
    let _ccm = tokio::process::Command::new(BIN)
        .env_clear()
        .env("HCLOUD_TOKEN", TOKEN)
        .env("HCLOUD_ENDPOINT", sim.base_url())
        .env("HCLOUD_NETWORK", "k8s")
        .env("HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK", "true")
        .env("HCLOUD_METRICS_ENABLED", "false")
        .env("HCLOUD_LOAD_BALANCERS_LOCATION", "fsn1")
        .args([
            "--cloud-provider=hcloud",
            &format!("--kubeconfig={}", access.kubeconfig.display()),
            &scope.lease_flag(),
            "--allocate-node-cidrs=true",
            "--cluster-cidr=10.244.0.0/16",
            "--route-reconciliation-period=1s",
            "--leader-elect-retry-period=500ms",
            "--bind-address=127.0.0.1",
            &format!("--secure-port={secure_port}"),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();

    let nodes = scope.nodes();
    scope.register_node(&node, Some("10.244.1.0/24")).await;
    scope.create_service(lb_service("web", &[])).await;
    let services = scope.services();

    // Every controller has done its work: the Node initialised, its route made, the load
    // balancer's ingress written.
    eventually("the Node initialised", Duration::from_secs(30), || async {
        let node = nodes.get(&node).await.unwrap();
        (!has_taint(&node, UNINITIALIZED_TAINT)).then_some(())
    })
    .await;
    eventually("the route", Duration::from_secs(30), || async {
        let state = sim.admin().state().await.unwrap();
        state.to_string().contains("10.244.1.0/24").then_some(())
    })
    .await;
    eventually("the ingress", Duration::from_secs(30), || async {
        services
            .get("web")
            .await
            .unwrap()
            .status?
            .load_balancer?
            .ingress
            .filter(|i| !i.is_empty())
    })
    .await;
    // The secure port authorises a scraper through the apiserver.
    let scraper = scope.name("scraper");
    let token = plane
        .service_account_token("kube-system", &scraper)
        .await
        .unwrap();
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": { "name": scraper },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin" },
        "subjects": [{ "kind": "ServiceAccount", "name": scraper, "namespace": "kube-system" }],
    }))
    .unwrap();
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    let http = reqwest::Client::builder()
        .tls_danger_accept_invalid_certs(true)
        .build()
        .unwrap();
    eventually(
        "/metrics on the secure port",
        Duration::from_secs(30),
        || async {
            let response = http
                .get(format!("https://127.0.0.1:{secure_port}/metrics"))
                .bearer_auth(&token)
                .send()
                .await
                .ok()?;
            response.status().is_success().then_some(())
        },
    )
    .await;

    // What the CCM called (as its own ServiceAccount; its clients' user agents start with
    // "hcloud-ccm/").
    let called = eventually(
        "the secure port's reviews in the audit log",
        Duration::from_secs(10),
        || async {
            let mut called: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
            for event in audit_events_of(plane, &access.account) {
                if !event["userAgent"]
                    .as_str()
                    .unwrap_or_default()
                    .starts_with("hcloud-ccm/")
                {
                    continue;
                }
                let object = &event["objectRef"];
                let Some(resource) = object["resource"].as_str() else {
                    continue;
                };
                let group = object["apiGroup"].as_str().unwrap_or_default();
                let version = object["apiVersion"].as_str().unwrap_or_default();
                let group_version = if group.is_empty() {
                    version.to_owned()
                } else {
                    format!("{group}/{version}")
                };
                let resource = match object["subresource"].as_str() {
                    Some(sub) => format!("{resource}/{sub}"),
                    None => resource.to_owned(),
                };
                called.entry(group_version).or_default().insert(resource);
            }
            called
                .contains_key("authorization.k8s.io/v1")
                .then_some(called)
        },
    )
    .await;
    let documented = table("### What the binary calls");
    assert_eq!(
        called.keys().collect::<Vec<_>>(),
        documented.keys().collect::<Vec<_>>(),
        "API group/versions called (audit log) against docs/deploy.md: {called:?}"
    );
    for (group_version, resources) in &called {
        assert_eq!(
            resources, &documented[group_version],
            "resources of {group_version} called against docs/deploy.md"
        );
    }
}

/// The version a wrapper module of `tools/` builds (`require k8s.io/kubernetes vX`, on one line
/// or in a block), as `major.minor`.
fn built_minor(module: &str) -> String {
    let go_mod = std::fs::read_to_string(repo().join(module).join("go.mod")).unwrap();
    let version = go_mod
        .lines()
        .map(|line| line.trim().trim_start_matches("require ").trim())
        .find_map(|line| line.strip_prefix("k8s.io/kubernetes v"))
        .unwrap_or_else(|| panic!("{module}/go.mod requires no k8s.io/kubernetes"));
    let mut parts = version.split('.');
    format!("{}.{}", parts.next().unwrap(), parts.next().unwrap())
}

/// README and docs/deploy.md claim exactly the versions that are tested: the newest is what the
/// test command runs on (`tools/kubernetes`), the oldest what `scripts/oldest-kubernetes.sh` runs
/// on (`tools/kubernetes-oldest`), and the client types are built for both ends.
#[test]
fn the_claimed_versions_are_the_tested_ones() {
    let oldest = built_minor("tools/kubernetes-oldest");
    let newest = built_minor("tools/kubernetes");
    assert_eq!(
        format!("v{newest}"),
        kube_harness::KUBERNETES_VERSION[..format!("v{newest}").len()].to_owned()
    );
    let claim = format!("Kubernetes {oldest} to {newest}");
    for doc in ["README.md", "docs/deploy.md"] {
        let text = std::fs::read_to_string(repo().join(doc)).unwrap();
        assert!(text.contains(&claim), "{doc} does not claim {claim:?}");
    }
    let script = std::fs::read_to_string(repo().join("scripts/k8s-versions.sh")).unwrap();
    assert!(script.contains(&format!("\nOLDEST={oldest}\n")), "{script}");
    assert!(script.contains(&format!("\nNEWEST={newest}\n")), "{script}");
}
