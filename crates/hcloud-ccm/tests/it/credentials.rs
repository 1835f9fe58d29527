//! The API token read again from `HCLOUD_TOKEN_FILE` while the binary runs, the file swapped
//! the way the kubelet updates a Secret volume: the new content in a new directory, then the
//! `..data` symlink renamed over the old one. A token of the cluster's project is used (at the
//! next reading, or at once by a request the API refused with the revoked old token), and no
//! request fails in the swap; a token of another project is refused and the old one kept.
//! The Robot user and password are read again the same way from `ROBOT_USER_FILE` and
//! `ROBOT_PASSWORD_FILE`.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::time::Duration;

use hcloud_sim::{RobotServerSeed, SeedFile, ServerSeed, SimConfig, Simulator};
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use kube_harness::{UNINITIALIZED_TAINT, eventually, has_taint, kubelet_node};

use crate::support::ccm::{BIN, TOKEN, free_port, metric, metrics};
use crate::support::events;
use crate::support::scope::Scope;

/// The new token of the cluster's project.
const NEW_TOKEN: &str = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210";
/// A token of another project.
const FOREIGN_TOKEN: &str = "aaaabbbbccccddddaaaabbbbccccddddaaaabbbbccccddddaaaabbbbccccdddd";

const RELOADS: &str = "cloud_controller_credential_reloads_total";

/// A Secret volume in `dir` holding `token`: `..<version>/token`, `..data` → `..<version>`,
/// `token` → `..data/token`. Returns the path of `token`.
fn secret_volume(dir: &Path, token: &str) -> PathBuf {
    secret_volume_of(dir, &[("token", token)]);
    dir.join("token")
}

/// A Secret volume in `dir` holding `keys` (key, value), each `key` → `..data/key`.
fn secret_volume_of(dir: &Path, keys: &[(&str, &str)]) {
    std::fs::create_dir_all(dir).unwrap();
    let version = dir.join("..2026_12_03_v1");
    std::fs::create_dir(&version).unwrap();
    for (key, value) in keys {
        std::fs::write(version.join(key), value).unwrap();
        symlink(format!("..data/{key}"), dir.join(key)).unwrap();
    }
    symlink("..2026_12_03_v1", dir.join("..data")).unwrap();
}

/// The kubelet's atomic update: a new version directory, a temporary symlink to it renamed
/// over `..data`, the old directory removed.
fn swap_secret(dir: &Path, version: &str, token: &str) {
    swap_secret_of(dir, version, &[("token", &format!("{token}\n"))]);
}

/// [`swap_secret`] of a volume holding `keys`.
fn swap_secret_of(dir: &Path, version: &str, keys: &[(&str, &str)]) {
    let new = dir.join(format!("..{version}"));
    std::fs::create_dir(&new).unwrap();
    for (key, value) in keys {
        std::fs::write(new.join(key), value).unwrap();
    }
    let old = std::fs::read_link(dir.join("..data")).unwrap();
    symlink(format!("..{version}"), dir.join("..data_tmp")).unwrap();
    std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
    std::fs::remove_dir_all(dir.join(old)).unwrap();
}

