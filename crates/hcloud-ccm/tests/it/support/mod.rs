//! Helpers the tests of this binary share. `ccm.rs` and `chart.rs` live beside `tests/image.rs`,
//! a test binary of its own that uses them too.

#[path = "../../support/ccm.rs"]
pub mod ccm;
#[path = "../../support/chart.rs"]
pub mod chart;
pub mod scope;

use kube_harness::ControlPlane;

/// Audit every request at Metadata level, reads included (the harness's own policy records
/// writes only).
const AUDIT_EVERYTHING: &str = "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n";

/// The second control plane of this binary, for what the shared one does not offer: dual-stack
/// Nodes (Kubernetes 1.20 keeps a Node's second pod CIDR only with `IPv6DualStack` on) and an
/// audit log of every request, reads included. Started on first use and shared like
/// [`ControlPlane::shared`]; its users scope themselves the same way.
pub async fn dual_stack_audited_plane() -> &'static ControlPlane {
    static PLANE: tokio::sync::OnceCell<ControlPlane> = tokio::sync::OnceCell::const_new();
    PLANE
        .get_or_init(|| async {
            // The apiserver reads the policy at start; the file may go afterwards.
            let dir = tempfile::tempdir().unwrap();
            let policy = dir.path().join("audit-everything.yaml");
            std::fs::write(&policy, AUDIT_EVERYTHING).unwrap();
            ControlPlane::start_with_args(&[
                "--feature-gates=IPv6DualStack=true",
                &format!("--audit-policy-file={}", policy.display()),
            ])
            .await
            .expect("the dual-stack, fully audited control plane")
        })
        .await
}
