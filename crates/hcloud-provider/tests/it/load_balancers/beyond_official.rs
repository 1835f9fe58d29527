//! Beyond the official CCM, end to end on the simulator: the health check of a Service with
//! `externalTrafficPolicy: Local`, the `labels` and `protection-delete` annotations, and a
//! protected load balancer whose Service is deleted. Each change is planned first: plan names
//! exactly the requests ensure then makes.

use super::*;

fn local(mut svc: Service, health_check_node_port: i32) -> Service {
    if let Some(spec) = svc.spec.as_mut() {
        spec.external_traffic_policy = Some("Local".into());
        spec.health_check_node_port = Some(health_check_node_port);
    }
    svc
}

/// Every service's health check as `(listen port, protocol, port, path)`.
fn checks(lb: &models::LoadBalancer) -> Vec<(u16, String, u16, Option<String>)> {
    lb.services
        .iter()
        .map(|s| {
            let hc = s.health_check.clone().unwrap();
            (
                s.listen_port,
                hc.protocol.to_string(),
                hc.port,
                hc.http.and_then(|h| h.path),
            )
        })
        .collect()
}

/// Every certificate of the project, lowest ID first.
async fn all_certificates(env: &Env) -> Vec<models::Certificate> {
    let mut all = env
        .client
        .certificates()
        .list_all(&hcloud_api::api::params::ListCertificatesParams::default())
        .await
        .unwrap();
    all.sort_by_key(|c| c.id);
    all
}

/// The certificate IDs the services of the only load balancer carry.
async fn carried_certificates(env: &Env) -> Vec<i64> {
    env.only()
        .await
        .services
        .iter()
        .filter_map(|s| s.http.as_ref())
        .flat_map(|h| h.certificates.clone())
        .collect()
}

/// The message of the user error ensure fails `svc` with.
async fn user_error(lbs: &HcloudLoadBalancers, svc: &Service, nodes: &[Arc<Node>]) -> String {
    let err = lbs
        .ensure_load_balancer(CLUSTER, svc, nodes)
        .await
        .unwrap_err();
    assert_eq!(err.category(), Category::User, "{err}");
    err.to_string()
}

#[tokio::test]
async fn the_local_policy_checks_kube_proxy_and_switching_back_restores_the_tcp_check() {
    let env = Env::start().await;
    let lbs = env.lbs().await;
    let nodes = [env.node(0), env.node(1)];
    let ports = [(80, "TCP", 30080), (443, "TCP", 30443)];

    // Created with the local check in the one creation request.
    let svc = local(service(&ports, &[]), 32100);
    let made = plan_then_ensure(&env, &lbs, &svc, &nodes).await;
    assert_eq!(made, vec!["POST /load_balancers".to_owned()]);
    let healthz = Some("/healthz".to_owned());
    assert_eq!(
        checks(&env.only().await),
        vec![
            (80, "http".into(), 32100, healthz.clone()),
            (443, "http".into(), 32100, healthz.clone()),
        ]
    );

    // Back to Cluster: the official TCP check on each NodePort, one update per service.
    let cluster = service(&ports, &[]);
    let made = plan_then_ensure(&env, &lbs, &cluster, &nodes).await;
    assert_eq!(
        made,
        vec!["POST /load_balancers/{id}/actions/update_service".to_owned(); 2]
    );
    assert_eq!(
        checks(&env.only().await),
        vec![
            (80, "tcp".into(), 30080, None),
            (443, "tcp".into(), 30443, None)
        ]
    );

    // Local again, with the opt-out: nothing changes.
    let opted_out = local(
        service(&ports, &[("health-check-local-traffic", "false")]),
        32100,
    );
    assert!(
        plan_then_ensure(&env, &lbs, &opted_out, &nodes)
            .await
            .is_empty()
    );

    // Local with the check tuned: the local check with that interval.
    let tuned = local(service(&ports, &[("health-check-interval", "7s")]), 32100);
    let made = plan_then_ensure(&env, &lbs, &tuned, &nodes).await;
    assert_eq!(made.len(), 2, "{made:?}");
    let lb = env.only().await;
    assert_eq!(checks(&lb)[0], (80, "http".into(), 32100, healthz));
    assert_eq!(lb.services[0].health_check.as_ref().unwrap().interval, 7);

    // A bad opt-out value names the annotation and changes nothing.
    let bad = local(
        service(&ports, &[("health-check-local-traffic", "nope")]),
        32100,
    );
    let err = user_error(&lbs, &bad, &nodes).await;
    assert!(
        err.contains("load-balancer.hetzner.cloud/health-check-local-traffic: \"nope\""),
        "{err}"
    );
}

