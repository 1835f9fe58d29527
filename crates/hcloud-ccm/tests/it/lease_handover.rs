//! Lease hand-over between `hcloud-ccm` and client-go's own leader election, in both
//! directions, on the same lock (`kube-system/<name>` Lease) with the same identity format.
//!
//! The Go side is `tools/kubernetes/lease-holder/main.go`, built by `scripts/lease-holder.sh` with
//! the client-go of the Kubernetes version the control plane runs: it is what a Go
//! cloud-controller-manager (such as the official Hetzner one) runs for its election.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::ccm;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use hcloud_sim::{SimConfig, Simulator};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use kube_harness::eventually;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use ccm::{BIN, TOKEN};

use crate::support::scope::Scope;

/// Lease timings for both sides: short, so that a test that waited out a full lease would
/// still be quick, but a release must hand over well within one lease duration.
const LEASE: &str = "6s";
const RENEW: &str = "4s";
const RETRY: &str = "500ms";

fn lease_holder_binary() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = std::process::Command::new(root.join("scripts/lease-holder.sh"))
        .current_dir(&root)
        .stderr(Stdio::inherit())
        .output()
        .expect("run scripts/lease-holder.sh");
    assert!(out.status.success(), "scripts/lease-holder.sh failed");
    let path = String::from_utf8(out.stdout).unwrap();
    PathBuf::from(path.lines().last().expect("a path").trim())
}

/// The client-go participant; its stdout lines go to a channel.
struct GoHolder {
    child: Child,
    lines: tokio::sync::mpsc::UnboundedReceiver<String>,
    identity: String,
}

impl GoHolder {
    async fn start(binary: &Path, kubeconfig: &Path, lease: &str) -> Self {
        let mut child = Command::new(binary)
            .args([
                &format!("--kubeconfig={}", kubeconfig.display()),
                &format!("--name={lease}"),
                &format!("--lease-duration={LEASE}"),
                &format!("--renew-deadline={RENEW}"),
                &format!("--retry-period={RETRY}"),
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, mut lines) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut reader = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let first = tokio::time::timeout(Duration::from_secs(20), lines.recv())
            .await
            .expect("the Go holder prints its identity")
            .expect("a line");
        let identity = first
            .strip_prefix("IDENTITY ")
            .expect("IDENTITY line")
            .to_owned();
        Self {
            child,
            lines,
            identity,
        }
    }

    /// Waits for an output line equal to `wanted`.
    async fn expect_line(&mut self, wanted: &str, within: Duration) {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            match tokio::time::timeout_at(deadline, self.lines.recv()).await {
                Ok(Some(line)) if line == wanted => return,
                Ok(Some(_)) => {}
                Ok(None) => panic!("the Go holder exited before printing {wanted:?}"),
                Err(_) => panic!("the Go holder did not print {wanted:?} within {within:?}"),
            }
        }
    }

    /// SIGTERM: client-go releases the Lease on cancel.
    async fn terminate(mut self) {
        let pid = self.child.id().expect("running");
        let status = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let exit = tokio::time::timeout(Duration::from_secs(20), self.child.wait())
            .await
            .expect("the Go holder exits after SIGTERM")
            .unwrap();
        assert!(exit.success(), "Go holder exit: {exit:?}");
    }
}

