//! Helpers the tests of this binary share. `ccm.rs` and `chart.rs` live beside `tests/image.rs`,
//! a test binary of its own that uses them too.

#[path = "../../support/ccm.rs"]
pub mod ccm;
#[path = "../../support/chart.rs"]
pub mod chart;
pub mod scope;

use std::path::Path;
use std::time::{Duration, Instant};

use kube_harness::ControlPlane;

/// Audit every request at Metadata level, reads included (the harness's own policy records
/// writes only).
const AUDIT_EVERYTHING: &str = "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n";

/// The one control plane of this test binary, started on first use and shared by every test
/// (each in its own scope, see [`scope::Scope`]). Besides the harness defaults it audits every
/// request, reads included (the harness's own policy records writes only).
pub fn plane() -> &'static ControlPlane {
    ControlPlane::shared_with(|| {
        // The apiserver reads the policy at start; the file is rewritten (same text) by every run.
        let policy =
            std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("audit-everything.yaml");
        std::fs::write(&policy, AUDIT_EVERYTHING).expect("write the audit policy");
        kube_harness::Options {
            apiserver_args: vec![format!("--audit-policy-file={}", policy.display())],
            ..kube_harness::Options::default()
        }
    })
    .expect("the control plane of this test binary")
}

/// The pods' address ranges of [`ipam_plane`]: kube-controller-manager gives every Node a `/24`
/// of the first and a `/64` of the second.
pub const IPAM_CLUSTER_CIDR: &str = "10.244.0.0/16,fd00:10:244::/56";

/// A second control plane of this test binary, started on first use, whose kube-controller-manager
/// gives every Node its pod CIDRs after it registers ([`IPAM_CLUSTER_CIDR`]), as in a cluster: for
/// the route tests, whose Nodes race the CCM's initialisation for them. Apart from the shared
/// [`plane`], whose Nodes keep the pod CIDRs their tests give them.
pub fn ipam_plane() -> &'static ControlPlane {
    static IPAM: std::sync::OnceLock<ControlPlane> = std::sync::OnceLock::new();
    IPAM.get_or_init(|| {
        ControlPlane::start_blocking(kube_harness::Options {
            node_ipam_cluster_cidr: Some(IPAM_CLUSTER_CIDR.to_owned()),
            ..kube_harness::Options::default()
        })
        .expect("the node IPAM control plane of this test binary")
    })
}

/// What the binary logs on each start-up attempt that may pass by itself.
pub const RETRIED: &str = "not usable yet; trying again";

/// Runs the binary in a new scope (named after `prefix`) against `endpoint`, with the test
/// token, no metrics port and `env` (which may set another token), until it exits, which it
/// must within 30 s; returns its exit code and its log.
pub async fn run_to_exit(
    prefix: &str,
    endpoint: &str,
    env: &[(&str, &str)],
) -> (Option<i32>, String) {
    let scope = scope::Scope::new(prefix).await;
    let access = scope.admin_access("ccm").await;
    let mut command = tokio::process::Command::new(ccm::BIN);
    command
        .env_clear()
        .env("HCLOUD_TOKEN", ccm::TOKEN)
        .env("HCLOUD_ENDPOINT", endpoint)
        .env("HCLOUD_METRICS_ENABLED", "false")
        .envs(env.iter().copied())
        .args([
            "--cloud-provider=hcloud",
            &format!("--kubeconfig={}", access.kubeconfig.display()),
            &scope.lease_flag(),
            "--secure-port=0",
        ]);
    let output = tokio::time::timeout(Duration::from_secs(30), command.output())
        .await
        .expect("the binary exits on its own")
        .unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Waits (up to 30 s) until the log at `log` shows `attempts` failed start-up attempts
/// ([`RETRIED`]); meanwhile the process must run. Returns the log.
pub async fn wait_for_retries(
    child: &mut std::process::Child,
    log: &Path,
    attempts: usize,
) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = std::fs::read_to_string(log).unwrap();
        if text.lines().filter(|l| l.contains(RETRIED)).count() >= attempts {
            return text;
        }
        assert!(child.try_wait().unwrap().is_none(), "exited:\n{text}");
        assert!(Instant::now() < deadline, "not retried:\n{text}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The events with `reason` on the object `name` in `namespace`.
pub async fn events(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    reason: &str,
) -> Vec<k8s_openapi::api::core::v1::Event> {
    kube::Api::<k8s_openapi::api::core::v1::Event>::namespaced(client.clone(), namespace)
        .list(&kube::api::ListParams::default().fields(&format!("involvedObject.name={name}")))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .collect()
}

/// A `kubernetes.io/tls` Secret `name` with a new self-signed certificate for `domain` (as
/// cert-manager writes one: `tls.crt` and `tls.key` in PEM).
pub fn tls_secret(name: &str, domain: &str) -> k8s_openapi::api::core::v1::Secret {
    let generated =
        rcgen::generate_simple_self_signed(vec![domain.to_owned()]).expect("a certificate");
    let data = [
        ("tls.crt", generated.cert.pem()),
        ("tls.key", generated.signing_key.serialize_pem()),
    ]
    .into_iter()
    .map(|(key, pem)| (key.to_owned(), k8s_openapi::ByteString(pem.into_bytes())))
    .collect();
    k8s_openapi::api::core::v1::Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        },
        type_: Some("kubernetes.io/tls".to_owned()),
        data: Some(data),
        ..Default::default()
    }
}
