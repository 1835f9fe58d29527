//! `spec.loadBalancerClass` and the ingress `ipMode`, end to end: the controller against the
//! real apiserver, which keeps both fields, validates the class (it may not change while the
//! Service is of type LoadBalancer) and drops it with the type. The writes the controller made
//! are read back from the Service, and counted in the apiserver's audit log.

use cloud_provider::service::OwnedClass;
use kube_harness::ControlPlane;

use super::*;

/// The class the controller under test owns.
const OURS: &str = "example.com/hcloud";
/// A class another implementation owns.
const OTHER: &str = "example.com/other";

/// Create a LoadBalancer Service of `env` with `class` in `spec.loadBalancerClass` and
/// `finalizers`; the apiserver keeps the class.
async fn create_classed(env: &Env, name: &str, class: Option<&str>, finalizers: &[&str]) {
    let mut svc = service(env, name, "LoadBalancer");
    if let Some(spec) = svc.spec.as_mut() {
        spec.load_balancer_class = class.map(str::to_owned);
    }
    svc.metadata.finalizers = Some(finalizers.iter().map(|f| (*f).to_owned()).collect());
    let created = services(env)
        .create(&PostParams::default(), &svc)
        .await
        .unwrap();
    assert_eq!(
        class_of(&created),
        class,
        "{name}: the apiserver keeps the class"
    );
}

/// [`create_classed`] with the cleanup finalizer (of whichever implementation added it).
async fn create_finalized(env: &Env, name: &str, class: Option<&str>) {
    create_classed(env, name, class, &[LOAD_BALANCER_CLEANUP_FINALIZER]).await;
}

fn class_of(svc: &Service) -> Option<&str> {
    svc.spec
        .as_ref()
        .and_then(|s| s.load_balancer_class.as_deref())
}

/// The controller on `env`'s Services, owning `class`, one worker (so the queue is worked in
/// order: a probe synced means everything before it was).
fn start_owning(env: &Env, lb: &Arc<FakeLb>, class: OwnedClass) {
    start_with(
        env,
        lb,
        ServiceControllerConfig {
            workers: 1,
            class,
            ..test_config()
        },
    );
}

/// Progress: a new Service of `class` is ensured and has its status. Everything the watch
/// delivered before it has been handled (one worker, changes in order).
async fn probe(env: &Env, name: &str, class: Option<&str>) {
    let reconciled = env.metrics.reconcile_count("service");
    create_classed(env, name, class, &[]).await;
    wait_ingress(env, name).await;
    wait_reason(env, name, "EnsuredLoadBalancer").await;
    eventually("the probe's reconcile finished", WAIT, || async {
        (env.metrics.reconcile_count("service") > reconciled).then_some(())
    })
    .await;
}

/// The Service `name` as the apiserver has it: untouched by the controller.
async fn assert_untouched(env: &Env, lb: &FakeLb, name: &str, finalizers: &[&str]) {
    assert_eq!(lb.calls_for(name), 0, "{name}: no cloud call");
    let svc = get_service(env, name).await.unwrap();
    assert_eq!(
        svc.metadata.finalizers.clone().unwrap_or_default(),
        finalizers,
        "{name}: finalizers as they were"
    );
    assert_eq!(ingress_ips(&svc), Vec::<String>::new(), "{name}: no status");
    assert_eq!(
        service_event_reasons(&env.client, env.namespace(), name).await,
        Vec::<String>::new(),
        "{name}: no event"
    );
}

/// A test scope with one Node (`n1`), cached.
async fn env_with_node() -> Env {
    let env = Env::start().await;
    let n1_node = node(&env, &env.name("n1")).await;
    env.wait_cached(&n1_node).await;
    env
}

/// [`env_with_node`] with the Service `web` of class [`OURS`] and the controller owning that
/// class, once `web` has its ingress (returned).
async fn web_of_ours() -> (Env, Arc<FakeLb>, Vec<String>) {
    let env = env_with_node().await;
    create_classed(&env, "web", Some(OURS), &[]).await;
    let lb = FakeLb::new(&env);
    start_owning(&env, &lb, OwnedClass::named(OURS));
    let ips = wait_ingress(&env, "web").await;
    (env, lb, ips)
}

/// One write the apiserver completed on a Service: verb, subresource (empty for the Service
/// itself) and the answer's status code.
type Write = (String, String, i64);

fn write(verb: &str, subresource: &str, code: i64) -> Write {
    (verb.to_owned(), subresource.to_owned(), code)
}

/// Every write on the Service `name` of `env` in the apiserver's audit log, oldest first.
fn service_writes(env: &Env, name: &str) -> Vec<Write> {
    let plane = ControlPlane::shared().unwrap();
    plane
        .audit_events()
        .iter()
        .filter(|e| {
            let object = &e["objectRef"];
            object["resource"] == "services"
                && object["namespace"] == env.namespace()
                && object["name"] == name
        })
        .map(|e| {
            let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
            (
                text(&e["verb"]),
                text(&e["objectRef"]["subresource"]),
                e["responseStatus"]["code"].as_i64().unwrap_or_default(),
            )
        })
        .collect()
}

