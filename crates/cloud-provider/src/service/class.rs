//! Which Services the service controller owns, by `spec.loadBalancerClass`.
//!
//! Kubernetes' own controller handles only Services without a class: a class names another
//! implementation. [`OwnedClass`] generalises that rule to one named class (the binary's
//! `--load-balancer-class`): unset, the controller owns the Services without a class (the
//! upstream behaviour); set, it owns exactly the Services of that class and leaves those without
//! one to the cluster's default implementation.
//!
//! A Service of a class the controller does not own is never touched: not its finalizer (the
//! finalizer's name is shared by every implementation built on the upstream framework), not its
//! status, no event. The one exception is a Service that left type LoadBalancer: the apiserver
//! drops the class with the type, so such a Service no longer says whose it was, and the
//! controller cleans up after it as Kubernetes' own controller does (deletes its load balancer if
//! it has one, removes the cleanup finalizer).

use k8s_openapi::api::core::v1::Service;

use super::decisions::{SERVICE_TYPE_LOAD_BALANCER, service_type};

/// The `spec.loadBalancerClass` this controller owns; the default is none (Services without a
/// class, as upstream).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OwnedClass(Option<String>);

impl OwnedClass {
    /// Own the Services of exactly `class` (an empty name means none: Services without a class).
    pub fn named(class: impl Into<String>) -> Self {
        let class = class.into();
        Self((!class.is_empty()).then_some(class))
    }

    /// The owned class; `None`: Services without a class.
    pub fn name(&self) -> Option<&str> {
        self.0.as_deref()
    }

    /// Whether `service`'s class (absent or named) is the one this controller owns.
    pub fn owns(&self, service: &Service) -> bool {
        class_of(service) == self.name()
    }

    /// Whether the controller may act on `service` at all: its class is owned, or it is not of
    /// type LoadBalancer and carries no class (the apiserver drops the class with the type, so
    /// who owned it cannot be told; like Kubernetes' own controller, every implementation
    /// cleans up its own load balancer after it). A Service of another class is never touched.
    pub fn may_touch(&self, service: &Service) -> bool {
        self.owns(service)
            || (class_of(service).is_none() && service_type(service) != SERVICE_TYPE_LOAD_BALANCER)
    }
}

/// `spec.loadBalancerClass`, if set.
pub fn class_of(service: &Service) -> Option<&str> {
    service
        .spec
        .as_ref()
        .and_then(|s| s.load_balancer_class.as_deref())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ServiceSpec;

    fn service(type_: &str, class: Option<&str>) -> Service {
        Service {
            spec: Some(ServiceSpec {
                type_: Some(type_.into()),
                load_balancer_class: class.map(Into::into),
                ..ServiceSpec::default()
            }),
            ..Service::default()
        }
    }

    #[test]
    fn an_empty_name_is_no_class() {
        assert_eq!(OwnedClass::named(""), OwnedClass::default());
        assert_eq!(OwnedClass::named("hcloud").name(), Some("hcloud"));
    }

    #[test]
    fn ownership_table() {
        let unset = OwnedClass::default();
        let ours = OwnedClass::named("example.com/hcloud");
        // (case, service, owns and may touch when unset, ... when set)
        let cases = [
            (
                "LB without class",
                service("LoadBalancer", None),
                (true, true),
                (false, false),
            ),
            (
                "LB of our class",
                service("LoadBalancer", Some("example.com/hcloud")),
                (false, false),
                (true, true),
            ),
            (
                "LB of another class",
                service("LoadBalancer", Some("example.com/other")),
                (false, false),
                (false, false),
            ),
            (
                "ClusterIP (class dropped with the type)",
                service("ClusterIP", None),
                (true, true),
                (false, true),
            ),
            (
                "NodePort with a class (refused by real apiservers)",
                service("NodePort", Some("example.com/other")),
                (false, false),
                (false, false),
            ),
            ("no spec", Service::default(), (true, true), (false, true)),
        ];
        for (name, s, when_unset, when_set) in cases {
            assert_eq!(
                (unset.owns(&s), unset.may_touch(&s)),
                when_unset,
                "{name}, class unset"
            );
            assert_eq!(
                (ours.owns(&s), ours.may_touch(&s)),
                when_set,
                "{name}, class set"
            );
        }
    }
}
