//! Load balancer names and the label tying a load balancer to its Service.

use cloud_provider::provider::default_load_balancer_name;
use k8s_openapi::api::core::v1::Service;

use super::annotations::Annotations;

/// Label on every load balancer of this CCM (and the official one): the Service UID.
pub const SERVICE_UID_LABEL: &str = "hcloud-ccm/service-uid";

/// The name of `service`'s load balancer: the `name` annotation, else [`default_name`].
pub fn load_balancer_name(service: &Service, annotations: &Annotations) -> String {
    annotations
        .name_lenient()
        .unwrap_or_else(|| default_name(service))
}

/// `"a"` + the Service UID without dashes, cut to 32 characters (Kubernetes' default name).
pub fn default_name(service: &Service) -> String {
    default_load_balancer_name(service)
}

/// The label selector finding `uid`'s load balancer.
pub fn uid_selector(uid: &str) -> String {
    format!("{SERVICE_UID_LABEL}={uid}")
}

/// `namespace/name` of a Service, for messages.
pub fn service_key(service: &Service) -> String {
    format!(
        "{}/{}",
        service.metadata.namespace.as_deref().unwrap_or_default(),
        service.metadata.name.as_deref().unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load_balancers::annotations::keys;

    #[test]
    fn name_from_annotation_or_uid() {
        let mut svc = Service::default();
        svc.metadata.uid = Some("0f2f6c0e-1b2a-4c3d-9e8f-0123456789ab".into());
        let none = Annotations::default();
        assert_eq!(
            load_balancer_name(&svc, &none),
            "a0f2f6c0e1b2a4c3d9e8f0123456789a"
        );
        let named = Annotations::new(
            &[(keys::NAME.to_owned(), "web".to_owned())]
                .into_iter()
                .collect(),
        );
        assert_eq!(load_balancer_name(&svc, &named), "web");
        assert_eq!(uid_selector("0f2f"), "hcloud-ccm/service-uid=0f2f");
    }
}
