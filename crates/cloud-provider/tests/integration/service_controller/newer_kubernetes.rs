//! Fields the test apiserver (Kubernetes 1.20) does not have, end to end: the controller
//! against the real apiserver, reading Services through a client that gives them
//! `spec.loadBalancerClass`, and writing a status whose `ipMode` that apiserver drops.
//!
//! The test control plane (Kubernetes 1.20) drops `loadBalancerClass`, so a Service created with
//! it would arrive without it. [`class_client`] wraps the test's client: every Service it reads
//! (a get, a list, each watch event, the answer to a patch) carries in `spec.loadBalancerClass`
//! the value of the annotation [`CLASS_ANNOTATION`], while it is of type LoadBalancer (as a
//! newer apiserver drops the class with the type). The controller's writes go to the apiserver
//! unchanged, so finalizers, status and events are the real ones; the wrapper records the
//! status patches it passes on.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex as StdMutex;
use std::task::{Context, Poll};

use bytes::Bytes;
use cloud_provider::service::OwnedClass;
use http_body::Frame;
use serde_json::Value;

use super::*;

/// The annotation whose value the wrapped client puts in `spec.loadBalancerClass`.
const CLASS_ANNOTATION: &str = "test.hcloud-ccm-rs/load-balancer-class";
/// The class the controller under test owns.
const OURS: &str = "example.com/hcloud";
/// A class another implementation owns.
const OTHER: &str = "example.com/other";

/// `client`, with every Service it reads carrying the class of its [`CLASS_ANNOTATION`], and
/// the bodies of the `services/status` patches it sends.
fn class_client(client: &Client) -> (Client, Arc<StdMutex<Vec<String>>>) {
    let namespace = client.default_namespace().to_owned();
    let patches = Arc::<StdMutex<Vec<String>>>::default();
    let wrapped = Client::new(
        InjectClasses {
            client: client.clone(),
            status_patches: patches.clone(),
        },
        namespace,
    );
    (wrapped, patches)
}

#[derive(Clone)]
struct InjectClasses {
    client: Client,
    status_patches: Arc<StdMutex<Vec<String>>>,
}

type Reply = http::Response<ClassBody>;

impl tower::Service<http::Request<kube::client::Body>> for InjectClasses {
    type Response = Reply;
    type Error = kube::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Reply, kube::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), kube::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<kube::client::Body>) -> Self::Future {
        let client = self.client.clone();
        let patches = self.status_patches.clone();
        Box::pin(async move {
            let is_status_patch = request.method() == http::Method::PATCH
                && request.uri().path().ends_with("/status");
            let request = if is_status_patch {
                let (parts, body) = request.into_parts();
                let bytes = body.collect_bytes().await?;
                patches
                    .lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(&bytes).into_owned());
                http::Request::from_parts(parts, kube::client::Body::from(bytes))
            } else {
                request
            };
            let response = client.send(request).await?;
            Ok(response.map(ClassBody::new))
        })
    }
}

/// A response body rewritten one JSON document (one line of a watch) at a time.
struct ClassBody {
    inner: kube::client::Body,
    partial: Vec<u8>,
    ready: VecDeque<Bytes>,
    ended: bool,
}

impl ClassBody {
    fn new(inner: kube::client::Body) -> Self {
        Self {
            inner,
            partial: Vec::new(),
            ready: VecDeque::new(),
            ended: false,
        }
    }

    fn take_lines(&mut self) {
        while let Some(end) = self.partial.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=end).collect();
            self.ready.push_back(rewrite(&line));
        }
    }
}

impl http_body::Body for ClassBody {
    type Data = Bytes;
    type Error = kube::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, kube::Error>>> {
        let this = &mut *self;
        loop {
            if let Some(data) = this.ready.pop_front() {
                return Poll::Ready(Some(Ok(Frame::data(data))));
            }
            if this.ended {
                return Poll::Ready(None);
            }
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Err(err))) => return Poll::Ready(Some(Err(err))),
                Poll::Ready(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        this.partial.extend_from_slice(&data);
                        this.take_lines();
                    }
                }
                Poll::Ready(None) => {
                    this.ended = true;
                    if !this.partial.is_empty() {
                        let rest = std::mem::take(&mut this.partial);
                        this.ready.push_back(rewrite(&rest));
                    }
                }
            }
        }
    }
}

