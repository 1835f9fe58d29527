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

/// The one control plane of this test binary, started on first use and shared by every test
/// (each in its own scope, see [`scope::Scope`]). Besides the harness defaults it keeps a
/// Node's second pod CIDR (Kubernetes 1.20 does so only with `IPv6DualStack` on) and audits
/// every request, reads included (the harness's own policy records writes only).
pub fn plane() -> &'static ControlPlane {
    ControlPlane::shared_with_args(|| {
        // The apiserver reads the policy at start; the file is rewritten (same text) by every run.
        let policy =
            std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("audit-everything.yaml");
        std::fs::write(&policy, AUDIT_EVERYTHING).expect("write the audit policy");
        vec![
            "--feature-gates=IPv6DualStack=true".to_owned(),
            format!("--audit-policy-file={}", policy.display()),
        ]
    })
    .expect("the control plane of this test binary")
}
