//! Beyond the official CCM: the health check of a Service with `externalTrafficPolicy: Local`
//! (pure).
//!
//! With that policy kube-proxy forwards a NodePort's traffic only to endpoints on the same
//! Node and answers `GET /healthz` on the Service's `healthCheckNodePort` with 200 where at
//! least one such endpoint runs (503 elsewhere, and while the Node shuts down). Checking that
//! URL takes Nodes without an endpoint out of the load balancer's rotation, so no connection
//! is sent where it would be dropped, and the client's source address is kept.
//!
//! The check is used for every service of the load balancer unless the Service says what to
//! check itself: any of `health-check-protocol`, `health-check-port` or
//! `health-check-http-path` (each names what is checked, so the official check with those
//! annotations is used), or `health-check-local-traffic: "false"`. Interval, timeout and
//! retries (annotations or `HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_*`) tune the local check as
//! any other. With `externalTrafficPolicy: Cluster` (or no `healthCheckNodePort`) the check
//! is the official one, so switching the policy back restores it.
//!
//! **Graceful drain, opt-in** (`health-check-kube-proxy: "true"`, or
//! `HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_KUBE_PROXY`): a Service with `externalTrafficPolicy:
//! Cluster` checks kube-proxy's own `GET /healthz` on port 10256 instead. Since Kubernetes
//! 1.29 (KEP-3836) kube-proxy fails it on a Node that is being deleted or tainted
//! `ToBeDeletedByClusterAutoscaler`, so the load balancer stops sending new connections there
//! before the target is removed. Opt-in because the port must be reachable from the load
//! balancer, and a kube-proxy replacement may not answer it. The same overrides keep the
//! official check.

use k8s_openapi::api::core::v1::Service;

use super::annotations::{Annotations, Errors, keys};
use super::services::DesiredHealthCheckHttp;

/// The path kube-proxy answers on the health check node port and on its own health port.
pub const PATH: &str = "/healthz";

/// kube-proxy's own health port (`--healthz-bind-address`, default `0.0.0.0:10256`).
pub const KUBE_PROXY_HEALTHZ_PORT: u16 = 10256;

/// Annotations that name what the health check checks: any of them keeps the official check.
const OVERRIDES: [&str; 3] = [
    keys::HEALTH_CHECK_PROTOCOL,
    keys::HEALTH_CHECK_PORT,
    keys::HEALTH_CHECK_HTTP_PATH,
];

/// The port to check over HTTP at [`PATH`] when a kube-proxy check applies to `service`, else
/// `None` (the official check): the local check for the Local policy, kube-proxy's own port
/// for the Cluster policy when `kube_proxy` (the setting) or the annotation asks for it. A bad
/// `health-check-local-traffic` or `health-check-kube-proxy` value is collected into `errors`
/// (each is read only for the policy it is about).
pub fn check_port(
    service: &Service,
    a: &Annotations,
    kube_proxy: bool,
    errors: &mut Errors,
) -> Option<u16> {
    let spec = service.spec.as_ref()?;
    if OVERRIDES.iter().any(|key| a.is_set(key)) {
        return None;
    }
    if spec.external_traffic_policy.as_deref() != Some("Local") {
        return errors
            .take(a.bool(keys::HEALTH_CHECK_KUBE_PROXY))
            .unwrap_or(kube_proxy)
            .then_some(KUBE_PROXY_HEALTHZ_PORT);
    }
    if errors.take(a.bool(keys::HEALTH_CHECK_LOCAL_TRAFFIC)) == Some(false) {
        return None;
    }
    spec.health_check_node_port
        .and_then(|p| u16::try_from(p).ok())
        .filter(|p| *p != 0)
}