#[tokio::test]
async fn labels_and_delete_protection_follow_the_annotations_and_leave_the_rest() {
    let env = Env::start().await;
    let lbs = env.lbs().await;
    let nodes = [env.node(0)];
    let ports = [(80, "TCP", 30080)];

    // Created with the labels; the protection is one action after the creation.
    let svc = service(
        &ports,
        &[("labels", "team=a,env=prod"), ("protection-delete", "true")],
    );
    let made = plan_then_ensure(&env, &lbs, &svc, &nodes).await;
    assert_eq!(
        made,
        vec![
            "POST /load_balancers".to_owned(),
            "POST /load_balancers/{id}/actions/change_protection".to_owned(),
        ]
    );
    let lb = env.only().await;
    assert!(lb.protection.delete);
    let label = |lb: &models::LoadBalancer, key: &str| lb.labels.get(key).cloned();
    assert_eq!(label(&lb, "team").as_deref(), Some("a"));
    assert_eq!(label(&lb, SERVICE_UID_LABEL).as_deref(), Some(UID));

    // Someone adds a label in the Console; the annotation changes one label, removes one,
    // and no longer names protection (left on).
    let mut by_hand = lb.labels.clone();
    by_hand.insert("console".into(), "x".into());
    env.client
        .load_balancers()
        .update(
            lb.id,
            &models::UpdateRequest {
                name: None,
                labels: Some(by_hand),
            },
        )
        .await
        .unwrap();
    let svc = service(&ports, &[("labels", "team=b,env-")]);
    let made = plan_then_ensure(&env, &lbs, &svc, &nodes).await;
    assert_eq!(made, vec!["PUT /load_balancers/{id}".to_owned()]);
    let lb = env.only().await;
    let want: models::Labels = [(SERVICE_UID_LABEL, UID), ("team", "b"), ("console", "x")]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    assert_eq!(lb.labels, want);
    assert!(lb.protection.delete);

    // Our own label cannot be overridden: the sync fails naming the annotation.
    let ours = service(&ports, &[("labels", "hcloud-ccm/service-uid=other")]);
    let err = user_error(&lbs, &ours, &nodes).await;
    assert!(
        err.contains("load-balancer.hetzner.cloud/labels: \"hcloud-ccm/service-uid=other\""),
        "{err}"
    );

    // Deleting the Service keeps the protected load balancer, as the official CCM does, and
    // plan says so with the Warning ensure publishes.
    let planned = lbs.plan_load_balancer_deleted(CLUSTER, &svc).await.unwrap();
    assert!(planned.writes.is_empty(), "{planned:#?}");
    assert_eq!(planned.warnings.len(), 1, "{planned:#?}");
    assert_eq!(planned.warnings[0].reason, "DeleteProtected");
    assert!(
        planned.warnings[0]
            .message
            .contains("is kept: it has delete protection"),
        "{planned:#?}"
    );
    lbs.ensure_load_balancer_deleted(CLUSTER, &svc)
        .await
        .unwrap();
    assert_eq!(env.only().await.id, lb.id);

    // Turned off by the annotation, the next deletion deletes it.
    let svc = service(&ports, &[("protection-delete", "false")]);
    let made = plan_then_ensure(&env, &lbs, &svc, &nodes).await;
    assert_eq!(
        made,
        vec!["POST /load_balancers/{id}/actions/change_protection".to_owned()]
    );
    lbs.ensure_load_balancer_deleted(CLUSTER, &svc)
        .await
        .unwrap();
    assert!(env.all().await.is_empty());
}

