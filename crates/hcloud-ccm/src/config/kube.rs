//! The Kubernetes client: `--kube-api-qps`, `--kube-api-burst`.

use super::checker::Checker;
use super::{Args, KubeRateLimit};

impl Args {
    /// client-go's rules: a negative QPS disables the limit; 0 means 5 QPS and a 0 burst 10.
    pub(super) fn check_kube_rate_limit(&self, c: &mut Checker) -> Option<KubeRateLimit> {
        let burst: u32 = c.number("--kube-api-burst", &self.kube_api_burst, 0u32);
        let qps = match self.kube_api_qps.trim().parse::<f64>() {
            Ok(q) if q.is_finite() => q,
            _ => {
                c.problem(
                    "--kube-api-qps",
                    format!("{:?} is not a number", self.kube_api_qps),
                );
                return None;
            }
        };
        if qps < 0.0 {
            return None;
        }
        Some(KubeRateLimit {
            qps: if qps == 0.0 { 5.0 } else { qps },
            burst: if burst == 0 { 10 } else { burst },
        })
    }
}