/// One JSON document with the classes injected; anything else unchanged.
fn rewrite(document: &[u8]) -> Bytes {
    let Ok(mut value) = serde_json::from_slice::<Value>(document) else {
        return Bytes::copy_from_slice(document);
    };
    inject(&mut value);
    let mut out = serde_json::to_vec(&value).unwrap();
    if document.ends_with(b"\n") {
        out.push(b'\n');
    }
    Bytes::from(out)
}

fn inject(value: &mut Value) {
    match value.get("kind").and_then(Value::as_str) {
        Some("Service") => inject_service(value),
        Some("ServiceList") => {
            for item in value
                .get_mut("items")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                inject_service(item);
            }
        }
        _ => {
            if let Some(object) = value.get_mut("object") {
                inject(object);
            }
        }
    }
}

fn inject_service(service: &mut Value) {
    let class = service["metadata"]["annotations"][CLASS_ANNOTATION]
        .as_str()
        .map(str::to_owned);
    let spec = &mut service["spec"];
    if let (Some(class), Some("LoadBalancer")) = (class, spec["type"].as_str()) {
        spec["loadBalancerClass"] = Value::String(class);
    }
}

/// A LoadBalancer Service of `env` with `class` (through the annotation) and `finalizers`.
async fn create_classed(env: &Env, name: &str, class: Option<&str>, finalizers: &[&str]) {
    let mut svc = service(env, name, "LoadBalancer");
    if let Some(class) = class {
        svc.metadata.annotations = Some([(CLASS_ANNOTATION.to_owned(), class.to_owned())].into());
    }
    svc.metadata.finalizers = Some(finalizers.iter().map(|f| (*f).to_owned()).collect());
    Api::<Service>::namespaced(env.client.clone(), env.namespace())
        .create(&PostParams::default(), &svc)
        .await
        .unwrap();
}

/// [`create_classed`] with the cleanup finalizer (of whichever implementation added it).
async fn create_finalized(env: &Env, name: &str, class: Option<&str>) {
    create_classed(env, name, class, &[LOAD_BALANCER_CLEANUP_FINALIZER]).await;
}