/// A server without a public IPv4 that this process has not seen (the load balancers here have
/// no server cache): the API refuses it as a public target, on creation and as a step. The load
/// balancer is made with the other target, and the Node gets the Warning, once per change.
#[tokio::test]
async fn a_refused_target_without_a_public_ipv4_is_left_out_with_a_warning_on_its_node() {
    let env = Env::start().await;
    let kube = kube_harness::ControlPlane::shared()
        .unwrap()
        .client()
        .await
        .unwrap();
    let bare = env
        .sim
        .admin()
        .create_server(ServerSeed {
            public_ipv4: false,
            ..ServerSeed::new("bare")
        })
        .await
        .unwrap();
    let bare_id = bare["id"].as_i64().unwrap();
    let bare_node = kube_harness::unique_name("bare");
    let nodes = [
        env.node(0),
        node(&bare_node, &format!("hcloud://{bare_id}"), &[]),
    ];
    let lbs = env.lbs_recording(&kube, false).await;
    let svc = service(&[(80, "TCP", 30080)], &[]);
    lbs.ensure_load_balancer(CLUSTER, &svc, &nodes)
        .await
        .unwrap()
        .done()
        .unwrap();
    let lb = env.only().await;
    let servers: Vec<i64> = lb
        .targets
        .iter()
        .filter_map(|t| t.server.as_ref().map(|s| s.id))
        .collect();
    assert_eq!(servers, [env.servers[0]], "{lb:#?}");
    let warned = kube_harness::eventually(
        "the ServerWithoutPublicIPv4 Warning",
        crate::support::WAIT,
        || async {
            let found = crate::support::events_with_reason(
                &kube,
                "default",
                &bare_node,
                hcloud_provider::load_balancers::reasons::SERVER_WITHOUT_PUBLIC_IPV4,
            )
            .await;
            (!found.is_empty()).then_some(found)
        },
    )
    .await;
    let message = warned[0].message.clone().unwrap_or_default();
    assert!(
        message.contains(&format!(
            "the API refused its server (ID {bare_id}) as a public target, it has no public IPv4"
        )),
        "{message}"
    );
    // Updated with the same Nodes: the others stay, no failure.
    lbs.update_load_balancer(CLUSTER, &svc, &nodes)
        .await
        .unwrap();
    assert_eq!(env.only().await.targets.len(), 1);
}

/// Edited domains of a managed certificate (the official CCM keeps the first certificate): one
/// for the new domains is made under a name of its own, waited for, swapped into the service,
/// and only then is the old one deleted. `plan` names exactly those writes.
#[tokio::test]
async fn edited_managed_certificate_domains_swap_in_a_new_certificate_before_the_old_one_goes() {
    let env = Env::start().await;
    env.issue_certificates(
        hcloud_sim::CertificateIssuance::default().delay(Duration::from_millis(50)),
    )
    .await;
    let lbs = env.lbs().await;
    let nodes = [env.node(0)];
    let https = |domains: &str| {
        service(
            &[(443, "TCP", 30443)],
            &[
                ("protocol", "https"),
                ("certificate-type", "managed"),
                ("http-managed-certificate-domains", domains),
            ],
        )
    };
    let certificates = || all_certificates(&env);
    let carried = || carried_certificates(&env);
    plan_then_ensure(&env, &lbs, &https("a.example.com"), &nodes).await;
    let [first] = certificates().await.try_into().unwrap();
    assert_eq!(first.domain_names, ["a.example.com"]);
    assert_eq!(carried().await, [first.id]);

    let made = plan_then_ensure(&env, &lbs, &https("a.example.com,b.example.com"), &nodes).await;
    assert_eq!(
        made,
        [
            "DELETE /certificates/{id}",
            "POST /certificates",
            "POST /load_balancers/{id}/actions/update_service",
        ],
        "created, swapped in, the old one deleted"
    );
    let [second] = certificates().await.try_into().unwrap();
    assert_ne!(second.id, first.id);
    assert_eq!(
        second.name,
        format!("{}-2", first.name),
        "no name collision"
    );
    let mut domains = second.domain_names.clone();
    domains.sort();
    assert_eq!(domains, ["a.example.com", "b.example.com"]);
    assert_eq!(carried().await, [second.id]);

    // Back to the first domains: a third certificate takes the free original name.
    plan_then_ensure(&env, &lbs, &https("a.example.com"), &nodes).await;
    let [third] = certificates().await.try_into().unwrap();
    assert_eq!(third.name, first.name);
    assert_eq!(carried().await, [third.id]);
}

/// TLS Secrets in memory, as the service controller's reader hands them over.
#[derive(Debug, Default)]
struct Secrets(parking_lot::Mutex<BTreeMap<String, cloud_provider::secrets::TlsSecret>>);

impl Secrets {
    /// `default/<name>` with a certificate and a key that say `content`.
    fn put(&self, name: &str, content: &str) {
        self.0.lock().insert(
            format!("default/{name}"),
            cloud_provider::secrets::TlsSecret {
                certificate: format!(
                    "-----BEGIN CERTIFICATE-----\n{content}\n-----END CERTIFICATE-----\n"
                ),
                private_key: format!(
                    "-----BEGIN PRIVATE KEY-----\n{content}\n-----END PRIVATE KEY-----\n"
                ),
            },
        );
    }
}

