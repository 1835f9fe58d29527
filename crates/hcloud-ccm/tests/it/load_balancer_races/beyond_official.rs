//! Beyond the official CCM, through the real binary on the control plane: a Service with
//! `externalTrafficPolicy: Local` (the apiserver allocates its `healthCheckNodePort`) gets a
//! load balancer that checks kube-proxy's `/healthz` on that port, switching the policy back
//! to Cluster restores the TCP check on each NodePort, the `labels` and `protection-delete`
//! annotations reach the load balancer, and deleting the Service keeps the protected load
//! balancer with a `DeleteProtected` Warning on the Service.

use k8s_openapi::api::core::v1::Event;

use super::*;

/// Every service's health check of the only load balancer as `(protocol, port, path)`, once
/// `ready` accepts them.
async fn checks_when(
    sim: &Simulator,
    what: &str,
    ready: impl Fn(&[(String, i64, String)]) -> bool,
) -> Value {
    let admin = sim.admin();
    eventually(what, Duration::from_secs(40), || async {
        let state = admin.state().await.unwrap();
        let lb = state["load_balancers"].as_array()?.first()?.clone();
        let checks: Vec<(String, i64, String)> = lb["services"]
            .as_array()?
            .iter()
            .map(|s| {
                let hc = &s["health_check"];
                (
                    hc["protocol"].as_str().unwrap_or_default().to_owned(),
                    hc["port"].as_i64().unwrap_or_default(),
                    hc["http"]["path"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        (!checks.is_empty() && ready(&checks)).then_some(lb)
    })
    .await
}

#[tokio::test]
async fn local_traffic_labels_and_protection_through_the_binary() {
    let setup = Setup::start(1, &[]).await;
    let sim = &setup.sim;
    setup.add_node(0).await;

    let service: Service = serde_json::from_value(json!({
        "metadata": {
            "name": "web",
            "annotations": {
                "load-balancer.hetzner.cloud/labels": "team=a,env=prod",
                "load-balancer.hetzner.cloud/protection-delete": "true",
            },
        },
        "spec": {
            "type": "LoadBalancer",
            "externalTrafficPolicy": "Local",
            "ports": [
                {"name": "http", "port": 80, "protocol": "TCP"},
                {"name": "https", "port": 443, "protocol": "TCP"},
            ],
        },
    }))
    .unwrap();
    let created = setup.scope.create_service(service).await;
    let spec = created.spec.clone().unwrap();
    let hc_port = i64::from(
        spec.health_check_node_port
            .expect("allocated by the apiserver"),
    );
    let node_ports: Vec<i64> = spec
        .ports
        .unwrap()
        .iter()
        .map(|p| i64::from(p.node_port.unwrap()))
        .collect();

    let lb = checks_when(sim, "the local check on every service", |checks| {
        checks
            .iter()
            .all(|c| *c == ("http".to_owned(), hc_port, "/healthz".to_owned()))
    })
    .await;
    assert_eq!(lb["services"].as_array().unwrap().len(), 2, "{lb}");
    let protected = || async {
        let state = sim.admin().state().await.unwrap();
        let lb = state["load_balancers"][0].clone();
        (lb["protection"]["delete"] == true).then_some(lb)
    };
    let lb = eventually("delete protection", Duration::from_secs(40), protected).await;
    assert_eq!(lb["labels"]["team"], "a");
    assert_eq!(lb["labels"]["env"], "prod");

    // Back to Cluster: the apiserver drops the healthCheckNodePort, the check goes back to
    // TCP on each NodePort.
    let services = setup.services();
    services
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"externalTrafficPolicy": "Cluster"}})),
        )
        .await
        .unwrap();
    checks_when(sim, "the TCP check on each NodePort", |checks| {
        let ports: Vec<i64> = checks.iter().map(|c| c.1).collect();
        checks.iter().all(|c| c.0 == "tcp") && ports == node_ports
    })
    .await;

    // Deleted: the Service goes, the protected load balancer stays, a Warning says why.
    services
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the Service released", Duration::from_secs(40), || async {
        services
            .get_opt("web")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    let events: Api<Event> = Api::namespaced(setup.admin.clone(), setup.scope.namespace());
    let warning = eventually(
        "the DeleteProtected Warning",
        Duration::from_secs(20),
        || async {
            events
                .list(&ListParams::default().fields("involvedObject.name=web"))
                .await
                .unwrap()
                .items
                .into_iter()
                .find(|e| e.reason.as_deref() == Some("DeleteProtected"))
        },
    )
    .await;
    assert_eq!(warning.type_.as_deref(), Some("Warning"));
    assert!(
        warning
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("is kept: it has delete protection"),
        "{warning:?}"
    );
    let state = sim.admin().state().await.unwrap();
    assert_eq!(
        state["load_balancers"].as_array().unwrap().len(),
        1,
        "{state}"
    );
}