fn start_ccm(kubeconfig: &Path, sim: &Simulator, lease: &str, log: &Path) -> Child {
    let log = std::fs::File::create(log).unwrap();
    Command::new(BIN)
        .env_clear()
        .env("HCLOUD_TOKEN", TOKEN)
        .env("HCLOUD_ENDPOINT", sim.base_url())
        .env("HCLOUD_METRICS_ENABLED", "false")
        .env("HCLOUD_LOAD_BALANCERS_ENABLED", "false")
        .env("RUST_LOG", "info")
        .args([
            "--cloud-provider=hcloud",
            &format!("--kubeconfig={}", kubeconfig.display()),
            &format!("--leader-elect-resource-name={lease}"),
            &format!("--leader-elect-lease-duration={LEASE}"),
            &format!("--leader-elect-renew-deadline={RENEW}"),
            &format!("--leader-elect-retry-period={RETRY}"),
            "--controllers=cloud-node",
            "--secure-port=0",
        ])
        .stdout(Stdio::null())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

async fn lease_spec(leases: &Api<Lease>, name: &str) -> (Option<String>, i32) {
    let spec = leases
        .get_opt(name)
        .await
        .unwrap()
        .and_then(|l| l.spec)
        .unwrap_or_default();
    (
        spec.holder_identity.filter(|h| !h.is_empty()),
        spec.lease_transitions.unwrap_or(0),
    )
}

async fn sigterm(child: &mut Child) {
    let pid = child.id().expect("running");
    let status = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("hcloud-ccm exits after SIGTERM")
        .unwrap();
    assert!(exit.success(), "hcloud-ccm exit: {exit:?}");
}

/// The identity format client-go's controller managers use: `<hostname>_<uuid>`.
fn assert_identity_format(identity: &str) {
    let (host, uuid) = identity.rsplit_once('_').expect("<hostname>_<uuid>");
    assert!(!host.is_empty(), "{identity}");
    assert_eq!(uuid.len(), 36, "{identity}");
    assert_eq!(uuid.matches('-').count(), 4, "{identity}");
}

#[tokio::test]
async fn the_lease_passes_between_client_go_and_hcloud_ccm_both_ways() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let go = lease_holder_binary();
    let scope = Scope::new("handover").await;
    let sim = Simulator::start(SimConfig::default().token(TOKEN))
        .await
        .unwrap();
    let dir = scope.dir.path();
    // The Go side touches only the Lease; hcloud-ccm's node controller sees only this test's
    // (no) Nodes.
    let kubeconfig = dir.join("admin.kubeconfig");
    scope.plane.write_kubeconfig(&kubeconfig).unwrap();
    let access = scope.admin_access("ccm").await;
    let lease = scope.lease();
    let leases: Api<Lease> = Api::namespaced(scope.admin.clone(), "kube-system");

    // 1. A client-go controller manager leads; hcloud-ccm starts as a standby.
    let mut go_leader = GoHolder::start(&go, &kubeconfig, lease).await;
    go_leader
        .expect_line("LEADING", Duration::from_secs(20))
        .await;
    assert_identity_format(&go_leader.identity);
    let mut ccm = start_ccm(&access.kubeconfig, &sim, lease, &dir.join("ccm-1.log"));
    // A sign that the standby runs: it has read the Lease and waits (its log says so); the
    // holder does not change meanwhile.
    eventually("hcloud-ccm to follow", Duration::from_secs(20), || async {
        let log = std::fs::read_to_string(dir.join("ccm-1.log")).unwrap_or_default();
        log.contains(&go_leader.identity).then_some(())
    })
    .await;
    let (holder, transitions_before) = lease_spec(&leases, lease).await;
    assert_eq!(holder.as_deref(), Some(go_leader.identity.as_str()));

    // 2. client-go releases on shutdown; hcloud-ccm takes over at once (well within a lease).
    let released = Instant::now();
    go_leader.terminate().await;
    let ccm_identity = eventually("hcloud-ccm to lead", Duration::from_secs(5), || async {
        // The Go holder has exited, so any holder now is hcloud-ccm.
        lease_spec(&leases, lease).await.0
    })
    .await;
    assert!(
        released.elapsed() < Duration::from_secs(5),
        "took {:?}",
        released.elapsed()
    );
    assert_identity_format(&ccm_identity);
    let (_, transitions) = lease_spec(&leases, lease).await;
    assert_eq!(transitions, transitions_before + 1);

    // 3. A client-go candidate follows hcloud-ccm; hcloud-ccm releases on SIGTERM and the Go
    //    side takes over without waiting out the lease.
    let mut go_next = GoHolder::start(&go, &kubeconfig, lease).await;
    go_next
        .expect_line(&format!("LEADER {ccm_identity}"), Duration::from_secs(20))
        .await;
    let released = Instant::now();
    sigterm(&mut ccm).await;
    go_next.expect_line("LEADING", Duration::from_secs(5)).await;
    assert!(
        released.elapsed() < Duration::from_secs(5),
        "took {:?}",
        released.elapsed()
    );
    let (holder, transitions_after) = lease_spec(&leases, lease).await;
    assert_eq!(holder.as_deref(), Some(go_next.identity.as_str()));
    assert_eq!(transitions_after, transitions + 1);
    go_next.terminate().await;
}