#[async_trait::async_trait]
impl cloud_provider::secrets::TlsSecrets for Secrets {
    async fn tls_secret(
        &self,
        namespace: &str,
        name: &str,
    ) -> cloud_provider::provider::Result<Option<cloud_provider::secrets::TlsSecret>> {
        Ok(self.0.lock().get(&format!("{namespace}/{name}")).cloned())
    }
}

/// A Service naming a `kubernetes.io/tls` Secret (beyond the official CCM): its content is
/// uploaded as a certificate labelled with the Service, the Secret and the content's digest;
/// an unchanged Secret costs no certificate request; a renewed one is uploaded under a free
/// name, swapped in, and the old upload deleted after the swap (`plan` names exactly those
/// writes); deleting the Service deletes its upload. Without a reader, or without the
/// Secret, the sync fails with a user error naming the Secret.
#[tokio::test]
async fn a_tls_secret_is_uploaded_and_a_renewal_is_swapped_in_before_the_old_upload_goes() {
    let env = Env::start().await;
    let lbs = env.lbs().await;
    let nodes = [env.node(0)];
    let svc = service(
        &[(443, "TCP", 30443)],
        &[
            ("protocol", "https"),
            ("http-certificate-secret", "web-tls"),
        ],
    );
    let message = user_error(&lbs, &svc, &nodes).await;
    assert!(
        message.contains("Secret default/web-tls is not read: this controller reads no Secrets"),
        "{message}"
    );
    let secrets = Arc::new(Secrets::default());
    lbs.use_secrets(secrets.clone());
    let message = user_error(&lbs, &svc, &nodes).await;
    assert!(
        message.contains("Secret default/web-tls does not exist"),
        "{message}"
    );

    let certificates = || all_certificates(&env);
    let carried = || carried_certificates(&env);
    secrets.put("web-tls", "first");
    let made = plan_then_ensure(&env, &lbs, &svc, &nodes).await;
    assert_eq!(made, ["POST /certificates", "POST /load_balancers"]);
    let [first] = certificates().await.try_into().unwrap();
    assert_eq!(first.kind, Some(models::CertificateType::Uploaded));
    assert_eq!(first.name, format!("ccm-tls-secret-{UID}"));
    assert_eq!(first.labels[SERVICE_UID_LABEL], UID);
    assert_eq!(first.labels["hcloud-ccm/tls-secret"], "web-tls");
    assert_eq!(first.labels["hcloud-ccm/tls-secret-digest"].len(), 32);
    assert_eq!(carried().await, [first.id]);

    // Unchanged: no certificate request at all.
    env.sim.admin().reset_request_counts().await.unwrap();
    lbs.ensure_load_balancer(CLUSTER, &svc, &nodes)
        .await
        .unwrap();
    let counts = env.counts().await;
    assert!(
        counts
            .keys()
            .all(|request| !request.contains("/certificates")),
        "{counts:?}"
    );

    // Renewed (as cert-manager does it): uploaded, swapped in, the old one deleted.
    secrets.put("web-tls", "second");
    let made = plan_then_ensure(&env, &lbs, &svc, &nodes).await;
    assert_eq!(
        made,
        [
            "DELETE /certificates/{id}",
            "POST /certificates",
            "POST /load_balancers/{id}/actions/update_service",
        ],
        "uploaded, swapped in, the old one deleted"
    );
    let [second] = certificates().await.try_into().unwrap();
    assert_eq!(
        second.name,
        format!("{}-2", first.name),
        "no name collision"
    );
    assert_ne!(
        second.labels["hcloud-ccm/tls-secret-digest"],
        first.labels["hcloud-ccm/tls-secret-digest"]
    );
    assert_eq!(carried().await, [second.id]);

    // The Service goes: so does its upload.
    lbs.ensure_load_balancer_deleted(CLUSTER, &svc)
        .await
        .unwrap();
    assert!(env.all().await.is_empty());
    assert!(certificates().await.is_empty());
}

/// A Service sharing the load balancer `shop-lb` with `ports` (listen port = NodePort - 30000),
/// as the Service `name` with UID `uid`.
fn sharing(name: &str, uid: &str, ports: &[i32], more: &[(&str, &str)]) -> Service {
    let ports: Vec<(i32, &str, i32)> = ports.iter().map(|p| (*p, "TCP", 30000 + *p)).collect();
    let mut annotations = vec![("shared-load-balancer", "shop-lb")];
    annotations.extend_from_slice(more);
    let mut svc = service(&ports, &annotations);
    svc.metadata.name = Some(name.into());
    svc.metadata.uid = Some(uid.into());
    svc
}

