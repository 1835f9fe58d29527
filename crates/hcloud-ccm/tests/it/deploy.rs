//! The shipped deployment: `deploy/ccm*.yaml` and `deploy/rbac.yaml` are what real Helm renders
//! from the chart in `deploy/chart` (`scripts/helm.sh`, see `support/chart.rs`), every values
//! file in `deploy/chart/ci` renders and passes the apiserver's server-side dry run, the
//! prometheus-operator objects render only where their CRDs exist, and the Deployment's own args
//! and env start the binary.
//!
//! `HCLOUD_CCM_UPDATE_MANIFESTS=1 cargo test -p hcloud-ccm --test it deploy::` rewrites the
//! manifests from the chart instead of comparing them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::{ccm, chart};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use ccm::{BIN, TOKEN, free_port};
use chart::{Chart, PROMETHEUS_OPERATOR, by_kind_and_name, documents};
use hcloud_sim::{NetworkSeed, RobotServerSeed, ServerSeed, SimConfig, Simulator};
use kube_harness::{ControlPlane, UNINITIALIZED_TAINT, eventually, has_taint};
use serde_json::{Value, json};

use crate::support::scope::Scope;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn chart() -> Chart {
    Chart::load(&repo().join("deploy/chart")).unwrap()
}

/// What the plain manifests are rendered with: the official Makefile's selector override.
fn manifest_values(extra: Value) -> Value {
    let mut values = json!({
        "selectorLabels": {
            "app.kubernetes.io/name": null,
            "app.kubernetes.io/instance": null,
            "app": "hcloud-cloud-controller-manager",
        }
    });
    chart::merge(&mut values, &extra);
    values
}

/// Each shipped manifest and the values it is rendered from.
fn shipped() -> Vec<(&'static str, Value)> {
    vec![
        ("ccm.yaml", manifest_values(json!({}))),
        (
            "ccm-networks.yaml",
            manifest_values(json!({ "networking": { "enabled": true } })),
        ),
        ("ccm-ha.yaml", manifest_values(json!({ "replicaCount": 2 }))),
    ]
}

const KIND_ORDER: [&str; 8] = [
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Deployment",
    "DaemonSet",
    "PodDisruptionBudget",
    "PodMonitor",
    "PrometheusRule",
];

fn manifest_text(header: &str, objects: &[Value]) -> String {
    let mut sorted: Vec<&Value> = objects.iter().collect();
    sorted.sort_by_key(|o| {
        KIND_ORDER
            .iter()
            .position(|k| o["kind"] == *k)
            .unwrap_or(99)
    });
    let mut text = header.to_owned();
    for object in sorted {
        text.push_str("---\n");
        text.push_str(&serde_yaml_ng::to_string(object).unwrap());
    }
    text
}

fn render(values: &Value) -> Vec<Value> {
    chart().render("hcloud-ccm", "kube-system", values).unwrap()
}

fn object<'a>(objects: &'a [Value], kind: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind)
        .unwrap_or_else(|| {
            panic!(
                "no {kind} among {:?}",
                by_kind_and_name(objects).keys().collect::<Vec<_>>()
            )
        })
}

fn container(workload: &Value) -> &Value {
    &workload["spec"]["template"]["spec"]["containers"][0]
}

