//! Helpers for tests that run the `hcloud-ccm` binary against the control plane and the
//! simulator and then check what it wrote.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use hcloud_sim::{NetworkSeed, ServerSeed, SimConfig, Simulator};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, PostParams};
use kube_harness::ControlPlane;
use serde_json::{Value, json};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_hcloud-ccm");
/// A token of the real length (64 characters) that the simulator accepts.
pub const TOKEN: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// A kubeconfig in `dir` for a ServiceAccount `kube-system/<account>` bound to `cluster-admin`,
/// so that the audit log tells this process's requests apart from the test's own.
pub async fn service_account_kubeconfig(
    plane: &ControlPlane,
    admin: &kube::Client,
    account: &str,
    dir: &Path,
) -> PathBuf {
    let token = plane
        .service_account_token("kube-system", account)
        .await
        .unwrap();
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": { "name": account },
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "cluster-admin",
                },
                "subjects": [{ "kind": "ServiceAccount", "name": account, "namespace": "kube-system" }],
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let path = dir.join(format!("{account}.kubeconfig"));
    std::fs::write(&path, plane.service_account_kubeconfig_yaml(&token)).unwrap();
    path
}

/// The completed requests of ServiceAccount `kube-system/<account>` in the audit log, oldest
/// first (as [`ControlPlane::audit_events`] has them). Only the lines that name the account are
/// parsed: on a control plane that tests share, the log holds all their requests.
pub fn audit_events_of(plane: &ControlPlane, account: &str) -> Vec<Value> {
    let user = format!("system:serviceaccount:kube-system:{account}");
    let text = std::fs::read_to_string(plane.data_dir().join("audit.log")).unwrap_or_default();
    text.lines()
        .filter(|line| line.contains(&user))
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|e| e["stage"] == "ResponseComplete" && e["user"]["username"] == user.as_str())
        .collect()
}

/// [`audit_events_of`] without the reads: the requests that change something (`create`,
/// `update`, `patch`, `delete`, `deletecollection`). A control plane may audit reads too.
pub fn audit_writes_of(plane: &ControlPlane, account: &str) -> Vec<Value> {
    audit_events_of(plane, account)
        .into_iter()
        .filter(|e| {
            matches!(
                e["verb"].as_str().unwrap_or_default(),
                "create" | "update" | "patch" | "delete" | "deletecollection"
            )
        })
        .collect()
}

