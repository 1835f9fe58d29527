//! Several clusters in one project (`HCLOUD_LOAD_BALANCERS_CLUSTER_NAME`) against the
//! simulator: the cluster label on what is created, load balancers made before the name was
//! set kept and labelled (shown by plan first), another cluster's load balancers never
//! touched, and orphans listed and deleted only when asked.

use std::collections::HashSet;

use hcloud_provider::load_balancers::CLUSTER_NAME_LABEL;

use super::*;

fn named(cluster: &str) -> LoadBalancerSettings {
    LoadBalancerSettings {
        cluster_name: Some(cluster.into()),
        ..located()
    }
}

fn label<'a>(lb: &'a models::LoadBalancer, key: &str) -> Option<&'a str> {
    lb.labels.get(key).map(String::as_str)
}

/// A load balancer made behind the provider's back (the console, another cluster's CCM).
async fn made_elsewhere(env: &Env, name: &str, labels: &[(&str, &str)]) -> models::LoadBalancer {
    let created = env
        .client
        .load_balancers()
        .create(&models::CreateLoadBalancerRequest {
            name: name.into(),
            load_balancer_type: "lb11".into(),
            location: Some("fsn1".into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            ),
            ..models::CreateLoadBalancerRequest::default()
        })
        .await
        .unwrap();
    env.client.actions().wait(&created.action).await.unwrap();
    created.load_balancer
}

/// An HTTPS Service with a managed certificate.
fn managed_https() -> Service {
    service(
        &[(443, "TCP", 30443)],
        &[
            ("protocol", "https"),
            ("certificate-type", "managed"),
            ("http-managed-certificate-domains", "shop.example.com"),
        ],
    )
}

async fn certificates(env: &Env) -> Vec<models::Certificate> {
    env.client
        .certificates()
        .list_all(&hcloud_api::api::params::ListCertificatesParams::default())
        .await
        .unwrap()
}

/// Ensure `svc` fails, refused (no retry helps), naming the other cluster `b`.
async fn refused_for_cluster_b(env: &Env, lbs: &HcloudLoadBalancers, svc: &Service) {
    let err = lbs
        .ensure_load_balancer(CLUSTER, svc, &[env.node(0)])
        .await
        .unwrap_err();
    assert_eq!(err.category(), Category::Rejected, "{err}");
    assert!(err.to_string().contains("cluster \"b\""), "{err}");
}

#[tokio::test]
async fn a_named_cluster_labels_what_it_creates_and_lists_only_its_own() {
    let env = Env::start().await;
    // Another cluster's load balancer in the same project.
    let foreign = made_elsewhere(&env, "other", &[(CLUSTER_NAME_LABEL, "b")]).await;
    let lbs = env
        .lbs_keeping(named("a"), false, Duration::from_secs(60))
        .await;
    let svc = managed_https();
    lbs.ensure_load_balancer(CLUSTER, &svc, &[env.node(0)])
        .await
        .unwrap();
    let ours: Vec<_> = env
        .all()
        .await
        .into_iter()
        .filter(|lb| lb.id != foreign.id)
        .collect();
    assert_eq!(ours.len(), 1, "{ours:#?}");
    assert_eq!(label(&ours[0], CLUSTER_NAME_LABEL), Some("a"));
    assert_eq!(label(&ours[0], SERVICE_UID_LABEL), Some(UID));
    let certificates = certificates(&env).await;
    assert_eq!(certificates.len(), 1);
    assert_eq!(
        certificates[0]
            .labels
            .get(CLUSTER_NAME_LABEL)
            .map(String::as_str),
        Some("a"),
        "the managed certificate carries the cluster label too"
    );
    // A second ensure is answered by one listing of this cluster's load balancers.
    let fresh = env
        .lbs_keeping(named("a"), false, Duration::from_secs(60))
        .await;
    env.sim.admin().reset_request_counts().await.unwrap();
    fresh
        .ensure_load_balancer(CLUSTER, &svc, &[env.node(0)])
        .await
        .unwrap();
    let counts = env.counts().await;
    assert_eq!(counts.get("GET /load_balancers"), Some(&1), "{counts:?}");

    // That listing does not show the other cluster's load balancer: a Service named like it
    // finds it only by asking the API (its UID label, then its name), and leaves it alone.
    let svc = service(&[(80, "TCP", 30080)], &[("name", "other")]);
    let mut other_svc = svc.clone();
    other_svc.metadata.uid = Some("11111111-2222-3333-4444-555555555555".into());
    env.sim.admin().reset_request_counts().await.unwrap();
    let planned = fresh
        .plan_load_balancer(CLUSTER, &other_svc, &[env.node(0)])
        .await
        .unwrap();
    let counts = env.counts().await;
    assert_eq!(
        counts.get("GET /load_balancers"),
        Some(&2),
        "by UID label and by name, beside the fresh listing: {counts:?}"
    );
    assert!(planned.writes.is_empty(), "{planned:#?}");
    assert_eq!(
        planned
            .warnings
            .iter()
            .map(|w| w.reason.as_str())
            .collect::<Vec<_>>(),
        [
            "LoadBalancerTypeUnconfigured",
            "LoadBalancerOwnedByOtherCluster"
        ],
        "{planned:#?}"
    );
    refused_for_cluster_b(&env, &fresh, &other_svc).await;
    let after = env.client.load_balancers().get(foreign.id).await.unwrap();
    assert_eq!(after.labels, foreign.labels);
    assert_eq!(env.all().await.len(), 2, "nothing created");
}