/// The controller on `env`'s Services, owning `class`, reading through [`class_client`], one
/// worker (so the queue is worked in order: a probe synced means everything before it was).
fn start_owning(env: &Env, lb: &Arc<FakeLb>, class: OwnedClass) -> Arc<StdMutex<Vec<String>>> {
    let (client, status_patches) = class_client(&env.client);
    let controller = ServiceController::new(
        client,
        env.cache.clone(),
        lb.clone(),
        env.metrics.clone(),
        ServiceControllerConfig {
            scope: env.scope.clone(),
            workers: 1,
            class,
            ..test_config()
        },
    );
    tokio::spawn(controller.run(env.shutdown.clone()));
    status_patches
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

/// A test scope with one Node, cached.
async fn env_with_node() -> Env {
    let env = Env::start().await;
    let n1_node = node(&env, &env.name("n1")).await;
    env.wait_cached(&n1_node).await;
    env
}

#[tokio::test]
async fn with_a_class_only_services_of_that_class_are_handled() {
    let env = Env::start().await;
    let n1 = &*env.name("n1");
    let n1_node = node(&env, n1).await;
    env.wait_cached(&n1_node).await;
    create_classed(&env, "ours", Some(OURS), &[]).await;
    create_classed(&env, "classless", None, &[]).await;
    // Another implementation's Service, with the finalizer it added (the same name as ours).
    create_finalized(&env, "other", Some(OTHER)).await;
    create_finalized(&env, "other-gone", Some(OTHER)).await;
    // A class-less Service being deleted, its finalizer the default implementation's.
    create_finalized(&env, "classless-gone", None).await;
    let services = Api::<Service>::namespaced(env.client.clone(), env.namespace());
    for name in ["other-gone", "classless-gone"] {
        services
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
    }
    let lb = FakeLb::new(&env);
    let _ = start_owning(&env, &lb, OwnedClass::named(OURS));

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
    Api::<Service>::namespaced(env.client.clone(), env.namespace())
        .delete("other-gone", &DeleteParams::default())
        .await
        .unwrap();
    let lb = FakeLb::new(&env);
    let _ = start_owning(&env, &lb, OwnedClass::default());

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
    let env = env_with_node().await;
    create_classed(&env, "web", Some(OURS), &[]).await;
    let lb = FakeLb::new(&env);
    let _ = start_owning(&env, &lb, OwnedClass::named(OURS));
    wait_ingress(&env, "web").await;
    assert!(has_finalizer(&get_service(&env, "web").await.unwrap()));

    // To ClusterIP: the class goes with the type (the apiserver drops it), the Service no
    // longer says whose it was; it was ours, so it is cleaned up as upstream does.
    patch_service(
        &env,
        "web",
        json!({"spec": {
            "type": "ClusterIP",
            "externalTrafficPolicy": null,
            "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80}],
        }}),
    )
    .await;
    eventually("finalizer removed and status cleared", WAIT, || async {
        let svc = get_service(&env, "web").await?;
        (!has_finalizer(&svc) && ingress_ips(&svc).is_empty()).then_some(())
    })
    .await;
    assert_eq!(lb.deletes("web"), 1);
    wait_reason(&env, "web", "DeletedLoadBalancer").await;
    let calls = lb.calls_for("web");
    let events = service_event_reasons(&env.client, env.namespace(), "web")
        .await
        .len();

    // Back to LoadBalancer, now of another class: never touched again.
    patch_service(
        &env,
        "web",
        json!({
            "metadata": {"annotations": {CLASS_ANNOTATION: OTHER}},
            "spec": {"type": "LoadBalancer"},
        }),
    )
    .await;
    probe(&env, "probe", Some(OURS)).await;
    assert_eq!(lb.calls_for("web"), calls, "no cloud call");
    let web = get_service(&env, "web").await.unwrap();
    assert!(!has_finalizer(&web), "no finalizer added");
    assert_eq!(
        service_event_reasons(&env.client, env.namespace(), "web")
            .await
            .len(),
        events,
        "no event"
    );
}

#[tokio::test]
async fn a_class_change_seen_in_one_step_deletes_the_load_balancer_and_touches_nothing_else() {
    let env = env_with_node().await;
    create_classed(&env, "web", Some(OURS), &[]).await;
    let lb = FakeLb::new(&env);
    let _ = start_owning(&env, &lb, OwnedClass::named(OURS));
    let ips = wait_ingress(&env, "web").await;
    wait_reason(&env, "web", "EnsuredLoadBalancer").await;
    let events = service_event_reasons(&env.client, env.namespace(), "web").await;

    // A real apiserver refuses this change; a watch that missed the type changes between
    // (ClusterIP and back, with the other class) shows it as one step.
    patch_service(
        &env,
        "web",
        json!({"metadata": {"annotations": {CLASS_ANNOTATION: OTHER}}}),
    )
    .await;
    eventually("the load balancer deleted", WAIT, || async {
        (lb.deletes("web") == 1).then_some(())
    })
    .await;
    probe(&env, "probe", Some(OURS)).await;
    let web = get_service(&env, "web").await.unwrap();
    assert!(
        has_finalizer(&web),
        "the finalizer may be the new owner's: it stays"
    );
    assert_eq!(
        ingress_ips(&web),
        ips,
        "the status is the new owner's to write"
    );
    assert_eq!(
        service_event_reasons(&env.client, env.namespace(), "web").await,
        events,
        "no event on a Service of another class"
    );
}

#[tokio::test]
async fn a_proxy_status_is_written_once_where_the_apiserver_drops_ip_mode() {
    let env = env_with_node().await;
    let lb = FakeLb::new(&env);
    // A load balancer with the PROXY protocol on: its provider status says ipMode Proxy.
    lb.state().ip_mode = Some("Proxy".into());
    let status_patches = start_owning(&env, &lb, OwnedClass::default());
    create_classed(&env, "web", None, &[]).await;
    assert_eq!(wait_ingress(&env, "web").await, ["203.0.113.1"]);
    let written = |patches: &StdMutex<Vec<String>>| -> Vec<String> {
        patches
            .lock()
            .unwrap()
            .iter()
            .filter(|p| p.contains("loadBalancer"))
            .cloned()
            .collect()
    };
    let first = written(&status_patches);
    assert_eq!(first.len(), 1, "{first:?}");
    assert!(
        !first[0].contains("ipMode"),
        "no ipMode sent to an apiserver that drops it: {first:?}"
    );

    // Another ensure (an annotation changed): the stored status has no ipMode, as the
    // apiserver keeps it; nothing to write.
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
    assert_eq!(written(&status_patches).len(), 2, "the probe's status only");
    assert!(
        written(&status_patches)[1].contains("203.0.113.2"),
        "{:?}",
        written(&status_patches)
    );
}
