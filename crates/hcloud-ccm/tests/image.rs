//! The container image: `scripts/image.sh` builds it twice, compiling once (the second run
//! reuses the compiled binary and assembles the image again), and both builds have one digest;
//! this test unpacks the OCI archive, checks its configuration (entrypoint, non-root user, OCI
//! labels with the commit, no shell), the SBOM beside it and `--version` of the binary inside,
//! and runs the entrypoint chrooted into the unpacked filesystem as user 65532, configured the
//! way a pod is (in-cluster ServiceAccount token bound to the shipped ClusterRole, the
//! Deployment's args and env): it initializes a Node.
//!
//! The binary is built with the cargo profile `HCLOUD_CCM_IMAGE_PROFILE` names, `image-test`
//! unless set (unoptimised, minutes cheaper than a release build); with
//! `HCLOUD_CCM_IMAGE_PROFILE=release` the test checks the image operators get, including its
//! size budget, which only the release profile's binary is held to.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "support/chart.rs"]
mod chart;

#[path = "support/ccm.rs"]
mod ccm;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ccm::TOKEN;
use hcloud_sim::{ServerSeed, SimConfig, Simulator};
use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeStatus};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube_harness::{ControlPlane, UNINITIALIZED_TAINT, eventually, has_taint, kubelet_node};
use serde_json::{Value, json};

const ENTRYPOINT: &str = "/bin/hcloud-cloud-controller-manager";
/// The size budget of the release image (compressed, as registries count it).
const MAX_IMAGE_BYTES: u64 = 20_000_000;