/// The listen ports of `lb`, sorted.
fn ports_of(lb: &models::LoadBalancer) -> Vec<u16> {
    let mut ports: Vec<u16> = lb.services.iter().map(|s| s.listen_port).collect();
    ports.sort_unstable();
    ports
}

/// The Services whose UIDs exist, as the service controller's informer tells the provider.
fn known(uids: &[&str]) -> Arc<cloud_provider::ListedServices> {
    Arc::new(cloud_provider::ListedServices(
        uids.iter().map(|u| (*u).to_owned()).collect(),
    ))
}

/// Several Services naming one shared load balancer (beyond the official CCM): the first
/// creates it; each owns its ports, recorded in the load balancer's labels; a port another
/// Service holds is refused with both named and nothing changed; the owner of the lowest port
/// sets the targets, another with other target settings gets a Warning; deleting an owner
/// removes only its ports, and the load balancer goes with its last owner.
#[tokio::test]
async fn services_share_a_load_balancer_each_owning_its_ports() {
    let env = Env::start().await;
    let lbs = env.lbs().await;
    let nodes = [env.node(0), env.node(1)];
    let web = sharing("web", "uid-web", &[80], &[]);
    let api = sharing(
        "api",
        "uid-api",
        &[443, 8443],
        &[("node-selector", "role=api")],
    );
    let clash = sharing("clash", "uid-clash", &[443], &[]);
    lbs.use_services(known(&["uid-web", "uid-api", "uid-clash"]));

    let made = plan_then_ensure(&env, &lbs, &web, &nodes).await;
    assert_eq!(made, ["POST /load_balancers"]);
    let lb = env.only().await;
    assert_eq!(lb.name, "shop-lb");
    assert_eq!(lb.labels["hcloud-ccm/shared"], "created");
    assert_eq!(lb.labels["hcloud-ccm/owner-uid-web"], "80");
    assert!(
        !lb.labels.contains_key(SERVICE_UID_LABEL),
        "{:?}",
        lb.labels
    );
    assert_eq!(lb.targets.len(), 2);

    // The second owner adds its ports only; the targets stay the first owner's (its node
    // selector would pick none of these Nodes), with a Warning that says so.
    let planned = lbs.plan_load_balancer(CLUSTER, &api, &nodes).await.unwrap();
    assert!(
        planned
            .warnings
            .iter()
            .any(|w| w.reason == "SharedLoadBalancerSettingsIgnored"),
        "{planned:#?}"
    );
    plan_then_ensure(&env, &lbs, &api, &nodes).await;
    let lb = env.only().await;
    assert_eq!(ports_of(&lb), [80, 443, 8443]);
    assert_eq!(lb.labels["hcloud-ccm/owner-uid-api"], "443.8443");
    assert_eq!(lb.targets.len(), 2, "the primary's targets");
    let status = lbs.get_load_balancer(CLUSTER, &api).await.unwrap();
    assert!(
        status.is_some(),
        "the second owner finds its shared load balancer"
    );

    // A port another owner holds: refused, naming it, nothing changed.
    env.sim.admin().reset_request_counts().await.unwrap();
    let err = lbs
        .ensure_load_balancer(CLUSTER, &clash, &nodes)
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("port 443 is the Service with UID uid-api's"),
        "{err}"
    );
    assert!(writes_counted(&env).await.is_empty());

    // The first owner goes: its port only; the second becomes primary and sets its targets.
    lbs.ensure_load_balancer_deleted(CLUSTER, &web)
        .await
        .unwrap();
    lbs.use_services(known(&["uid-api", "uid-clash"]));
    let lb = env.only().await;
    assert_eq!(ports_of(&lb), [443, 8443]);
    assert!(!lb.labels.contains_key("hcloud-ccm/owner-uid-web"));
    lbs.ensure_load_balancer(CLUSTER, &api, &nodes)
        .await
        .unwrap();
    assert!(env.only().await.targets.is_empty(), "no Node has role=api");

    // The last owner goes: so does the load balancer this CCM created.
    let planned = lbs.plan_load_balancer_deleted(CLUSTER, &api).await.unwrap();
    assert!(
        planned
            .changes
            .iter()
            .any(|c| c.target.starts_with("load balancer \"shop-lb\"")),
        "{planned:#?}"
    );
    lbs.ensure_load_balancer_deleted(CLUSTER, &api)
        .await
        .unwrap();
    assert!(env.all().await.is_empty());
    assert_eq!(lbs.get_load_balancer(CLUSTER, &api).await.unwrap(), None);
}