#[tokio::test]
async fn naming_a_running_cluster_keeps_its_load_balancers_and_plan_shows_the_label() {
    let env = Env::start().await;
    // Made while no cluster name was set.
    let before = env.lbs().await;
    let svc = service(&[(80, "TCP", 30080)], &[]);
    before
        .ensure_load_balancer(CLUSTER, &svc, &[env.node(0)])
        .await
        .unwrap();
    assert_eq!(label(&env.only().await, CLUSTER_NAME_LABEL), None);
    // A hand-made one with the name of a second Service (adopted by name, as before).
    made_elsewhere(&env, "by-hand", &[]).await;

    let lbs = env.lbs_with(named("a"), false).await;
    let planned = lbs
        .plan_load_balancer(CLUSTER, &svc, &[env.node(0)])
        .await
        .unwrap();
    let changes: Vec<String> = planned.changes.iter().map(|c| c.target.clone()).collect();
    assert_eq!(
        changes,
        [format!(
            "set label {SERVICE_UID_LABEL}={UID}, set label {CLUSTER_NAME_LABEL}=a"
        )],
        "{planned:#?}"
    );
    // Plan named exactly the request ensure makes: the label, nothing created.
    let made = super::plan_then_ensure(&env, &lbs, &svc, &[env.node(0)]).await;
    assert_eq!(made, ["PUT /load_balancers/{id}"]);
    let all = env.all().await;
    assert_eq!(all.len(), 2, "{all:#?}");
    let kept = all.iter().find(|lb| lb.name == DEFAULT_NAME).unwrap();
    assert_eq!(label(kept, CLUSTER_NAME_LABEL), Some("a"));

    let mut by_hand = service(&[(80, "TCP", 30081)], &[("name", "by-hand")]);
    by_hand.metadata.uid = Some("22222222-3333-4444-5555-666666666666".into());
    lbs.ensure_load_balancer(CLUSTER, &by_hand, &[env.node(0)])
        .await
        .unwrap();
    let all = env.all().await;
    assert_eq!(all.len(), 2, "adopted, not created: {all:#?}");
    let adopted = all.iter().find(|lb| lb.name == "by-hand").unwrap();
    assert_eq!(label(adopted, CLUSTER_NAME_LABEL), Some("a"));
    assert_eq!(
        label(adopted, SERVICE_UID_LABEL),
        Some("22222222-3333-4444-5555-666666666666")
    );
}

#[tokio::test]
async fn another_clusters_load_balancer_with_the_services_uid_is_never_touched() {
    // A cluster restored from another's backup has the same Service UIDs.
    let env = Env::start().await;
    let theirs = made_elsewhere(
        &env,
        DEFAULT_NAME,
        &[(SERVICE_UID_LABEL, UID), (CLUSTER_NAME_LABEL, "b")],
    )
    .await;
    let lbs = env.lbs_with(named("a"), false).await;
    let svc = service(&[(80, "TCP", 30080)], &[]);
    assert_eq!(lbs.get_load_balancer(CLUSTER, &svc).await.unwrap(), None);
    refused_for_cluster_b(&env, &lbs, &svc).await;
    // Deleting the Service here releases it without deleting theirs.
    lbs.ensure_load_balancer_deleted(CLUSTER, &svc)
        .await
        .unwrap();
    let after = env.only().await;
    assert_eq!(after.id, theirs.id);
    assert_eq!(after.labels, theirs.labels);
    assert!(after.services.is_empty() && after.targets.is_empty());
}

#[tokio::test]
async fn orphans_are_listed_and_deleted_only_when_asked() {
    let env = Env::start().await;
    let lbs = env.lbs_with(named("a"), false).await;
    let svc = managed_https();
    lbs.ensure_load_balancer(CLUSTER, &svc, &[env.node(0)])
        .await
        .unwrap();
    // Another cluster's load balancer whose Service is unknown here, and an unlabelled one.
    made_elsewhere(
        &env,
        "theirs",
        &[(CLUSTER_NAME_LABEL, "b"), (SERVICE_UID_LABEL, "x")],
    )
    .await;
    made_elsewhere(&env, "console", &[]).await;

    let live: HashSet<String> = [UID.to_owned()].into();
    assert_eq!(lbs.orphans(&live).await.unwrap(), Some(Vec::new()));
    let found = lbs.orphans(&HashSet::new()).await.unwrap().unwrap();
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].lb.name, DEFAULT_NAME);
    assert_eq!(found[0].service_uid.as_deref(), Some(UID));
    // Without a cluster name nothing is anyone's orphan.
    assert_eq!(
        env.lbs().await.orphans(&HashSet::new()).await.unwrap(),
        None
    );
    assert_eq!(env.all().await.len(), 3, "listing deleted nothing");

    assert!(lbs.delete_orphan(&found[0]).await.unwrap());
    let names: Vec<String> = env.all().await.into_iter().map(|lb| lb.name).collect();
    assert_eq!(names.len(), 2);
    assert!(!names.contains(&DEFAULT_NAME.to_owned()), "{names:?}");
    assert!(
        certificates(&env).await.is_empty(),
        "its managed certificate goes with it"
    );
}
