//! The cloud provider and the Kubernetes client: `--cloud-provider`, `--kubeconfig`,
//! `--master`, `--cluster-name`, `--kube-api-qps`, `--kube-api-burst`.

use std::path::PathBuf;

use super::args::KUBE;
use super::checker::{Checker, at_least, non_empty_text, path, url};
use super::setting::{Form, Spec, settings};
use super::{KubeRateLimit, KubeSettings};

settings! {
    SETTINGS, KUBE;
    /// The cloud provider; must be `hcloud`.
    pub(super) CLOUD_PROVIDER: String = Spec::flag("cloud-provider", "NAME").parse(cloud_provider);
    /// Path to a kubeconfig file. Without it the in-cluster configuration is used.
    pub(super) KUBECONFIG: PathBuf = Spec::flag("kubeconfig", "PATH").form(Form::Path).parse(path);
    /// Address of the Kubernetes API server (overrides the server in the kubeconfig).
    pub(super) MASTER: String = Spec::flag("master", "URL").parse(url);
    /// Name of the cluster, passed to load balancer and route calls.
    pub(super) CLUSTER_NAME: String =
        Spec::flag("cluster-name", "NAME").default("kubernetes").parse(non_empty_text);
    /// Requests per second to the Kubernetes API, per client (client-side token bucket; a
    /// negative value disables the limit, 0 means client-go's default of 5). Upstream's
    /// default is 20; see docs/migration.md.
    pub(super) KUBE_API_QPS: f64 = Spec::flag("kube-api-qps", "QPS").default("200").parse(qps);
    /// Burst of requests to the Kubernetes API above --kube-api-qps, per client (0 means
    /// client-go's default of 10). Upstream's default is 30; see docs/migration.md.
    pub(super) KUBE_API_BURST: u32 =
        Spec::flag("kube-api-burst", "N").default("400").parse(|v| at_least(v, 0u32));
}

fn cloud_provider(value: &str) -> Result<String, String> {
    match value {
        "" => Err("required; set --cloud-provider=hcloud".to_owned()),
        "hcloud" => Ok(value.to_owned()),
        other => Err(format!(
            "unknown cloud provider {other:?}; this binary implements only \"hcloud\""
        )),
    }
}

fn qps(value: &str) -> Result<f64, String> {
    match value.trim().parse::<f64>() {
        Ok(q) if q.is_finite() => Ok(q),
        _ => Err(format!("{value:?} is not a number")),
    }
}

/// How to reach the Kubernetes API, with client-go's rate limit rules: a negative QPS
/// disables the limit; 0 means 5 QPS and a 0 burst 10.
pub(super) fn check_kube(c: &mut Checker<'_>) -> KubeSettings {
    let kubeconfig = c.optional(&KUBECONFIG);
    let master = c.optional(&MASTER);
    let burst = c.value(&KUBE_API_BURST);
    let rate_limit = c.optional(&KUBE_API_QPS).and_then(|qps| {
        (qps >= 0.0).then_some(KubeRateLimit {
            qps: if qps == 0.0 { 5.0 } else { qps },
            burst: if burst == 0 { 10 } else { burst },
        })
    });
    KubeSettings {
        kubeconfig,
        master,
        rate_limit,
    }
}