/// The HTTP part of the local check: the path only (kube-proxy ignores the host; status
/// codes and TLS stay as the load balancer has them, `2??,3??` and off on a new check).
pub fn http() -> DesiredHealthCheckHttp {
    DesiredHealthCheckHttp {
        path: Some(PATH.to_owned()),
        ..DesiredHealthCheckHttp::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load_balancers::decide::predict;
    use crate::load_balancers::desired::{Desired, Placement};
    use crate::load_balancers::settings::LoadBalancerSettings;
    use hcloud_api::models::{HealthCheckProtocol, LoadBalancer, LoadBalancerType};
    use k8s_openapi::api::core::v1::ServiceSpec;

    fn service(policy: Option<&str>, hc_port: Option<i32>) -> Service {
        Service {
            spec: Some(ServiceSpec {
                external_traffic_policy: policy.map(str::to_owned),
                health_check_node_port: hc_port,
                ..ServiceSpec::default()
            }),
            ..Service::default()
        }
    }

    use crate::test_support::annotations as ann;

    #[test]
    fn only_the_local_policy_without_an_override_checks_the_node_port_of_kube_proxy() {
        let local = service(Some("Local"), Some(32000));
        type Case<'a> = (Service, Vec<(&'a str, &'a str)>, Option<u16>);
        // The Local Service with one annotation.
        let local_with = |key: &'static str,
                          value: &'static str,
                          want: Option<u16>|
         -> Case<'static> { (local.clone(), vec![(key, value)], want) };
        let cases: Vec<Case<'_>> = vec![
            (local.clone(), vec![], Some(32000)),
            (service(Some("Cluster"), None), vec![], None),
            (service(None, None), vec![], None),
            (service(Some("Local"), None), vec![], None),
            (service(Some("Local"), Some(0)), vec![], None),
            // Timings tune the local check; the opt-out is explicit.
            local_with(keys::HEALTH_CHECK_INTERVAL, "5s", Some(32000)),
            local_with(keys::HEALTH_CHECK_LOCAL_TRAFFIC, "true", Some(32000)),
            local_with(keys::HEALTH_CHECK_LOCAL_TRAFFIC, "false", None),
            local_with(keys::HEALTH_CHECK_PROTOCOL, "tcp", None),
            local_with(keys::HEALTH_CHECK_PORT, "10254", None),
            local_with(keys::HEALTH_CHECK_HTTP_PATH, "/ready", None),
        ];
        for (svc, pairs, want) in cases {
            let mut errors = Errors::default();
            assert_eq!(
                check_port(&svc, &ann(&pairs), false, &mut errors),
                want,
                "{pairs:?}"
            );
            assert!(errors.0.is_empty());
        }
    }

    #[test]
    fn the_cluster_policy_checks_kube_proxys_own_port_only_when_asked() {
        let cluster = service(Some("Cluster"), None);
        let unset = service(None, None);
        let local = service(Some("Local"), Some(32000));
        let kube_proxy = Some(KUBE_PROXY_HEALTHZ_PORT);
        let on = [(keys::HEALTH_CHECK_KUBE_PROXY, "true")];
        let off = [(keys::HEALTH_CHECK_KUBE_PROXY, "false")];
        /// The Service, its annotations, the setting and the port checked.
        type Case<'a> = (&'a Service, &'a [(&'a str, &'a str)], bool, Option<u16>);
        let cases: [Case<'_>; 9] = [
            (&cluster, &[], false, None),
            (&cluster, &on, false, kube_proxy),
            (&unset, &on, false, kube_proxy),
            // The setting is the default, the annotation wins over it.
            (&cluster, &[], true, kube_proxy),
            (&cluster, &off, true, None),
            // What the Service names itself keeps the official check.
            (
                &cluster,
                &[(keys::HEALTH_CHECK_PORT, "8080"), on[0]],
                true,
                None,
            ),
            (
                &cluster,
                &[(keys::HEALTH_CHECK_HTTP_PATH, "/ready")],
                true,
                None,
            ),
            // The Local policy keeps its own check, whatever the setting.
            (&local, &on, true, Some(32000)),
            (
                &local,
                &[(keys::HEALTH_CHECK_LOCAL_TRAFFIC, "false")],
                true,
                None,
            ),
        ];
        for (svc, pairs, setting, want) in cases {
            let mut errors = Errors::default();
            assert_eq!(
                check_port(svc, &ann(pairs), setting, &mut errors),
                want,
                "{pairs:?}, setting {setting}"
            );
            assert!(errors.0.is_empty());
        }
        // A bad value fails the sync only where it is read.
        let bad = ann(&[(keys::HEALTH_CHECK_KUBE_PROXY, "yes please")]);
        let mut errors = Errors::default();
        check_port(&local, &bad, false, &mut errors);
        assert!(errors.0.is_empty());
        check_port(&cluster, &bad, false, &mut errors);
        assert_eq!(
            errors.finish().unwrap_err().to_string(),
            "load-balancer.hetzner.cloud/health-check-kube-proxy: \"yes please\" is not a boolean (true or false)"
        );
    }

    /// A Service `web` with ports 80 and 443 (NodePorts 30080, 30443) and `policy`.
    fn web(policy: &str) -> Service {
        let mut svc = service(Some(policy), (policy == "Local").then_some(32000));
        svc.metadata.name = Some("web".into());
        svc.metadata.uid = Some("u1".into());
        if let Some(spec) = svc.spec.as_mut() {
            spec.ports = Some(
                [(80, 30080), (443, 30443)]
                    .into_iter()
                    .map(
                        |(port, node_port)| k8s_openapi::api::core::v1::ServicePort {
                            port,
                            node_port: Some(node_port),
                            protocol: Some("TCP".into()),
                            ..Default::default()
                        },
                    )
                    .collect(),
            );
        }
        svc
    }

    fn desired(svc: &Service, pairs: &[(&str, &str)]) -> Desired {
        Desired::new(
            svc,
            &ann(pairs),
            &LoadBalancerSettings::default(),
            None,
            &[],
        )
        .unwrap()
    }

    /// `lb` after the steps `desired` needs, and those steps as plan prints them.
    fn converge(desired: &Desired, lb: &mut LoadBalancer) -> Vec<String> {
        let steps = desired.diff(lb);
        for step in &steps {
            predict::after(step, lb, None);
        }
        assert_eq!(desired.diff(lb), Vec::new(), "one round is enough");
        steps.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn the_local_policy_checks_kube_proxy_and_cluster_restores_the_official_check() {
        let cluster = desired(&web("Cluster"), &[]);
        let request = cluster.create_request(&Placement::Location("fsn1".into()), 25);
        let mut lb = predict::created(&request, &LoadBalancerType::default());

        let local = desired(&web("Local"), &[]);
        for service in &local.services {
            let hc = &service.health_check;
            assert_eq!((&hc.protocol, hc.port), (&HealthCheckProtocol::Http, 32000));
            assert_eq!(hc.http.as_ref().and_then(|h| h.path.as_deref()), Some(PATH));
        }
        assert_eq!(
            converge(&local, &mut lb),
            [80, 443].map(|port| format!(
                "update service {port}: health check protocol tcp -> http, health check port 30{port:03} -> 32000, health check path unset -> \"/healthz\", health check status codes [] -> [\"2??\", \"3??\"]"
            ))
        );
        // A new load balancer gets the local check at once.
        let created = local.create_request(&Placement::Location("fsn1".into()), 25);
        assert_eq!(
            local.diff(&predict::created(&created, &LoadBalancerType::default())),
            Vec::new()
        );

        assert_eq!(
            converge(&cluster, &mut lb),
            [80, 443].map(|port| format!(
                "update service {port}: health check protocol http -> tcp, health check port 32000 -> 30{port:03}"
            ))
        );
    }

    #[test]
    fn timings_tune_the_local_check_and_an_override_keeps_the_official_one() {
        let tuned = desired(&web("Local"), &[(keys::HEALTH_CHECK_INTERVAL, "5s")]);
        let hc = &tuned.services[0].health_check;
        assert_eq!((hc.port, hc.interval), (32000, Some(5)));
        let own = desired(
            &web("Local"),
            &[
                (keys::HEALTH_CHECK_HTTP_PATH, "/ready"),
                (keys::HEALTH_CHECK_INTERVAL, "5s"),
            ],
        );
        let hc = &own.services[1].health_check;
        assert_eq!((&hc.protocol, hc.port), (&HealthCheckProtocol::Tcp, 30443));
        let official = desired(
            &web("Local"),
            &[(keys::HEALTH_CHECK_LOCAL_TRAFFIC, "false")],
        );
        assert_eq!(official.services, desired(&web("Cluster"), &[]).services);
    }

    #[test]
    fn a_bad_opt_out_is_an_error_only_for_the_local_policy() {
        let bad = ann(&[(keys::HEALTH_CHECK_LOCAL_TRAFFIC, "no")]);
        let mut errors = Errors::default();
        assert_eq!(
            check_port(&service(Some("Cluster"), None), &bad, false, &mut errors),
            None
        );
        assert!(errors.0.is_empty());
        // The error fails the sync; the value returned is not used then.
        check_port(
            &service(Some("Local"), Some(32000)),
            &bad,
            false,
            &mut errors,
        );
        assert_eq!(
            errors.finish().unwrap_err().to_string(),
            "load-balancer.hetzner.cloud/health-check-local-traffic: \"no\" is not a boolean (true or false)"
        );
    }
}