/// A load balancer made outside the cluster and shared in keeps every service and target
/// this CCM does not own, also when its last owner goes (it is not deleted).
#[tokio::test]
async fn a_load_balancer_shared_in_keeps_what_it_had() {
    let env = Env::start().await;
    let created = env
        .client
        .load_balancers()
        .create(&models::CreateLoadBalancerRequest {
            name: "shop-lb".into(),
            load_balancer_type: "lb11".into(),
            location: Some("fsn1".into()),
            services: vec![models::ServiceSpec {
                listen_port: 8080,
                destination_port: 8080,
                protocol: models::ServiceProtocol::Tcp,
                ..models::ServiceSpec::default()
            }],
            targets: vec![TargetSpec::ip("203.0.113.7")],
            ..models::CreateLoadBalancerRequest::default()
        })
        .await
        .unwrap();
    env.client.actions().wait(&created.action).await.unwrap();
    let lbs = env.lbs().await;
    lbs.use_services(known(&["uid-web"]));
    let web = sharing("web", "uid-web", &[80], &[]);
    plan_then_ensure(&env, &lbs, &web, &[env.node(0)]).await;
    let lb = env.only().await;
    assert_eq!(ports_of(&lb), [80, 8080]);
    assert_eq!(lb.labels["hcloud-ccm/shared"], "adopted");
    assert_eq!(
        lb.targets.len(),
        2,
        "the outside target kept: {:?}",
        lb.targets
    );

    // A port the load balancer had before: not this CCM's to give.
    let other = sharing("other", "uid-other", &[8080], &[]);
    let err = lbs
        .ensure_load_balancer(CLUSTER, &other, &[env.node(0)])
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("port 8080 is a service of the load balancer this CCM does not manage"),
        "{err}"
    );

    lbs.ensure_load_balancer_deleted(CLUSTER, &web)
        .await
        .unwrap();
    let lb = env.only().await;
    assert_eq!(lb.id, created.load_balancer.id, "kept");
    assert_eq!(ports_of(&lb), [8080]);
    assert!(
        lb.labels.keys().all(|k| !k.starts_with("hcloud-ccm/")),
        "{:?}",
        lb.labels
    );
}

/// A Service that stops naming its shared load balancer (or names another) leaves it first,
/// as its deletion would: its ports go, and the load balancer created here goes with its last
/// owner; `plan` names those writes.
#[tokio::test]
async fn a_service_that_stops_sharing_leaves_the_shared_load_balancer() {
    let env = Env::start().await;
    let lbs = env.lbs().await;
    lbs.use_services(known(&["uid-web", "uid-api"]));
    let nodes = [env.node(0)];
    let api = sharing("api", "uid-api", &[443], &[]);
    let web = sharing("web", "uid-web", &[80], &[]);
    lbs.ensure_load_balancer(CLUSTER, &web, &nodes)
        .await
        .unwrap();
    lbs.ensure_load_balancer(CLUSTER, &api, &nodes)
        .await
        .unwrap();
    assert_eq!(ports_of(&env.only().await), [80, 443]);

    // web names another shared load balancer: it leaves shop-lb (api stays).
    let mut moved = web.clone();
    moved
        .metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert(format!("{A}shared-load-balancer"), "other-lb".into());
    let made = plan_then_ensure(&env, &lbs, &moved, &nodes).await;
    assert!(
        made.contains(&"POST /load_balancers/{id}/actions/delete_service".to_owned()),
        "{made:?}"
    );
    let mut all = env.all().await;
    all.sort_by_key(|lb| lb.name.clone());
    let names: Vec<(String, Vec<u16>)> = all
        .iter()
        .map(|lb| (lb.name.clone(), ports_of(lb)))
        .collect();
    assert_eq!(
        names,
        [
            ("other-lb".to_owned(), vec![80]),
            ("shop-lb".to_owned(), vec![443])
        ]
    );

    // api stops sharing: shop-lb, created here, goes with its last owner; api gets its own.
    let mut own = api.clone();
    own.metadata
        .annotations
        .as_mut()
        .unwrap()
        .remove(&format!("{A}shared-load-balancer"));
    plan_then_ensure(&env, &lbs, &own, &nodes).await;
    let mut names: Vec<String> = env.all().await.into_iter().map(|lb| lb.name).collect();
    names.sort();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names.contains(&"other-lb".to_owned()) && !names.contains(&"shop-lb".to_owned()));
}