/// The patches of `services/status` of the Service `name` the apiserver completed.
fn status_patches(env: &Env, name: &str) -> usize {
    service_writes(env, name)
        .iter()
        .filter(|w| **w == write("patch", "status", 200))
        .count()
}

/// The `ipMode` of each ingress of `svc`, as stored.
fn ip_modes(svc: &Service) -> Vec<Option<String>> {
    ingresses(svc).into_iter().map(|i| i.ip_mode).collect()
}

#[tokio::test]
async fn with_a_class_only_services_of_that_class_are_handled() {
    let env = env_with_node().await;
    let n1 = &*env.name("n1");
    create_classed(&env, "ours", Some(OURS), &[]).await;
    create_classed(&env, "classless", None, &[]).await;
    // Another implementation's Service, with the finalizer it added (the same name as ours).
    create_finalized(&env, "other", Some(OTHER)).await;
    create_finalized(&env, "other-gone", Some(OTHER)).await;
    // A class-less Service being deleted, its finalizer the default implementation's.
    create_finalized(&env, "classless-gone", None).await;
    for name in ["other-gone", "classless-gone"] {
        services(&env)
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
    }
    let lb = FakeLb::new(&env);
    start_owning(&env, &lb, OwnedClass::named(OURS));

    let ips = wait_ingress(&env, "ours").await;
    assert_eq!(ips, ["203.0.113.1"]);
    assert!(has_finalizer(&get_service(&env, "ours").await.unwrap()));
    assert_eq!(lb.ensures("ours"), [vec![n1.to_owned()]]);
    probe(&env, "probe", Some(OURS)).await;

    assert_untouched(&env, &lb, "classless", &[]).await;
    assert_untouched(&env, &lb, "other", &[LOAD_BALANCER_CLEANUP_FINALIZER]).await;
    for name in ["other-gone", "classless-gone"] {
        let svc = get_service(&env, name).await.unwrap();
        assert!(svc.metadata.deletion_timestamp.is_some());
        assert_untouched(&env, &lb, name, &[LOAD_BALANCER_CLEANUP_FINALIZER]).await;
    }

    // The node-driven target update reaches only this class's load balancers.
    let n2 = &*env.name("n2");
    node(&env, n2).await;
    eventually("targets of ours and the probe updated", WAIT, || async {
        (!lb.updates("ours").is_empty() && !lb.updates("probe").is_empty()).then_some(())
    })
    .await;
    assert_eq!(
        lb.updates("ours").last(),
        Some(&vec![n1.to_owned(), n2.to_owned()])
    );
    for name in ["classless", "other", "other-gone", "classless-gone"] {
        assert_eq!(lb.calls_for(name), 0, "{name}: no target update");
    }
}

#[tokio::test]
async fn without_a_class_services_of_any_class_are_never_touched() {
    let env = env_with_node().await;
    create_finalized(&env, "other", Some(OTHER)).await;
    create_classed(&env, "ours-elsewhere", Some(OURS), &[]).await;
    // Kubernetes' own controller would remove this finalizer (and delete "its" load balancer)
    // of a Service another implementation owns; this one leaves it to that implementation.
    create_finalized(&env, "other-gone", Some(OTHER)).await;
    services(&env)
        .delete("other-gone", &DeleteParams::default())
        .await
        .unwrap();
    let lb = FakeLb::new(&env);
    start_owning(&env, &lb, OwnedClass::default());

    probe(&env, "classless", None).await;
    assert!(has_finalizer(
        &get_service(&env, "classless").await.unwrap()
    ));
    assert_untouched(&env, &lb, "other", &[LOAD_BALANCER_CLEANUP_FINALIZER]).await;
    assert_untouched(&env, &lb, "ours-elsewhere", &[]).await;
    assert_untouched(&env, &lb, "other-gone", &[LOAD_BALANCER_CLEANUP_FINALIZER]).await;
}

#[tokio::test]
async fn a_service_that_leaves_the_class_through_another_type_is_let_go() {
    let (env, lb, _) = web_of_ours().await;
    assert!(has_finalizer(&get_service(&env, "web").await.unwrap()));

    // To ClusterIP: the apiserver drops the class with the type, the Service no longer says
    // whose it was; it was ours, so it is cleaned up as upstream does.
    to_cluster_ip(&env, "web").await;
    assert_eq!(
        class_of(&get_service(&env, "web").await.unwrap()),
        None,
        "the class went with the type"
    );
    wait_cleaned_up(&env, "web").await;
    assert_eq!(lb.deletes("web"), 1);
    wait_reason(&env, "web", "DeletedLoadBalancer").await;
    let calls = lb.calls_for("web");
    let events = service_event_reasons(&env.client, env.namespace(), "web")
        .await
        .len();

    // Back to LoadBalancer, now of another class (allowed with the type change): never
    // touched again.
    patch_service(
        &env,
        "web",
        json!({"spec": {"type": "LoadBalancer", "loadBalancerClass": OTHER}}),
    )
    .await;
    probe(&env, "probe", Some(OURS)).await;
    let web = get_service(&env, "web").await.unwrap();
    assert_eq!(class_of(&web), Some(OTHER));
    assert_eq!(lb.calls_for("web"), calls, "no cloud call");
    assert!(!has_finalizer(&web), "no finalizer added");
    assert!(ingress_ips(&web).is_empty(), "no status written");
    assert_eq!(
        service_event_reasons(&env.client, env.namespace(), "web")
            .await
            .len(),
        events,
        "no event"
    );
}