/// The cargo profile the image's binary is built with (`scripts/image.sh`).
fn profile() -> String {
    std::env::var("HCLOUD_CCM_IMAGE_PROFILE").unwrap_or_else(|_| "image-test".to_owned())
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn blob(layout: &Path, digest: &str) -> PathBuf {
    let (algorithm, hex) = digest.split_once(':').unwrap();
    layout.join("blobs").join(algorithm).join(hex)
}

fn json_blob(layout: &Path, digest: &str) -> Value {
    serde_json::from_slice(&std::fs::read(blob(layout, digest)).unwrap()).unwrap()
}

fn files_under(dir: &Path, base: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() && !path.is_symlink() {
            files_under(&path, base, out);
        } else {
            out.push(format!("/{}", path.strip_prefix(base).unwrap().display()));
        }
    }
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

#[tokio::test]
async fn the_image_runs_its_entrypoint_and_initializes_a_node() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    if !is_root() {
        eprintln!(
            "SKIPPED: buildah (rootful) and chroot need root; this test runs as another user"
        );
        return;
    }
    let profile = profile();
    let started = Instant::now();
    let build = Command::new(repo().join("scripts/image.sh"))
        .env("HCLOUD_CCM_IMAGE_PROFILE", &profile)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&build.stderr);
    if build.status.code() == Some(3) {
        eprintln!("SKIPPED: buildah cannot run on this machine:\n{stderr}");
        return;
    }
    assert!(build.status.success(), "scripts/image.sh failed:\n{stderr}");
    eprintln!("scripts/image.sh took {:.0?}:\n{stderr}", started.elapsed());
    let archive = repo().join(String::from_utf8_lossy(&build.stdout).trim());
    let digest_file = repo().join("target/image/hcloud-ccm.digest");
    let digest = std::fs::read_to_string(&digest_file)
        .unwrap()
        .trim()
        .to_owned();
    assert!(
        digest.starts_with("sha256:") && digest.len() == 71,
        "{digest}"
    );

    // Reproducible: a second build of the same commit has the same digest, byte for byte the
    // same archive content. It compiles nothing: the image is assembled again around the
    // binary of the first build.
    let started = Instant::now();
    let again = Command::new(repo().join("scripts/image.sh"))
        .env("HCLOUD_CCM_IMAGE_PROFILE", &profile)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let again_stderr = String::from_utf8_lossy(&again.stderr);
    assert!(
        again.status.success(),
        "second scripts/image.sh failed:\n{again_stderr}"
    );
    eprintln!("second scripts/image.sh took {:.0?}", started.elapsed());
    assert!(
        !again_stderr.contains("Compiling "),
        "the second build compiled again:\n{again_stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(&digest_file).unwrap().trim(),
        digest,
        "two builds of one commit differ"
    );

    let dir = tempfile::tempdir().unwrap();
    let layout = dir.path().join("layout");
    std::fs::create_dir(&layout).unwrap();
    let status = Command::new("tar")
        .arg("-xf")
        .arg(&archive)
        .arg("-C")
        .arg(&layout)
        .status()
        .unwrap();
    assert!(status.success());
    let index: Value =
        serde_json::from_slice(&std::fs::read(layout.join("index.json")).unwrap()).unwrap();
    assert_eq!(index["manifests"][0]["digest"], digest.as_str());
    let manifest = json_blob(&layout, index["manifests"][0]["digest"].as_str().unwrap());
    assert_eq!(
        index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"],
        format!("hcloud-ccm:v{}", env!("CARGO_PKG_VERSION"))
    );
    let config = json_blob(&layout, manifest["config"]["digest"].as_str().unwrap());
    let c = &config["config"];
    assert_eq!(c["Entrypoint"], json!([ENTRYPOINT]));
    assert_eq!(c["User"], "65532:65532");
    assert_eq!(
        c["Labels"]["org.opencontainers.image.version"],
        env!("CARGO_PKG_VERSION")
    );
    assert!(
        c["Labels"]["org.opencontainers.image.source"]
            .as_str()
            .is_some_and(|s| !s.is_empty())
    );
    // The revision is the commit (with "-dirty" for a work tree with changes).
    let head = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(repo())
        .output()
        .unwrap();
    let head = String::from_utf8_lossy(&head.stdout).trim().to_owned();
    let revision = c["Labels"]["org.opencontainers.image.revision"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        revision == head || revision == format!("{head}-dirty"),
        "{revision} vs {head}"
    );
    assert_eq!(config["architecture"], "amd64");

    // The SBOM beside the archive: CycloneDX, naming the crates compiled in.
    let sbom: Value = serde_json::from_slice(
        &std::fs::read(repo().join("target/image/hcloud-ccm.cdx.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(sbom["bomFormat"], "CycloneDX");
    let components: Vec<&str> = sbom["components"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    for name in [
        "kube-client",
        "k8s-openapi",
        "tokio",
        "rustls",
        "cloud-provider",
    ] {
        assert!(
            components.contains(&name),
            "{name} not in the SBOM: {components:?}"
        );
    }

    // Unpack the layers: the image's whole filesystem.
    let rootfs = dir.path().join("rootfs");
    std::fs::create_dir(&rootfs).unwrap();
    let mut compressed = manifest["config"]["size"].as_u64().unwrap();
    for layer in manifest["layers"].as_array().unwrap() {
        compressed += layer["size"].as_u64().unwrap();
        let path = blob(&layout, layer["digest"].as_str().unwrap());
        let status = Command::new("tar")
            .arg("-xf")
            .arg(&path)
            .arg("-C")
            .arg(&rootfs)
            .status()
            .unwrap();
        assert!(status.success());
    }
    // The binary names its version and the commit it was built from.
    let version = Command::new(rootfs.join(&ENTRYPOINT[1..]))
        .arg("--version")
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&version.stdout).trim(),
        format!(
            "hcloud-ccm {} (commit {revision})",
            env!("CARGO_PKG_VERSION")
        )
    );
    let mut files = Vec::new();
    files_under(&rootfs, &rootfs, &mut files);
    files.sort();
    assert_eq!(
        files,
        [
            ENTRYPOINT,
            "/etc/group",
            "/etc/passwd",
            "/etc/ssl/certs/ca-certificates.crt"
        ],
        "the image holds exactly these files (no shell, no libraries)"
    );
    let unpacked: u64 = files
        .iter()
        .map(|f| std::fs::metadata(rootfs.join(&f[1..])).unwrap().len())
        .sum();
    eprintln!(
        "image ({profile} profile): {compressed} bytes compressed, {unpacked} bytes unpacked"
    );
    if profile == "release" {
        assert!(
            compressed <= MAX_IMAGE_BYTES,
            "image is {compressed} bytes, budget {MAX_IMAGE_BYTES}"
        );
    } else {
        eprintln!("size budget not checked: it holds for the release profile only");
    }

    // A pod's view: the ServiceAccount token and CA at the in-cluster paths, the apiserver in
    // KUBERNETES_SERVICE_HOST/PORT, the Deployment's args and env (Secret hcloud: token).
    let plane = ControlPlane::shared().unwrap();
    let admin = plane.client().await.unwrap();
    let sim = Simulator::start(SimConfig::default().token(TOKEN))
        .await
        .unwrap();
    sim.admin()
        .create_server(ServerSeed::new("image-node-1"))
        .await
        .unwrap();
    let rbac = chart::documents(&std::fs::read_to_string(repo().join("deploy/rbac.yaml")).unwrap());
    for doc in &rbac {
        match doc["kind"].as_str().unwrap() {
            "ClusterRole" => {
                let role: ClusterRole = serde_json::from_value(doc.clone()).unwrap();
                Api::<ClusterRole>::all(admin.clone())
                    .create(&PostParams::default(), &role)
                    .await
                    .unwrap();
            }
            "ClusterRoleBinding" => {
                let binding: ClusterRoleBinding = serde_json::from_value(doc.clone()).unwrap();
                Api::<ClusterRoleBinding>::all(admin.clone())
                    .create(&PostParams::default(), &binding)
                    .await
                    .unwrap();
            }
            _ => {}
        }
    }
    let account = rbac.iter().find(|d| d["kind"] == "ServiceAccount").unwrap();
    let sa_token = plane
        .service_account_token(
            account["metadata"]["namespace"].as_str().unwrap(),
            account["metadata"]["name"].as_str().unwrap(),
        )
        .await
        .unwrap();
    // The device nodes every container runtime provides (the entropy source among them).
    std::fs::create_dir(rootfs.join("dev")).unwrap();
    for (name, minor) in [
        ("null", "3"),
        ("zero", "5"),
        ("random", "8"),
        ("urandom", "9"),
    ] {
        let status = Command::new("mknod")
            .arg(rootfs.join("dev").join(name))
            .args(["-m", "666", "c", "1", minor])
            .status()
            .unwrap();
        assert!(status.success(), "mknod /dev/{name}");
    }
    let secrets = rootfs.join("var/run/secrets/kubernetes.io/serviceaccount");
    std::fs::create_dir_all(&secrets).unwrap();
    std::fs::write(secrets.join("token"), &sa_token).unwrap();
    std::fs::write(secrets.join("ca.crt"), plane.ca_pem()).unwrap();
    std::fs::write(secrets.join("namespace"), "kube-system").unwrap();
    let (host, port) = plane
        .server_url()
        .trim_start_matches("https://")
        .rsplit_once(':')
        .unwrap();

    let objects =
        chart::documents(&std::fs::read_to_string(repo().join("deploy/ccm.yaml")).unwrap());
    let deployment = objects.iter().find(|o| o["kind"] == "Deployment").unwrap();
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    // The credentials come from the Secret hcloud only: mounted as files (given here as
    // HCLOUD_TOKEN, which the manifest's HCLOUD_TOKEN_FILE would read).
    let mount = &container["volumeMounts"][0];
    let volume = &deployment["spec"]["template"]["spec"]["volumes"][0];
    assert_eq!(volume["name"], mount["name"]);
    assert_eq!(volume["secret"]["secretName"], "hcloud");
    let mount_path = mount["mountPath"].as_str().unwrap();
    assert!(container["env"].as_array().unwrap().iter().all(|e| {
        e["valueFrom"]["secretKeyRef"]["name"] == "hcloud"
            || e["value"]
                .as_str()
                .is_some_and(|v| v.starts_with(&format!("{mount_path}/")))
    }));
    let metrics_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let log = dir.path().join("ccm.log");
    // Resolved here: the child's environment is cleared, PATH included.
    let chroot = ["/usr/sbin/chroot", "/usr/bin/chroot", "/sbin/chroot"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("chroot (coreutils)");
    // Free ports instead of 8233/10258, since tests run side by side on one host.
    let mut child = tokio::process::Command::new(chroot)
        .arg("--userspec=65532:65532")
        .arg(&rootfs)
        .arg(c["Entrypoint"][0].as_str().unwrap())
        .args(&args)
        .arg("--secure-port=0")
        .env_clear()
        .env("KUBERNETES_SERVICE_HOST", host)
        .env("KUBERNETES_SERVICE_PORT", port)
        .env("HCLOUD_TOKEN", TOKEN)
        .env("HCLOUD_ENDPOINT", sim.base_url())
        .env(
            "HCLOUD_METRICS_ADDRESS",
            format!("127.0.0.1:{metrics_port}"),
        )
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .kill_on_drop(true)
        .spawn()
        .unwrap();

    let nodes: Api<Node> = Api::all(admin.clone());
    nodes
        .create(&PostParams::default(), &kubelet_node("image-node-1"))
        .await
        .unwrap();
    let status = NodeStatus {
        addresses: Some(vec![NodeAddress {
            type_: "Hostname".into(),
            address: "image-node-1".into(),
        }]),
        ..NodeStatus::default()
    };
    nodes
        .patch_status(
            "image-node-1",
            &PatchParams::default(),
            &Patch::Merge(&json!({ "status": status })),
        )
        .await
        .unwrap();
    let initialized = tokio::time::timeout(
        Duration::from_secs(30),
        eventually(
            "image-node-1 initialized by the image's entrypoint",
            Duration::from_secs(60),
            || async {
                let node = nodes.get("image-node-1").await.unwrap();
                if has_taint(&node, UNINITIALIZED_TAINT) {
                    return None;
                }
                node.spec?.provider_id
            },
        ),
    )
    .await;
    let output = std::fs::read_to_string(&log).unwrap_or_default();
    let provider_id = initialized.unwrap_or_else(|_| panic!("not initialized; log:\n{output}"));
    assert!(provider_id.starts_with("hcloud://"), "{provider_id}");
    let metrics = reqwest::get(format!("http://127.0.0.1:{metrics_port}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(metrics.contains("hcloud_api_requests_total"), "{metrics}");
    assert!(child.try_wait().unwrap().is_none(), "exited:\n{output}");
    child.kill().await.unwrap();
}

/// The image script installs the tools it runs (the SBOM generator) with none of the build
/// flags of the image or of its caller: a `cargo install` under `RUSTFLAGS=-C
/// target-feature=+crt-static` cannot build the tool's proc-macros, which once failed the test
/// command on every machine that had not installed the tool before. A stand-in `cargo` records
/// how it was called, from an empty cache.
#[test]
fn the_image_tools_install_without_the_callers_build_flags() {
    let dir = tempfile::tempdir().unwrap();
    let fake_bin = dir.path().join("bin");
    std::fs::create_dir(&fake_bin).unwrap();
    let record = dir.path().join("cargo-calls");
    let cargo = fake_bin.join("cargo");
    std::fs::write(
        &cargo,
        format!(
            "#!/bin/sh\n\
             echo \"args=$*\" >>'{record}'\n\
             echo \"RUSTFLAGS=${{RUSTFLAGS-unset}} CARGO_ENCODED_RUSTFLAGS=${{CARGO_ENCODED_RUSTFLAGS-unset}} CARGO_TARGET_DIR=${{CARGO_TARGET_DIR-unset}}\" >>'{record}'\n\
             root=''; while [ $# -gt 0 ]; do if [ \"$1\" = --root ]; then root=$2; fi; shift; done\n\
             mkdir -p \"$root/bin\" && printf '#!/bin/sh\\n' >\"$root/bin/cargo-cyclonedx\" && chmod +x \"$root/bin/cargo-cyclonedx\"\n",
            record = record.display()
        ),
    )
    .unwrap();
    let status = Command::new("chmod")
        .arg("+x")
        .arg(&cargo)
        .status()
        .unwrap();
    assert!(status.success());
    let cache = dir.path().join("cache");
    let path = format!(
        "{}:{}",
        fake_bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new(repo().join("scripts/image.sh"))
        .arg("--install-tools")
        .env("PATH", path)
        .env("HCLOUD_CCM_CACHE", &cache)
        .env("RUSTFLAGS", "-C target-feature=+crt-static")
        .env("CARGO_ENCODED_RUSTFLAGS", "-Ctarget-feature=+crt-static")
        .env("CARGO_TARGET_DIR", dir.path().join("elsewhere"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "scripts/image.sh --install-tools failed:\n{stderr}"
    );
    let calls = std::fs::read_to_string(&record).unwrap();
    assert!(
        calls.contains("args=install --quiet --locked --root")
            && calls.contains("cargo-cyclonedx --version"),
        "{calls}"
    );
    assert!(
        calls.contains("RUSTFLAGS=unset CARGO_ENCODED_RUSTFLAGS=unset CARGO_TARGET_DIR=unset"),
        "the install saw the caller's build flags: {calls}"
    );
    let tool = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(tool.starts_with(&cache.display().to_string()), "{tool}");
    assert!(Path::new(&tool).is_file(), "{tool}");
}