/// The binary with its token from `token_file` only (and the further variables `env`),
/// metrics on `port`, its log in `log`.
fn spawn(
    scope: &Scope,
    kubeconfig: &Path,
    sim: &Simulator,
    (token_file, env): (&Path, &[(&str, &std::ffi::OsStr)]),
    port: u16,
    log: &Path,
) -> tokio::process::Child {
    tokio::process::Command::new(BIN)
        .env_clear()
        .envs(env.iter().copied())
        .env("HCLOUD_TOKEN_FILE", token_file)
        .env("HCLOUD_ENDPOINT", sim.base_url())
        .env("HCLOUD_METRICS_ADDRESS", format!("127.0.0.1:{port}"))
        .env("HCLOUD_LOAD_BALANCERS_ENABLED", "false")
        .arg("--cloud-provider=hcloud")
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg("--secure-port=0")
        .arg(scope.lease_flag())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

async fn initialized(nodes: &Api<Node>, name: &str) -> bool {
    let node = nodes.get(name).await.unwrap();
    !has_taint(&node, UNINITIALIZED_TAINT)
        && node
            .spec
            .and_then(|s| s.provider_id)
            .is_some_and(|id| id.starts_with("hcloud://"))
}

async fn all_initialized(nodes: &Api<Node>, names: &[String]) -> bool {
    for name in names {
        if !initialized(nodes, name).await {
            return false;
        }
    }
    true
}

/// The simulator with servers for `names`, and the Nodes of the first `initial` of them
/// initialised by a running binary whose token comes from a Secret volume in the scope's
/// directory.
async fn start(scope: &Scope, names: &[String], initial: usize) -> Started {
    let sim = Simulator::start(SimConfig::default().token(TOKEN))
        .await
        .unwrap();
    sim.admin()
        .seed(&SeedFile {
            servers: names.iter().map(ServerSeed::new).collect(),
            ..SeedFile::default()
        })
        .await
        .unwrap();
    let volume = scope.dir.path().join("secret");
    let token_file = secret_volume(&volume, TOKEN);
    let access = scope.admin_access("ccm").await;
    let port = free_port();
    let log = scope.dir.path().join("ccm.log");
    let ccm = spawn(
        scope,
        &access.kubeconfig,
        &sim,
        (&token_file, &[]),
        port,
        &log,
    );
    let nodes = scope.nodes();
    for name in &names[..initial] {
        scope.create_node(kubelet_node(name)).await;
    }
    eventually(
        "the first Nodes initialised",
        Duration::from_secs(60),
        || async {
            all_initialized(&nodes, &names[..initial])
                .await
                .then_some(())
        },
    )
    .await;
    Started {
        sim,
        ccm,
        port,
        volume,
        log,
        _access: access,
    }
}

/// What [`start`] started.
struct Started {
    sim: Simulator,
    ccm: tokio::process::Child,
    port: u16,
    volume: PathBuf,
    log: PathBuf,
    /// The binary's way to the control plane, open while it runs.
    _access: crate::support::scope::Access,
}

async fn reloads(port: u16, result: &str) -> f64 {
    credential_reloads(port, "hcloud", result).await
}

/// `cloud_controller_credential_reloads_total{credential, result}` of the binary on `port`.
async fn credential_reloads(port: u16, credential: &str, result: &str) -> f64 {
    let text = metrics(port).await.unwrap_or_default();
    metric(
        &text,
        RELOADS,
        &format!(r#"credential="{credential}",result="{result}""#),
    )
}

/// The token swapped in the volume and the old one revoked at once, while Nodes join: the
/// requests the API refuses with the old token read the file again and are tried once more with
/// the new one, so every Node is initialised, no reconcile fails, the new token is used and the
/// old one no longer. Neither token reaches the log.
#[tokio::test]
async fn a_swapped_token_is_used_and_no_request_fails_in_the_swap() {
    let scope = Scope::new("creds-swap").await;
    let names: Vec<String> = (0..8).map(|i| scope.name(&format!("node-{i}"))).collect();
    let Started {
        sim,
        mut ccm,
        port,
        volume,
        log,
        _access,
    } = start(&scope, &names[..5], 2).await;
    let admin = sim.admin();
    admin.add_token(NEW_TOKEN, false).await.unwrap();

    // Nodes join before and right after the swap: the first requests after it are made with
    // the revoked token, before the next reading of the file.
    for name in &names[2..5] {
        scope.create_node(kubelet_node(name)).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let before = admin.token_request_counts().await.unwrap();
    swap_secret(&volume, "2026_12_03_v2", NEW_TOKEN);
    admin.revoke_token(TOKEN).await.unwrap();
    // Servers the CCM has not listed yet: their Nodes need a listing at once.
    for name in &names[5..] {
        admin.create_server(ServerSeed::new(name)).await.unwrap();
        scope.create_node(kubelet_node(name)).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let nodes = scope.nodes();
    eventually(
        "every Node initialised",
        Duration::from_secs(60),
        || async { all_initialized(&nodes, &names).await.then_some(()) },
    )
    .await;
    eventually("the new token applied", Duration::from_secs(30), || async {
        (reloads(port, "applied").await == 1.0).then_some(())
    })
    .await;
    // Every request the API refused with the revoked token was tried again with the new one,
    // and no reconcile failed on a refusal (Nodes whose servers are newer than the server
    // cache's listing wait for the next one, as without a swap).
    let text = metrics(port).await.unwrap();
    let refused = metric(&text, "hcloud_api_requests_total", r#"code="401""#);
    let log_text = std::fs::read_to_string(&log).unwrap();
    let retried = log_text
        .lines()
        .filter(|l| l.contains("refused with the previous token; trying again with the new one"))
        .count();
    assert_eq!(
        refused, retried as f64,
        "a refused request was not retried:\n{log_text}"
    );
    let failed: Vec<&str> = log_text
        .lines()
        .filter(|l| {
            // The API's answer to a refused token (a timestamp may hold "401" too).
            l.contains("reconcile failed")
                && (l.contains("unauthorized") || l.contains("unable to authenticate"))
        })
        .collect();
    assert!(
        failed.is_empty(),
        "requests failed in the swap: {failed:#?}"
    );
    assert_eq!(reloads(port, "refused").await, 0.0);
    let after = admin.token_request_counts().await.unwrap();
    assert!(
        after.get(NEW_TOKEN).copied().unwrap_or(0) > before.get(NEW_TOKEN).copied().unwrap_or(0),
        "the new token is used: {after:?}"
    );
    assert_eq!(
        after.get(TOKEN),
        before.get(TOKEN),
        "the old token is not accepted any more, so none of its requests counts"
    );
    ccm.kill().await.unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("a new credential from HCLOUD_TOKEN_FILE is in use"),
        "{text}"
    );
    assert!(
        !text.contains(TOKEN) && !text.contains(NEW_TOKEN),
        "a token in the log"
    );
}

/// A token of another project in the volume: refused (counted, a warning in the log and a
/// `CloudProjectMismatch` Warning on the first Node), the old token kept for the Nodes that
/// join after it, and not checked again while the volume holds it.
#[tokio::test]
async fn a_token_of_another_project_is_refused_and_the_old_one_kept() {
    let scope = Scope::new("creds-foreign").await;
    let names: Vec<String> = (0..3).map(|i| scope.name(&format!("node-{i}"))).collect();
    let Started {
        sim,
        mut ccm,
        port,
        volume,
        log,
        _access,
    } = start(&scope, &names, 2).await;
    let admin = sim.admin();
    admin.add_token(FOREIGN_TOKEN, true).await.unwrap();

    swap_secret(&volume, "2026_12_03_v2", FOREIGN_TOKEN);
    eventually("the token refused", Duration::from_secs(30), || async {
        (reloads(port, "refused").await == 1.0).then_some(())
    })
    .await;
    let mut first = names[..2].to_vec();
    first.sort();
    eventually(
        "the CloudProjectMismatch Warning",
        Duration::from_secs(30),
        || async {
            Some(events(&scope.admin, "default", &first[0], "CloudProjectMismatch").await)
                .filter(|e| !e.is_empty())
        },
    )
    .await;
    let before = admin.token_request_counts().await.unwrap();
    scope.create_node(kubelet_node(&names[2])).await;
    let nodes = scope.nodes();
    eventually(
        "the last Node initialised",
        Duration::from_secs(60),
        || async { initialized(&nodes, &names[2]).await.then_some(()) },
    )
    .await;
    // Two more readings: the refused token is not checked again.
    tokio::time::sleep(Duration::from_secs(11)).await;
    // The old token's next request: the last Node's initialisation, or (when a listing made
    // before it already answered that) the next periodic read.
    let used = |counts: &std::collections::BTreeMap<String, u64>| {
        counts.get(TOKEN).copied().unwrap_or(0) > before.get(TOKEN).copied().unwrap_or(0)
    };
    let after = eventually(
        "the old token still used",
        Duration::from_secs(60),
        || async { Some(admin.token_request_counts().await.unwrap()).filter(|c| used(c)) },
    )
    .await;
    assert_eq!(
        after.get(FOREIGN_TOKEN),
        before.get(FOREIGN_TOKEN),
        "the foreign token is used for nothing after its check"
    );
    assert_eq!(reloads(port, "refused").await, 1.0);
    assert_eq!(reloads(port, "applied").await, 0.0);
    ccm.kill().await.unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("the new credential from HCLOUD_TOKEN_FILE is refused"),
        "{text}"
    );
    assert!(
        !text.contains(TOKEN) && !text.contains(FOREIGN_TOKEN),
        "a token in the log"
    );
}

/// The Robot user and password in a Secret volume, swapped while dedicated Nodes join and the
/// old password changed at Robot at once: a Robot request refused with the old password reads
/// the files again and is tried once more with the new one (or the next reading has it first),
/// so the Node that joins after the swap is initialised, no reconcile fails, and neither
/// password reaches the log.
#[tokio::test]
async fn swapped_robot_credentials_are_used_and_no_request_fails_in_the_swap() {
    const OLD_PASSWORD: &str = "robot-password-old-5f1e";
    const NEW_PASSWORD: &str = "robot-password-new-9c2a";
    let scope = Scope::new("creds-robot").await;
    let (first, second) = (scope.name("dedi-1"), scope.name("dedi-2"));
    let sim = Simulator::start(
        SimConfig::default()
            .token(TOKEN)
            .robot_credentials("robot-e2e-user", OLD_PASSWORD)
            .robot_rate_limit(None),
    )
    .await
    .unwrap();
    let admin = sim.admin();
    admin
        .add_robot_server(RobotServerSeed::new(&first))
        .await
        .unwrap();
    let volume = scope.dir.path().join("secret");
    secret_volume_of(
        &volume,
        &[
            ("token", TOKEN),
            ("robot-user", "robot-e2e-user"),
            ("robot-password", OLD_PASSWORD),
        ],
    );
    let access = scope.admin_access("ccm").await;
    let port = free_port();
    let log = scope.dir.path().join("ccm.log");
    let robot_url = sim.robot_url();
    let (user_file, password_file) = (volume.join("robot-user"), volume.join("robot-password"));
    let env: [(&str, &std::ffi::OsStr); 5] = [
        ("ROBOT_ENABLED", "true".as_ref()),
        ("ROBOT_ENDPOINT", robot_url.as_ref()),
        ("ROBOT_USER_FILE", user_file.as_os_str()),
        ("ROBOT_PASSWORD_FILE", password_file.as_os_str()),
        // The server list is asked for again on every lookup a second on: Robot requests go
        // on around the swap.
        ("ROBOT_CACHE_TIMEOUT", "1s".as_ref()),
    ];
    let mut ccm = spawn(
        &scope,
        &access.kubeconfig,
        &sim,
        (&volume.join("token"), &env),
        port,
        &log,
    );
    let nodes = scope.nodes();
    let dedicated = async |name: &str| {
        let node = nodes.get(name).await.unwrap();
        !has_taint(&node, UNINITIALIZED_TAINT)
            && node
                .spec
                .and_then(|s| s.provider_id)
                .is_some_and(|id| id.starts_with("hrobot://"))
    };
    scope.create_node(kubelet_node(&first)).await;
    eventually(
        "the first dedicated Node initialised",
        Duration::from_secs(60),
        || async { dedicated(&first).await.then_some(()) },
    )
    .await;

    swap_secret_of(
        &volume,
        "2026_12_03_v2",
        &[
            ("token", TOKEN),
            ("robot-user", "robot-e2e-user"),
            ("robot-password", NEW_PASSWORD),
        ],
    );
    admin.set_robot_password(NEW_PASSWORD).await.unwrap();
    admin
        .add_robot_server(RobotServerSeed::new(&second))
        .await
        .unwrap();
    scope.create_node(kubelet_node(&second)).await;
    eventually(
        "the dedicated Node that joined after the swap initialised",
        Duration::from_secs(60),
        || async { dedicated(&second).await.then_some(()) },
    )
    .await;
    let robot_reloads = |result: &'static str| credential_reloads(port, "robot", result);
    eventually(
        "the new Robot credentials applied",
        Duration::from_secs(30),
        || async { (robot_reloads("applied").await == 1.0).then_some(()) },
    )
    .await;
    assert_eq!(robot_reloads("refused").await, 0.0);
    assert_eq!(robot_reloads("unreadable").await, 0.0);
    ccm.kill().await.unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    let failed: Vec<&str> = text
        .lines()
        .filter(|l| {
            l.contains("reconcile failed")
                && (l.contains("UNAUTHORIZED") || l.contains("Unable to authenticate"))
        })
        .collect();
    assert!(
        failed.is_empty(),
        "requests failed in the swap: {failed:#?}"
    );
    assert!(
        text.contains("a new credential from ROBOT_USER_FILE/ROBOT_PASSWORD_FILE is in use"),
        "{text}"
    );
    assert!(
        !text.contains(OLD_PASSWORD) && !text.contains(NEW_PASSWORD),
        "a password in the log"
    );
}