/// The writes the ServiceAccount made, as `verb resource name`, optionally only on `resources`.
pub fn kube_writes(plane: &ControlPlane, account: &str, resources: &[&str]) -> Vec<String> {
    audit_writes_of(plane, account)
        .into_iter()
        .filter(|e| {
            let resource = e["objectRef"]["resource"].as_str().unwrap_or_default();
            resources.is_empty() || resources.contains(&resource)
        })
        .map(|e| {
            format!(
                "{} {} {}",
                e["verb"].as_str().unwrap_or_default(),
                e["objectRef"]["resource"].as_str().unwrap_or_default(),
                e["objectRef"]["name"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

/// The simulator's request counts of everything but `GET`s.
pub fn cloud_writes(counts: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    counts
        .iter()
        .filter(|(key, _)| !key.starts_with("GET "))
        .map(|(k, v)| (k.clone(), *v))
        .collect()
}

/// The sum of the samples of metric `name` whose line contains `label` (empty: every sample).
pub fn metric(text: &str, name: &str, label: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name) && l.contains(label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The binary's `/metrics` on the plain-HTTP `port`, once it answers.
pub async fn metrics(port: u16) -> Option<String> {
    let body = reqwest::get(format!("http://127.0.0.1:{port}/metrics"))
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    Some(body)
}

/// A port nothing listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Send SIGTERM to `child` and wait up to `within` for it to exit; its exit status and the
/// standard error it wrote (when piped).
pub async fn terminate(child: &mut Child, within: Duration) -> (ExitStatus, String) {
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let deadline = Instant::now() + within;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "no exit within {within:?} of SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let mut stderr = String::new();
    if let Some(pipe) = child.stderr.as_mut() {
        std::io::Read::read_to_string(pipe, &mut stderr).unwrap();
    }
    (status, stderr)
}

/// A simulator with the network `k8s` (10.0.0.0/16, subnet 10.0.1.0/24) and the server `host`
/// attached to it, which the metadata service answers for: the host the CCM runs on, so that
/// its attached-network check passes. Returns the simulator and the server as the API shows it.
pub async fn simulator_with_host_in_network(host: &str) -> (Simulator, Value) {
    let sim = Simulator::start(SimConfig::default().token(TOKEN))
        .await
        .unwrap();
    let network = sim
        .admin()
        .create_network(NetworkSeed::new("k8s", "10.0.0.0/16").subnet("10.0.1.0/24", "eu-central"))
        .await
        .unwrap();
    let server = sim
        .admin()
        .create_server(ServerSeed {
            networks: vec![network.into()],
            ..ServerSeed::new(host)
        })
        .await
        .unwrap();
    sim.admin()
        .set_metadata_server(server["id"].as_i64())
        .await
        .unwrap();
    (sim, server)
}

/// The binary with `kubeconfig` against `sim`: the token and endpoint,
/// `--cloud-provider=hcloud`, no secure port, no metrics port, plus `env` and `args`. Killed
/// when dropped.
pub fn spawn_ccm(
    kubeconfig: &Path,
    sim: &Simulator,
    env: &[(&str, &str)],
    args: &[&str],
) -> tokio::process::Child {
    tokio::process::Command::new(BIN)
        .env_clear()
        .env("HCLOUD_TOKEN", TOKEN)
        .env("HCLOUD_ENDPOINT", sim.base_url())
        .env("HCLOUD_METRICS_ENABLED", "false")
        .envs(env.iter().copied())
        .arg("--cloud-provider=hcloud")
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg("--secure-port=0")
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// Server `name` in `sim`, with a public IPv4 or not, attached to `network` when given: its ID.
pub async fn create_server(
    sim: &Simulator,
    name: &str,
    public_ipv4: bool,
    network: Option<i64>,
) -> i64 {
    let server = sim
        .admin()
        .create_server(ServerSeed {
            public_ipv4,
            networks: network.into_iter().map(Into::into).collect(),
            ..ServerSeed::new(name)
        })
        .await
        .unwrap();
    server["id"].as_i64().unwrap()
}

/// `hcloud-ccm plan -o json` with `kubeconfig` against `sim` (the token and endpoint,
/// `--cloud-provider=hcloud`), plus `env` and `args`: the plan, parsed (a panic showing the
/// output when it is no JSON).
pub async fn plan_json(
    kubeconfig: &Path,
    sim: &Simulator,
    env: &[(&str, &str)],
    args: &[&str],
) -> Value {
    let output = tokio::process::Command::new(BIN)
        .env_clear()
        .env("HCLOUD_TOKEN", TOKEN)
        .env("HCLOUD_ENDPOINT", sim.base_url())
        .envs(env.iter().copied())
        .args(["plan", "-o", "json", "--cloud-provider=hcloud"])
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .args(args)
        .output()
        .await
        .unwrap();
    serde_json::from_slice(&output.stdout).unwrap_or_else(|err| {
        panic!(
            "{err}: {}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

/// A Service of type LoadBalancer `name` with one TCP port 80 and the
/// `load-balancer.hetzner.cloud/<key>` annotations given. The apiserver picks the node port
/// (tests share it, and node ports are cluster-wide).
pub fn lb_service(name: &str, annotations: &[(&str, &str)]) -> k8s_openapi::api::core::v1::Service {
    lb_service_with_ports(name, &[80], annotations)
}

/// [`lb_service`] with the TCP `ports` given (named `p<port>` when there are several, as the
/// apiserver requires).
pub fn lb_service_with_ports(
    name: &str,
    ports: &[i32],
    annotations: &[(&str, &str)],
) -> k8s_openapi::api::core::v1::Service {
    use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
    Service {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_owned()),
            annotations: Some(
                annotations
                    .iter()
                    .map(|(k, v)| (format!("load-balancer.hetzner.cloud/{k}"), (*v).to_owned()))
                    .collect(),
            ),
            ..kube::api::ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".into()),
            ports: Some(
                ports
                    .iter()
                    .map(|port| ServicePort {
                        name: (ports.len() > 1).then(|| format!("p{port}")),
                        port: *port,
                        protocol: Some("TCP".into()),
                        ..ServicePort::default()
                    })
                    .collect(),
            ),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}