fn args(workload: &Value) -> Vec<String> {
    container(workload)["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect()
}

fn env_names(workload: &Value) -> Vec<String> {
    container(workload)["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn the_manifests_are_what_the_chart_renders_for_its_defaults() {
    let update = std::env::var("HCLOUD_CCM_UPDATE_MANIFESTS").is_ok_and(|v| v == "1");
    let deploy = repo().join("deploy");
    let mut rbac_of_default = Vec::new();
    for (file, values) in shipped() {
        let rendered = render(&values);
        if file == "ccm.yaml" {
            rbac_of_default = rendered
                .iter()
                .filter(|o| KIND_ORDER[..3].contains(&o["kind"].as_str().unwrap()))
                .cloned()
                .collect();
        }
        let path = deploy.join(file);
        if update {
            let header = format!(
                "# hcloud-ccm: rendered by Helm {} from deploy/chart ({}); do not edit, change the chart and run\n# HCLOUD_CCM_UPDATE_MANIFESTS=1 cargo test -p hcloud-ccm --test it deploy::\n# Needs Secret kube-system/hcloud with key \"token\"{}.\n",
                chart::HELM_VERSION,
                match file {
                    "ccm.yaml" => "defaults",
                    "ccm-networks.yaml" => "networking.enabled=true",
                    _ => "replicaCount=2",
                },
                if file == "ccm-networks.yaml" {
                    " and key \"network\""
                } else {
                    ""
                },
            );
            std::fs::write(&path, manifest_text(&header, &rendered)).unwrap();
        }
        let shipped = documents(&std::fs::read_to_string(&path).unwrap());
        assert_eq!(
            by_kind_and_name(&shipped),
            by_kind_and_name(&rendered),
            "deploy/{file} differs from the chart's rendering; run with HCLOUD_CCM_UPDATE_MANIFESTS=1"
        );
    }
    let path = deploy.join("rbac.yaml");
    if update {
        let header = "# hcloud-ccm's ServiceAccount and least-privilege RBAC, as in deploy/ccm.yaml (rendered from\n# deploy/chart; crates/hcloud-ccm/tests/it/rbac.rs shows each rule is needed).\n";
        std::fs::write(&path, manifest_text(header, &rbac_of_default)).unwrap();
    }
    assert_eq!(
        by_kind_and_name(&documents(&std::fs::read_to_string(&path).unwrap())),
        by_kind_and_name(&rbac_of_default),
        "deploy/rbac.yaml differs from the chart's RBAC"
    );
}

#[test]
fn the_defaults_keep_the_official_shape_plus_hardening() {
    let single = render(&manifest_values(json!({})));
    let deployment = object(&single, "Deployment");
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(deployment["metadata"]["namespace"], "kube-system");
    assert_eq!(deployment["spec"]["replicas"], 1);
    assert_eq!(
        deployment["spec"]["selector"]["matchLabels"],
        json!({ "app": "hcloud-cloud-controller-manager" })
    );
    assert_eq!(pod["serviceAccountName"], "hcloud-cloud-controller-manager");
    assert_eq!(pod["priorityClassName"], "system-cluster-critical");
    assert_eq!(pod["dnsPolicy"], "Default");
    assert!(pod.get("hostNetwork").is_none());
    let tolerated: Vec<&str> = pod["tolerations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["key"].as_str().unwrap())
        .collect();
    for key in [
        UNINITIALIZED_TAINT,
        "CriticalAddonsOnly",
        "node-role.kubernetes.io/master",
        "node-role.kubernetes.io/control-plane",
        "node.kubernetes.io/not-ready",
    ] {
        assert!(
            tolerated.contains(&key),
            "{key} not tolerated: {tolerated:?}"
        );
    }
    // The official chart's arguments, in its (sorted) order.
    assert_eq!(
        args(deployment),
        [
            "--allow-untagged-cloud",
            "--cloud-provider=hcloud",
            "--feature-gates=CloudControllerManagerWatchBasedRoutesReconciliation=true",
            "--route-reconciliation-period=30s",
            "--webhook-secure-port=0",
            "--leader-elect=false",
        ]
    );
    // The token from the Secret mounted as files: a new token is used without a restart.
    assert_eq!(env_names(deployment), ["HCLOUD_TOKEN_FILE"]);
    let c = container(deployment);
    assert_eq!(c["env"][0]["value"], "/var/run/secrets/hcloud/token");
    assert_eq!(
        c["volumeMounts"],
        json!([{ "name": "hcloud-credentials", "mountPath": "/var/run/secrets/hcloud", "readOnly": true }])
    );
    assert_eq!(
        pod["volumes"],
        json!([{ "name": "hcloud-credentials", "secret": { "secretName": "hcloud" } }])
    );
    assert_eq!(
        c["image"],
        format!("hcloud-ccm:v{}", env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(
        c["resources"]["requests"],
        json!({ "cpu": "100m", "memory": "50Mi" })
    );
    // Hardening.
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(pod["securityContext"]["runAsUser"], 65532);
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
    assert_eq!(c["securityContext"]["capabilities"]["drop"], json!(["ALL"]));
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert!(single.iter().all(|o| o["kind"] != "PodDisruptionBudget"));
    assert_eq!(
        deployment["spec"]["strategy"],
        json!({ "type": "Recreate" })
    );

    // With credentials.from=env: the official chart's variables from the Secret, no volume.
    let from_env = render(&manifest_values(
        json!({ "credentials": { "from": "env" } }),
    ));
    let deployment = object(&from_env, "Deployment");
    assert_eq!(
        env_names(deployment),
        ["HCLOUD_TOKEN", "ROBOT_PASSWORD", "ROBOT_USER"]
    );
    let c = container(deployment);
    assert_eq!(
        c["env"][0]["valueFrom"]["secretKeyRef"],
        json!({ "name": "hcloud", "key": "token" })
    );
    assert_eq!(c["env"][1]["valueFrom"]["secretKeyRef"]["optional"], true);
    assert!(c.get("volumeMounts").is_none());
    assert!(
        deployment["spec"]["template"]["spec"]
            .get("volumes")
            .is_none()
    );
    // Robot on: its credentials as files too.
    let robot = render(&manifest_values(json!({ "robot": { "enabled": true } })));
    assert_eq!(
        env_names(object(&robot, "Deployment")),
        [
            "HCLOUD_TOKEN_FILE",
            "ROBOT_PASSWORD_FILE",
            "ROBOT_USER_FILE",
            "ROBOT_ENABLED"
        ]
    );
    assert!(
        chart()
            .render(
                "hcloud-ccm",
                "kube-system",
                &json!({ "credentials": { "from": "secret" } })
            )
            .unwrap_err()
            .contains("credentials.from must be file or env"),
    );

    let networks = render(&manifest_values(
        json!({ "networking": { "enabled": true } }),
    ));
    let deployment = object(&networks, "Deployment");
    assert_eq!(deployment["spec"]["template"]["spec"]["hostNetwork"], true);
    let a = args(deployment);
    assert!(
        a.contains(&"--allocate-node-cidrs=true".to_owned())
            && a.contains(&"--cluster-cidr=10.244.0.0/16".to_owned()),
        "{a:?}"
    );
    let network = &container(deployment)["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "HCLOUD_NETWORK")
        .unwrap()["valueFrom"];
    assert_eq!(
        network["secretKeyRef"],
        json!({ "name": "hcloud", "key": "network" })
    );

    let ha = render(&manifest_values(json!({ "replicaCount": 2 })));
    let deployment = object(&ha, "Deployment");
    assert_eq!(deployment["spec"]["replicas"], 2);
    assert!(
        deployment["spec"].get("strategy").is_none(),
        "replicas with leader election roll as Kubernetes defaults"
    );
    assert!(
        !args(deployment)
            .iter()
            .any(|a| a.starts_with("--leader-elect")),
        "leader election stays on"
    );
    let pdb = object(&ha, "PodDisruptionBudget");
    assert_eq!(pdb["spec"]["maxUnavailable"], 1);
    assert_eq!(pdb["spec"]["selector"], deployment["spec"]["selector"]);
}

fn ci_values(file: &str) -> Value {
    serde_yaml_ng::from_str(
        &std::fs::read_to_string(repo().join("deploy/chart/ci").join(file)).unwrap(),
    )
    .unwrap()
}

#[test]
fn values_files_written_for_the_official_chart_render() {
    let values = ci_values("official-values.yaml");
    let objects = chart()
        .render_with("hcloud-ccm", "kube-system", &values, &PROMETHEUS_OPERATOR)
        .unwrap()
        .objects;
    let ds = object(&objects, "DaemonSet");
    let pod = &ds["spec"]["template"]["spec"];
    assert!(ds["spec"].get("replicas").is_none() && pod.get("affinity").is_none());
    assert!(ds["spec"].get("strategy").is_none());
    // As the official chart's DaemonSet: the values' dnsPolicy, dnsConfig and priorityClassName
    // are ignored.
    assert_eq!(pod["dnsPolicy"], "Default");
    assert!(pod.get("dnsConfig").is_none(), "{pod}");
    assert_eq!(pod["priorityClassName"], "system-cluster-critical");
    assert_eq!(
        ds["spec"]["selector"]["matchLabels"],
        json!({ "app.kubernetes.io/name": "hcloud-cloud-controller-manager", "app.kubernetes.io/instance": "hcloud-ccm" })
    );
    assert_eq!(
        ds["spec"]["template"]["metadata"]["labels"]["pod-label"],
        "pod-label"
    );
    assert_eq!(
        ds["spec"]["template"]["metadata"]["annotations"]["pod-annotation"],
        "pod-annotation"
    );
    assert_eq!(pod["nodeSelector"], json!({ "foo": "bar" }));
    assert!(
        pod["tolerations"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["key"] == "example-key")
    );
    assert_eq!(pod["volumes"][0]["secret"]["secretName"], "hcloud-token");
    assert_eq!(pod["imagePullSecrets"], json!([{ "name": "regcred" }]));
    assert_eq!(pod["hostNetwork"], true);
    let c = container(ds);
    assert_eq!(c["volumeMounts"][0]["mountPath"], "/var/run/secrets/hcloud");
    assert_eq!(c["image"], "registry.example.com/hcloud-ccm:v9.9.9");
    assert_eq!(c["resources"]["limits"]["memory"], "200Mi");
    let a = args(ds);
    assert!(
        a.contains(&"--cluster-cidr=10.42.0.0/16".to_owned()),
        "{a:?}"
    );
    assert!(
        a.contains(&"--node-status-update-frequency=2m".to_owned()),
        "{a:?}"
    );
    assert!(
        !a.iter().any(|x| x.starts_with("--leader-elect")),
        "a DaemonSet elects a leader: {a:?}"
    );
    assert!(
        !a.iter().any(|x| x.starts_with("--feature-gates")),
        "null removes an argument: {a:?}"
    );
    let env = env_names(ds);
    assert!(
        !env.contains(&"HCLOUD_TOKEN".to_owned()),
        "null removes a variable: {env:?}"
    );
    for name in [
        "HCLOUD_TOKEN_FILE",
        "HCLOUD_NETWORK",
        "HCLOUD_LOAD_BALANCERS_LOCATION",
    ] {
        assert!(env.contains(&name.to_owned()), "{name} missing: {env:?}");
    }
    assert_eq!(
        object(&objects, "ServiceAccount")["metadata"]["annotations"]["service-account-annotation"],
        "service-account-annotation"
    );
    let monitor = object(&objects, "PodMonitor");
    assert_eq!(monitor["metadata"]["labels"]["environment"], "staging");
    // Annotations are strings, whatever the values file wrote.
    assert_eq!(
        monitor["metadata"]["annotations"],
        json!({ "release": "kube-prometheus-stack", "scrape-priority": "5" })
    );
    assert_eq!(
        monitor["spec"]["podMetricsEndpoints"],
        json!([{ "port": "metrics" }])
    );
    assert_eq!(
        monitor["spec"]["selector"]["matchLabels"],
        ds["spec"]["selector"]["matchLabels"]
    );

    // Without monitoring there is no metrics port, HCLOUD_METRICS_ENABLED=false and no PodMonitor.
    let quiet = chart()
        .render_with(
            "hcloud-ccm",
            "kube-system",
            &json!({ "monitoring": { "enabled": false, "podMonitor": { "enabled": true } }, "rbac": { "create": false } }),
            &PROMETHEUS_OPERATOR,
        )
        .unwrap()
        .objects;
    let deployment = object(&quiet, "Deployment");
    assert!(env_names(deployment).contains(&"HCLOUD_METRICS_ENABLED".to_owned()));
    assert!(
        !container(deployment)["ports"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "metrics")
    );
    let kinds: Vec<&str> = quiet.iter().map(|o| o["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds.len(), 2, "{kinds:?}");
}

#[test]
fn prometheus_operator_objects_render_only_where_their_crds_exist() {
    let values = json!({
        "monitoring": { "podMonitor": { "enabled": true }, "prometheusRule": { "enabled": true } }
    });
    let without = chart()
        .render_with("hccm", "kube-system", &values, &[])
        .unwrap();
    let kinds: Vec<&str> = without
        .objects
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    assert!(
        !kinds.contains(&"PodMonitor") && !kinds.contains(&"PrometheusRule"),
        "{kinds:?}"
    );
    assert!(
        without.notes.contains("no PodMonitor was installed")
            && without.notes.contains("no alert rules were installed"),
        "{}",
        without.notes
    );

    let with = chart()
        .render_with("hccm", "kube-system", &values, &PROMETHEUS_OPERATOR)
        .unwrap();
    assert!(
        !with.notes.contains("WARNING"),
        "no warning with the CRDs: {}",
        with.notes
    );
    object(&with.objects, "PodMonitor");
    let rule = object(&with.objects, "PrometheusRule");
    // The rules are deploy/monitoring/alerts.yaml, the file promtool tests.
    let alerts: Value = serde_yaml_ng::from_str(
        &std::fs::read_to_string(repo().join("deploy/monitoring/alerts.yaml")).unwrap(),
    )
    .unwrap();
    assert_eq!(rule["spec"], alerts);
    assert!(
        alerts["groups"][0]["rules"].as_array().unwrap().len() >= 6,
        "{alerts}"
    );
}

#[test]
fn a_single_replica_rollout_never_runs_two_writers() {
    let leader_elect_off = |d: &Value| args(d).contains(&"--leader-elect=false".to_owned());
    // Defaults: leader election off as upstream, and the old Pod stops before the new starts.
    let objects = render(&json!({}));
    let d = object(&objects, "Deployment");
    assert!(leader_elect_off(d));
    assert_eq!(d["spec"]["strategy"]["type"], "Recreate");
    // A strategy of the user's that may overlap two Pods: leader election stays on.
    for strategy in [
        json!({ "type": "RollingUpdate" }),
        json!({ "rollingUpdate": { "maxSurge": 1 } }),
    ] {
        let objects = render(&json!({ "strategy": strategy }));
        let d = object(&objects, "Deployment");
        assert!(!leader_elect_off(d), "{strategy}: {:?}", args(d));
        assert_eq!(d["spec"]["strategy"], strategy);
    }
    let objects = render(&json!({ "strategy": { "type": "Recreate" } }));
    assert!(leader_elect_off(object(&objects, "Deployment")));
    // More replicas elect a leader whatever the strategy.
    let objects = render(&ci_values("ha-values.yaml"));
    let d = object(&objects, "Deployment");
    assert!(!leader_elect_off(d));
    assert_eq!(d["spec"]["strategy"]["type"], "RollingUpdate");
    // A DaemonSet has no strategy of ours and elects a leader.
    let objects = render(&ci_values("daemonset-values.yaml"));
    assert!(!leader_elect_off(object(&objects, "DaemonSet")));
}

/// `rbac.secrets` (on by default): the ClusterRole may read Secrets; off
/// (`deploy/chart/ci/no-secrets-values.yaml`), the rule is left out and the CCM is told to read
/// none, so a Service naming a Secret gets a Warning instead of refused reads.
#[test]
fn reading_secrets_is_a_chart_value() {
    let secrets_rule = |objects: &[Value]| {
        object(objects, "ClusterRole")["rules"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resources"] == json!(["secrets"]))
            .map(|r| r["verbs"].clone())
    };
    let tls_secrets_env = |objects: &[Value]| {
        container(object(objects, "Deployment"))["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == "HCLOUD_LOAD_BALANCERS_TLS_SECRETS")
            .map(|e| e["value"].clone())
    };
    let default = render(&json!({}));
    assert_eq!(
        secrets_rule(&default),
        Some(json!(["get", "list", "watch"]))
    );
    assert_eq!(tls_secrets_env(&default), None);
    let off = render(&ci_values("no-secrets-values.yaml"));
    assert_eq!(secrets_rule(&off), None);
    assert_eq!(tls_secrets_env(&off), Some(json!("false")));
}

/// `robot.enabled` (`deploy/chart/ci/robot-values.yaml`, as the official chart's values use
/// it): the rendered Deployment's own args and env, with the Robot credentials from the Secret
/// `hcloud`, start the binary, which initialises a dedicated server's Node.
#[tokio::test]
async fn robot_values_start_the_binary_and_initialise_a_dedicated_node() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let rendered = chart()
        .render_with("hccm", "kube-system", &ci_values("robot-values.yaml"), &[])
        .unwrap();
    let deployment = object(&rendered.objects, "Deployment");
    assert!(env_names(deployment).contains(&"ROBOT_ENABLED".to_owned()));
    assert!(!rendered.notes.contains("Robot"), "{}", rendered.notes);

    let scope = Scope::new("robot").await;
    let access = scope.admin_access("ccm").await;
    let node = scope.name("dedicated-1");
    let sim = Simulator::start(
        SimConfig::default()
            .token(TOKEN)
            .robot_credentials("robot-user-1", "robot-pass-1"),
    )
    .await
    .unwrap();
    let number = sim
        .admin()
        .add_robot_server(RobotServerSeed::new(&node))
        .await
        .unwrap();
    let secret = BTreeMap::from([
        ("token", TOKEN.to_owned()),
        ("robot-user", "robot-user-1".to_owned()),
        ("robot-password", "robot-pass-1".to_owned()),
    ]);
    let log = scope.dir.path().join("ccm.log");
    let mut child = start_as_deployed(
        deployment,
        &secret,
        &[
            ("HCLOUD_ENDPOINT", sim.base_url()),
            ("ROBOT_ENDPOINT", sim.robot_url()),
        ],
        &access.kubeconfig,
        free_port(),
        &log,
    );

    let nodes = scope.nodes();
    scope.register_node(&node, None).await;
    let initialised = eventually(
        "the dedicated Node initialised",
        Duration::from_secs(30),
        || async {
            let node = nodes.get(&node).await.unwrap();
            (!has_taint(&node, UNINITIALIZED_TAINT)).then_some(node)
        },
    )
    .await;
    let spec_id = initialised
        .spec
        .as_ref()
        .and_then(|s| s.provider_id.clone());
    assert_eq!(spec_id, Some(format!("hrobot://{number}")));
    let labels = initialised.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels
            .get("instance.hetzner.cloud/provided-by")
            .map(String::as_str),
        Some("robot"),
        "{labels:?}"
    );
    assert_eq!(
        labels
            .get("node.kubernetes.io/instance-type")
            .map(String::as_str),
        Some("EX44")
    );
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        !text.contains("robot-pass-1"),
        "the Robot password in the log"
    );
    assert!(child.try_wait().unwrap().is_none(), "exited:\n{text}");
    child.kill().await.unwrap();
}

#[test]
fn helm_refuses_what_the_former_in_repo_renderer_let_pass() {
    // A field under a null map is an error in Helm (the old renderer read it as false).
    let err = chart()
        .render("hccm", "kube-system", &json!({ "networking": null }))
        .unwrap_err();
    assert!(err.contains("nil pointer"), "{err}");
}

fn kubeconfig_file(plane: &ControlPlane, dir: &Path) -> PathBuf {
    let path = dir.join("kubeconfig");
    plane.write_kubeconfig(&path).unwrap();
    path
}

fn kubectl(kubeconfig: &Path, args: &[&str], file: &Path) -> std::process::Output {
    Command::new(kube_harness::kubectl().unwrap())
        .env("KUBECONFIG", kubeconfig)
        .args(args)
        .arg(file)
        .output()
        .expect("kubectl (built beside kube-apiserver by scripts/control-plane.sh)")
}

/// Every rendering the tests use: the chart's defaults and each values file in `deploy/chart/ci`.
fn ci_renderings() -> Vec<(String, Vec<Value>)> {
    let mut files: Vec<_> = std::fs::read_dir(repo().join("deploy/chart/ci"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|f| f.ends_with(".yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 5, "{files:?}");
    let mut renderings = vec![("chart defaults".to_owned(), json!({}))];
    renderings.extend(
        files
            .iter()
            .map(|f| (format!("deploy/chart/ci/{f}"), ci_values(f))),
    );
    renderings
        .into_iter()
        .map(|(name, mut values)| {
            // Everything optional on, so that every template meets the apiserver.
            chart::merge(
                &mut values,
                &json!({ "monitoring": { "prometheusRule": { "enabled": true } } }),
            );
            let objects = chart()
                .render_with("hcloud-ccm", "kube-system", &values, &PROMETHEUS_OPERATOR)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            (name, objects.objects)
        })
        .collect()
}

#[test]
fn every_manifest_passes_the_apiservers_server_side_dry_run() {
    let plane = crate::support::plane();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = kubeconfig_file(plane, dir.path());
    let mut files: Vec<(String, Vec<Value>)> = [
        "ccm.yaml",
        "ccm-networks.yaml",
        "ccm-ha.yaml",
        "rbac.yaml",
        "plan-job.yaml",
    ]
    .iter()
    .map(|f| {
        (
            format!("deploy/{f}"),
            documents(&std::fs::read_to_string(repo().join("deploy").join(f)).unwrap()),
        )
    })
    .collect();
    files.extend(ci_renderings());
    let mut kinds_seen = std::collections::BTreeSet::new();
    for (name, objects) in files {
        let objects: Vec<Value> = objects
            .into_iter()
            // The test apiserver has no prometheus-operator CRDs; the PodMonitor and the
            // PrometheusRule are checked by the render tests above instead.
            .filter(|o| {
                !PROMETHEUS_OPERATOR
                    .iter()
                    .any(|k| k.ends_with(&format!("/{}", o["kind"].as_str().unwrap())))
            })
            .inspect(|o| {
                kinds_seen.insert(o["kind"].as_str().unwrap().to_owned());
            })
            .collect();
        let path = dir.path().join("manifest.yaml");
        std::fs::write(&path, manifest_text("", &objects)).unwrap();
        let output = kubectl(&kubeconfig, &["apply", "--dry-run=server", "-f"], &path);
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{name}: kubectl apply --dry-run=server failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert_eq!(
            stdout
                .lines()
                .filter(|l| l.contains("(server dry run)"))
                .count(),
            objects.len(),
            "{name}: {stdout}"
        );
    }
    for kind in KIND_ORDER[..6].iter().chain(&["Job"]) {
        assert!(
            kinds_seen.contains(*kind),
            "no {kind} was dry-run: {kinds_seen:?}"
        );
    }
}

/// The volumes of Secret `hcloud` the container mounts, written into `dir` as the kubelet
/// writes a Secret volume (the keys, or the `items` given, in a version directory that
/// `..data` links to): each mount path and where its files are.
fn secret_volumes(
    workload: &Value,
    secret: &BTreeMap<&str, String>,
    dir: &Path,
) -> Vec<(String, PathBuf)> {
    let pod = &workload["spec"]["template"]["spec"];
    let mut mounts = Vec::new();
    for mount in container(workload)["volumeMounts"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let name = mount["name"].as_str().unwrap();
        let Some(volume) = pod["volumes"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|v| v["name"] == name)
            .filter(|v| v["secret"]["secretName"] == "hcloud")
        else {
            continue;
        };
        let files: Vec<(String, String)> = match volume["secret"]["items"].as_array() {
            Some(items) => items
                .iter()
                .map(|i| {
                    (
                        i["key"].as_str().unwrap().to_owned(),
                        i["path"].as_str().unwrap().to_owned(),
                    )
                })
                .collect(),
            None => secret
                .keys()
                .map(|k| ((*k).to_owned(), (*k).to_owned()))
                .collect(),
        };
        let root = dir.join(format!("volume-{name}"));
        let version = root.join("..v1");
        std::fs::create_dir_all(&version).unwrap();
        std::os::unix::fs::symlink("..v1", root.join("..data")).unwrap();
        for (key, path) in files {
            if let Some(value) = secret.get(key.as_str()) {
                std::fs::write(version.join(&path), value).unwrap();
                std::os::unix::fs::symlink(format!("..data/{path}"), root.join(&path)).unwrap();
            }
        }
        mounts.push((mount["mountPath"].as_str().unwrap().to_owned(), root));
    }
    mounts
}

/// The container's environment as the kubelet would set it from `secret` (Secret `hcloud`), a
/// path into a mounted volume of it (`mounts`, from [`secret_volumes`]) rewritten to its files.
fn container_env(
    workload: &Value,
    secret: &BTreeMap<&str, String>,
    mounts: &[(String, PathBuf)],
) -> Vec<(String, String)> {
    let mut env = Vec::new();
    for var in container(workload)["env"].as_array().unwrap() {
        let name = var["name"].as_str().unwrap().to_owned();
        if let Some(value) = var["value"].as_str() {
            let value = mounts
                .iter()
                .find_map(|(path, dir)| {
                    let rest = value.strip_prefix(path.as_str())?;
                    Some(format!("{}{rest}", dir.display()))
                })
                .unwrap_or_else(|| value.to_owned());
            env.push((name, value));
            continue;
        }
        let reference = &var["valueFrom"]["secretKeyRef"];
        assert_eq!(reference["name"], "hcloud", "{var}");
        match secret.get(reference["key"].as_str().unwrap()) {
            Some(value) => env.push((name, value.clone())),
            None => assert_eq!(
                reference["optional"], true,
                "{var} needs a key the Secret lacks"
            ),
        }
    }
    env
}

/// The binary with `workload`'s own args, env and Secret volumes (`secret` as the Secret
/// `hcloud`, its volumes beside `log`), plus only
/// what differs between a pod and a test: `env` (where the APIs are), the kubeconfig, and free
/// ports instead of 8233/10258. Its log goes to `log`.
fn start_as_deployed(
    workload: &Value,
    secret: &BTreeMap<&str, String>,
    env: &[(&str, String)],
    kubeconfig: &Path,
    secure_port: u16,
    log: &Path,
) -> tokio::process::Child {
    let mounts = secret_volumes(workload, secret, log.parent().unwrap());
    tokio::process::Command::new(BIN)
        .env_clear()
        .envs(container_env(workload, secret, &mounts))
        .envs(env.iter().map(|(name, value)| (*name, value.as_str())))
        .env(
            "HCLOUD_METRICS_ADDRESS",
            format!("127.0.0.1:{}", free_port()),
        )
        .args(args(workload))
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .args([
            "--bind-address=127.0.0.1",
            &format!("--secure-port={secure_port}"),
        ])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

#[tokio::test]
async fn the_deployments_own_args_and_env_start_the_binary() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    // The binary sees only this test's Nodes and Services (the control plane is shared); it
    // runs with leader election off, as the manifest says.
    let scope = Scope::new("deploy").await;
    let access = scope.admin_access("ccm").await;
    let node = scope.name("deploy-node-1");
    let sim = Simulator::start(SimConfig::default().token(TOKEN))
        .await
        .unwrap();
    let network = sim
        .admin()
        .create_network(
            NetworkSeed::new("deploy-test", "10.0.0.0/16").subnet("10.0.1.0/24", "eu-central"),
        )
        .await
        .unwrap();
    sim.admin()
        .create_server(ServerSeed {
            networks: vec![network.into()],
            ..ServerSeed::new(&node)
        })
        .await
        .unwrap();

    let objects =
        documents(&std::fs::read_to_string(repo().join("deploy/ccm-networks.yaml")).unwrap());
    let deployment = object(&objects, "Deployment");
    let secret = BTreeMap::from([
        ("token", TOKEN.to_owned()),
        ("network", "deploy-test".to_owned()),
    ]);
    let secure_port = free_port();
    let log = scope.dir.path().join("ccm.log");
    let mut child = start_as_deployed(
        deployment,
        &secret,
        &[
            ("HCLOUD_ENDPOINT", sim.base_url()),
            ("HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK", "true".to_owned()),
        ],
        &access.kubeconfig,
        secure_port,
        &log,
    );

    let nodes = scope.nodes();
    scope.register_node(&node, Some("10.244.1.0/24")).await;
    let provider_id = eventually("the Node initialized", Duration::from_secs(30), || async {
        let node = nodes.get(&node).await.unwrap();
        if has_taint(&node, UNINITIALIZED_TAINT) {
            return None;
        }
        node.spec?.provider_id
    })
    .await;
    assert!(provider_id.starts_with("hcloud://"), "{provider_id}");
    // The probes the Deployment declares answer on the secure port.
    let http = reqwest::Client::builder()
        .tls_danger_accept_invalid_certs(true)
        .build()
        .unwrap();
    for probe in ["livenessProbe", "readinessProbe"] {
        let get = &container(deployment)[probe]["httpGet"];
        assert_eq!(get["port"], 10258);
        let url = format!(
            "{}://127.0.0.1:{secure_port}{}",
            get["scheme"].as_str().unwrap().to_lowercase(),
            get["path"].as_str().unwrap()
        );
        eventually(
            &format!("{probe} {url} to pass"),
            Duration::from_secs(20),
            || async {
                http.get(&url)
                    .send()
                    .await
                    .ok()
                    .filter(|r| r.status().is_success())
            },
        )
        .await;
    }
    // The route for the Node's pod CIDR (routes are on with networks).
    eventually("the route of the Node", Duration::from_secs(30), || async {
        let state = sim.admin().state().await.unwrap();
        let text = serde_json::to_string(&state).unwrap();
        text.contains("10.244.1.0/24").then_some(())
    })
    .await;
    assert!(
        child.try_wait().unwrap().is_none(),
        "exited:\n{}",
        std::fs::read_to_string(&log).unwrap()
    );
    child.kill().await.unwrap();
}