/// A LoadBalancer Service keeps its class: the apiserver refuses to change or remove it
/// (`may not change once set`). The controller never sees such a change, and keeps the
/// Service as it was.
#[tokio::test]
async fn the_apiserver_refuses_a_class_change_and_the_controller_keeps_the_service() {
    let (env, lb, ips) = web_of_ours().await;
    wait_reason(&env, "web", "EnsuredLoadBalancer").await;
    probe(&env, "probe", Some(OURS)).await;
    let calls = lb.calls_for("web");
    let events = service_event_reasons(&env.client, env.namespace(), "web").await;

    for class in [json!(OTHER), json!(null)] {
        let refused = services(&env)
            .patch(
                "web",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"loadBalancerClass": class}})),
            )
            .await
            .unwrap_err();
        let kube::Error::Api(status) = refused else {
            panic!("not an answer of the apiserver: {refused:?}");
        };
        assert_eq!(status.code, 422, "{status:?}");
        assert_eq!(status.reason, "Invalid", "{status:?}");
        assert!(
            status.message.contains("spec.loadBalancerClass"),
            "{status:?}"
        );
    }

    // Progress: a Service created after the refusals is ensured (one worker, in order).
    probe(&env, "probe-2", Some(OURS)).await;
    let web = get_service(&env, "web").await.unwrap();
    assert_eq!(class_of(&web), Some(OURS), "the class as it was");
    assert_eq!(lb.calls_for("web"), calls, "no cloud call");
    assert_eq!(lb.deletes("web"), 0, "the load balancer kept");
    assert!(has_finalizer(&web), "the finalizer kept");
    assert_eq!(ingress_ips(&web), ips, "the status kept");
    assert_eq!(
        service_event_reasons(&env.client, env.namespace(), "web").await,
        events,
        "no event"
    );
    // The apiserver's record: the test's create, the controller's finalizer and status, the
    // two refused patches; nothing written after them.
    let refusals = eventually("the refused patches audited", WAIT, || async {
        let writes = service_writes(&env, "web");
        (writes.iter().filter(|w| w.2 == 422).count() == 2).then_some(writes)
    })
    .await;
    assert_eq!(
        refusals,
        [
            write("create", "", 201),
            write("patch", "status", 200),
            write("patch", "status", 200),
            write("patch", "", 422),
            write("patch", "", 422),
        ]
    );
}

/// A PROXY-protocol load balancer's status says `ipMode: Proxy`: the apiserver stores it, and
/// since the stored status then equals the wanted one, a later ensure writes no status.
#[tokio::test]
async fn a_proxy_status_is_stored_with_its_ip_mode_and_written_once() {
    let env = env_with_node().await;
    let lb = FakeLb::new(&env);
    lb.state().ip_mode = Some("Proxy".into());
    start_owning(&env, &lb, OwnedClass::default());
    create_classed(&env, "web", None, &[]).await;
    assert_eq!(wait_ingress(&env, "web").await, ["203.0.113.1"]);
    let web = get_service(&env, "web").await.unwrap();
    assert_eq!(ip_modes(&web), [Some("Proxy".to_owned())]);
    // The controller's patches of the status: the finalizer, then the ingress.
    eventually(
        "the first ensure's status patches audited",
        WAIT,
        || async { (status_patches(&env, "web") >= 2).then_some(()) },
    )
    .await;
    assert_eq!(
        status_patches(&env, "web"),
        2,
        "{:?}",
        service_writes(&env, "web")
    );

    // Another ensure (an annotation changed): the stored status is the provider's, nothing to
    // write.
    patch_service(
        &env,
        "web",
        json!({"metadata": {"annotations": {"example.com/touch": "1"}}}),
    )
    .await;
    eventually("the second ensure", WAIT, || async {
        (lb.ensures("web").len() == 2).then_some(())
    })
    .await;
    probe(&env, "probe", None).await;
    // The probe's status patches come after whatever web's second sync wrote (one worker).
    eventually("the probe's status patches audited", WAIT, || async {
        (status_patches(&env, "probe") >= 2).then_some(())
    })
    .await;
    let writes = service_writes(&env, "web");
    assert_eq!(
        status_patches(&env, "web"),
        2,
        "no second status: {writes:?}"
    );
    assert_eq!(
        writes.last(),
        Some(&write("patch", "", 200)),
        "the annotation patch is the last write"
    );
    let web = get_service(&env, "web").await.unwrap();
    assert_eq!(ip_modes(&web), [Some("Proxy".to_owned())]);
    assert_eq!(ingress_ips(&web), ["203.0.113.1"]);
}
