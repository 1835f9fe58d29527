//! One etcd + kube-apiserver pair on loopback.
//!
//! Processes are started under a small `sh` supervisor whose standard input is a pipe held by
//! the test process. When that pipe closes — [`ControlPlane`] dropped, the test binary exiting
//! normally, panicking, aborting or being killed — the supervisor kills both processes and
//! removes the data directory. No orphan survives the test run, without any signal handling
//! or unsafe code in the test process.

use std::io::Write as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use base64::Engine as _;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::pki::Pki;
use crate::{Error, binaries};

/// Audit every write (who, what, when) at Metadata level; reads are not logged.
const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n  verbs: [create, update, patch, delete, deletecollection]\n- level: None\n";

const READY_TIMEOUT: Duration = Duration::from_secs(120);
const START_ATTEMPTS: usize = 3;

/// Environment variable naming the start log (see the crate documentation).
pub const START_LOG_ENV: &str = "KUBE_HARNESS_START_LOG";

/// How a control plane starts, beyond the defaults.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Extra kube-apiserver arguments (a later one overrides a default of the same flag).
    pub apiserver_args: Vec<String>,
    /// Run kube-controller-manager's node IPAM (`--allocate-node-cidrs`) with this cluster CIDR
    /// (one, or an IPv4 and an IPv6 one separated by a comma): every Node gets a pod CIDR of each
    /// (`/24` for IPv4, `/64` for IPv6) shortly after it registers, as in a real cluster.
    pub node_ipam_cluster_cidr: Option<String>,
}

/// A running, private Kubernetes control plane (etcd + kube-apiserver, RBAC on).
///
/// Dropping it stops both processes and deletes their data.
#[derive(Debug)]
pub struct ControlPlane {
    supervisor: Child,
    stdin: Option<ChildStdin>,
    dir: PathBuf,
    server_url: String,
    ca_pem: String,
    admin_cert_pem: String,
    admin_key_pem: String,
}

static SHARED: OnceLock<Result<ControlPlane, String>> = OnceLock::new();

impl ControlPlane {
    /// Start a private control plane and wait until `/readyz` answers `ok` and the
    /// `kube-system` and `default` namespaces exist.
    pub async fn start() -> Result<ControlPlane, Error> {
        Self::start_with(&Options::default()).await
    }

    /// [`ControlPlane::start`] with [`Options`]: extra kube-apiserver arguments, a
    /// kube-controller-manager for node IPAM.
    pub async fn start_with(options: &Options) -> Result<ControlPlane, Error> {
        let mut last = None;
        for _ in 0..START_ATTEMPTS {
            let plane = Self::spawn(options)?;
            match plane.wait_ready().await {
                Ok(()) => return Ok(plane),
                // A port taken between picking and binding is the only retryable failure.
                Err(err) if err.to_string().contains("address already in use") => last = Some(err),
                Err(err) => return Err(err),
            }
        }
        Err(last.unwrap_or_else(|| Error::SharedFailed("no start attempt was made".into())))
    }

    /// The control plane shared by every test of the current test binary, started on first use.
    ///
    /// Safe to call from any thread or async runtime; build clients with
    /// [`ControlPlane::client`] inside each test's own runtime.
    pub fn shared() -> Result<&'static ControlPlane, Error> {
        Self::shared_with(Options::default)
    }

    /// [`ControlPlane::shared`] started with [`Options`], for a test binary whose tests all need
    /// them (e.g. an audit policy of their own): one binary, one control plane. The first call
    /// of the binary starts it with `options()`; later calls (of either function) get that same
    /// control plane, so every caller of one binary must ask for the same options.
    pub fn shared_with(options: impl FnOnce() -> Options) -> Result<&'static ControlPlane, Error> {
        let result =
            SHARED.get_or_init(|| Self::start_blocking(options()).map_err(|e| e.to_string()));
        result
            .as_ref()
            .map_err(|msg| Error::SharedFailed(msg.clone()))
    }

    /// [`ControlPlane::start_with`] from synchronous code, on a thread and runtime of its own
    /// (named `kube-harness-shared` in the start log): for a plane a test binary keeps in a
    /// static of its own, beside [`ControlPlane::shared`].
    pub fn start_blocking(options: Options) -> Result<ControlPlane, Error> {
        let start = move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(Error::io("build a runtime"))?;
            runtime.block_on(ControlPlane::start_with(&options))
        };
        std::thread::Builder::new()
            .name("kube-harness-shared".to_owned())
            .spawn(start)
            .map_err(Error::io("start a thread"))?
            .join()
            .unwrap_or_else(|_| Err(Error::SharedFailed("the start thread panicked".to_owned())))
    }

    /// `https://127.0.0.1:PORT`
    pub fn server_url(&self) -> &str {
        &self.server_url
    }

    /// PEM of the CA that signed the apiserver's serving certificate.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// Directory holding this control plane's data, certificates and logs.
    pub fn data_dir(&self) -> &Path {
        &self.dir
    }

    /// Every write request the apiserver has completed so far, oldest first, as audit events
    /// (`audit.k8s.io/v1` `Event` JSON: `user.username`, `verb`, `objectRef`, `stageTimestamp`,
    /// `responseStatus.code`, ...). Lets tests prove who wrote what, and when.
    pub fn audit_events(&self) -> Vec<serde_json::Value> {
        let text = std::fs::read_to_string(self.dir.join("audit.log")).unwrap_or_default();
        text.lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .filter(|event| event["stage"] == "ResponseComplete")
            .collect()
    }

    /// A self-contained kubeconfig with cluster-admin (`system:masters`) credentials.
    pub fn kubeconfig_yaml(&self) -> String {
        self.kubeconfig_with_user(&admin_user(&self.admin_cert_pem, &self.admin_key_pem))
    }

    /// Write [`Self::kubeconfig_yaml`] to `path`.
    pub fn write_kubeconfig(&self, path: &Path) -> Result<(), Error> {
        std::fs::write(path, self.kubeconfig_yaml())
            .map_err(Error::io(format!("write kubeconfig {}", path.display())))
    }

    /// A cluster-admin client. Build it inside the runtime that uses it.
    pub async fn client(&self) -> Result<kube::Client, Error> {
        client_from_yaml(&self.kubeconfig_yaml()).await
    }

    /// A client that authenticates as ServiceAccount `namespace/name` with a freshly requested
    /// token (the namespace and account are created when missing). It has exactly the
    /// permissions RBAC grants that account, which lets tests prove shipped RBAC rules.
    pub async fn service_account_client(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<kube::Client, Error> {
        let token = self.service_account_token(namespace, name).await?;
        client_from_yaml(&self.service_account_kubeconfig_yaml(&token)).await
    }

    /// A kubeconfig that authenticates with the given bearer token.
    pub fn service_account_kubeconfig_yaml(&self, token: &str) -> String {
        self.kubeconfig_with_user(&format!("token: {token}"))
    }

    /// Request a one-hour token for ServiceAccount `namespace/name`, creating both if missing.
    pub async fn service_account_token(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<String, Error> {
        let admin = self.client().await?;
        ensure_namespace(&admin, namespace).await?;
        let accounts: Api<ServiceAccount> = Api::namespaced(admin, namespace);
        let mut account = ServiceAccount::default();
        account.metadata.name = Some(name.to_owned());
        match accounts.create(&PostParams::default(), &account).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(e) => {
                return Err(Error::kube(format!(
                    "creating ServiceAccount {namespace}/{name}"
                ))(e));
            }
        }
        // Through JSON: the Rust types of TokenRequest differ between Kubernetes versions (the
        // spec and the token became optional in 1.36), and this builds for both.
        let request: TokenRequest =
            serde_json::from_value(serde_json::json!({"spec": {"expirationSeconds": 3600}}))
                .map_err(|e| Error::Kubeconfig(format!("a TokenRequest: {e}")))?;
        let issued = accounts
            .create_token_request(name, &PostParams::default(), &request)
            .await
            .map_err(Error::kube(format!(
                "requesting a token for {namespace}/{name}"
            )))?;
        serde_json::to_value(&issued)
            .ok()
            .and_then(|issued| issued["status"]["token"].as_str().map(str::to_owned))
            .ok_or_else(|| Error::Kubeconfig("TokenRequest returned no token".into()))
    }

    fn kubeconfig_with_user(&self, user: &str) -> String {
        kubeconfig(&self.server_url, &self.ca_pem, user)
    }

    fn spawn(options: &Options) -> Result<ControlPlane, Error> {
        let apiserver = binaries::kube_apiserver()?;
        let etcd = binaries::etcd()?;
        let controller_manager = match options.node_ipam_cluster_cidr {
            Some(_) => Some(binaries::kube_controller_manager()?),
            None => None,
        };
        let dir = tempfile::Builder::new()
            .prefix("kube-harness-")
            .tempdir()
            .map_err(Error::io("create a temporary directory"))?
            // The supervisor owns removal from here on (it outlives panics and aborts).
            .keep();
        let pki = Pki::generate()?;
        for (file, pem) in [
            ("ca.crt", &pki.ca_cert),
            ("apiserver.crt", &pki.serving_cert),
            ("apiserver.key", &pki.serving_key),
            ("sa.key", &pki.service_account_key),
            ("sa.pub", &pki.service_account_public_key),
            ("audit-policy.yaml", &AUDIT_POLICY.to_owned()),
        ] {
            std::fs::write(dir.join(file), pem).map_err(Error::io(format!("write {file}")))?;
        }

        let etcd_client = free_port()?;
        let etcd_peer = free_port()?;
        let secure = free_port()?;
        let d = |name: &str| dir.join(name).display().to_string();
        let etcd_cmd = command_line(
            &etcd,
            &[
                "--name=harness".to_owned(),
                format!("--data-dir={}", d("etcd-data")),
                format!("--listen-client-urls=http://127.0.0.1:{etcd_client}"),
                format!("--advertise-client-urls=http://127.0.0.1:{etcd_client}"),
                format!("--listen-peer-urls=http://127.0.0.1:{etcd_peer}"),
                format!("--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer}"),
                format!("--initial-cluster=harness=http://127.0.0.1:{etcd_peer}"),
                "--log-level=warn".to_owned(),
            ],
        );
        let mut apiserver_args = vec![
            format!("--etcd-servers=http://127.0.0.1:{etcd_client}"),
            "--bind-address=127.0.0.1".to_owned(),
            "--advertise-address=127.0.0.1".to_owned(),
            // The `kubernetes` Service's endpoints may not name a loopback address; nothing
            // in a test reaches the apiserver through that Service.
            "--endpoint-reconciler-type=none".to_owned(),
            format!("--secure-port={secure}"),
            format!("--cert-dir={}", d("certs")),
            format!("--tls-cert-file={}", d("apiserver.crt")),
            format!("--tls-private-key-file={}", d("apiserver.key")),
            format!("--client-ca-file={}", d("ca.crt")),
            "--authorization-mode=RBAC".to_owned(),
            format!("--service-account-key-file={}", d("sa.pub")),
            format!("--service-account-signing-key-file={}", d("sa.key")),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local".to_owned(),
            // Dual-stack, so that Services can ask for both families (spec.ipFamilyPolicy).
            "--service-cluster-ip-range=10.96.0.0/16,fd00:10:96::/108".to_owned(),
            "--enable-priority-and-fairness=false".to_owned(),
            format!("--audit-policy-file={}", d("audit-policy.yaml")),
            format!("--audit-log-path={}", d("audit.log")),
            "--profiling=false".to_owned(),
            "--v=0".to_owned(),
        ];
        apiserver_args.extend(options.apiserver_args.iter().cloned());
        let apiserver_cmd = command_line(&apiserver, &apiserver_args);
        let server_url = format!("https://127.0.0.1:{secure}");
        // kube-controller-manager with node IPAM only: it gives every Node without one a pod CIDR
        // from the cluster CIDR, as in a cluster; it waits for the apiserver by itself.
        let controller_manager_cmd = match (&controller_manager, &options.node_ipam_cluster_cidr) {
            (Some(binary), Some(cidr)) => {
                std::fs::write(
                    dir.join("controller-manager.kubeconfig"),
                    admin_kubeconfig(&server_url, &pki),
                )
                .map_err(Error::io("write the controller manager's kubeconfig"))?;
                let args = [
                    format!("--kubeconfig={}", d("controller-manager.kubeconfig")),
                    "--controllers=nodeipam".to_owned(),
                    "--allocate-node-cidrs=true".to_owned(),
                    format!("--cluster-cidr={cidr}"),
                    "--leader-elect=false".to_owned(),
                    "--bind-address=127.0.0.1".to_owned(),
                    format!("--secure-port={}", free_port()?),
                    format!("--cert-dir={}", d("controller-manager-certs")),
                    "--v=0".to_owned(),
                ];
                format!(
                    "{} >'{dir}/kube-controller-manager.log' 2>&1 &\nkcm=$!\necho $kcm >'{dir}/kube-controller-manager.pid'\n",
                    command_line(binary, &args),
                    dir = dir.display(),
                )
            }
            _ => "kcm=\n".to_owned(),
        };
        let script = format!(
            "#!/bin/sh\n\
             # Supervises one test control plane; stops it when stdin closes.\n\
             {etcd_cmd} >'{dir}/etcd.log' 2>&1 &\n\
             etcd=$!\n\
             {apiserver_cmd} >'{dir}/kube-apiserver.log' 2>&1 &\n\
             api=$!\n\
             echo $api >'{dir}/kube-apiserver.pid'\n\
             echo $etcd >'{dir}/etcd.pid'\n\
             {controller_manager_cmd}\
             cat >/dev/null\n\
             kill -9 $api $etcd $kcm 2>/dev/null\n\
             wait $api $etcd $kcm 2>/dev/null\n\
             if [ -z \"${{KUBE_HARNESS_KEEP:-}}\" ]; then rm -rf '{dir}'; fi\n",
            dir = dir.display(),
        );
        let script_path = dir.join("supervise.sh");
        std::fs::write(&script_path, script).map_err(Error::io("write the supervisor script"))?;
        let mut supervisor = Command::new("sh")
            .arg(&script_path)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(Error::io("start the control-plane supervisor"))?;
        let stdin = supervisor.stdin.take();
        if let Some(log) = std::env::var_os(START_LOG_ENV) {
            append_start_line(Path::new(&log))?;
        }
        Ok(ControlPlane {
            supervisor,
            stdin,
            dir,
            server_url,
            ca_pem: pki.ca_cert,
            admin_cert_pem: pki.admin_cert,
            admin_key_pem: pki.admin_key,
        })
    }

    async fn wait_ready(&self) -> Result<(), Error> {
        let started = Instant::now();
        let mut last_error = String::from("not tried yet");
        let client = self.client().await?;
        while started.elapsed() < READY_TIMEOUT {
            let request = http::Request::get("/readyz")
                .body(Vec::new())
                .map_err(|e| Error::Kubeconfig(e.to_string()))?;
            match client.request_text(request).await {
                Ok(body) if body.trim() == "ok" => {
                    // The apiserver creates its system namespaces shortly after it is ready;
                    // tests write into `default` and `kube-system` at once.
                    let namespaces: Api<Namespace> = Api::all(client.clone());
                    let mut missing = None;
                    for name in ["kube-system", "default"] {
                        match namespaces.get_opt(name).await {
                            Ok(Some(_)) => {}
                            Ok(None) => {
                                missing = Some(format!("namespace {name} not created yet"));
                                break;
                            }
                            Err(e) => {
                                missing = Some(e.to_string());
                                break;
                            }
                        }
                    }
                    match missing {
                        None => return Ok(()),
                        Some(why) => last_error = why,
                    }
                }
                Ok(body) => last_error = format!("/readyz answered {body:?}"),
                Err(e) => last_error = e.to_string(),
            }
            if self
                .log_tail("kube-apiserver.log")
                .contains("address already in use")
            {
                last_error = "address already in use".into();
                break;
            }
            if let Some(dead) = ["kube-apiserver", "etcd"]
                .into_iter()
                .find(|p| self.exited(p))
            {
                last_error = format!("{dead} exited");
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Err(Error::NotReady {
            seconds: READY_TIMEOUT.as_secs(),
            last_error,
            apiserver_log: self.log_tail("kube-apiserver.log"),
            etcd_log: self.log_tail("etcd.log"),
        })
    }

    /// Whether the supervised process `name` has exited (it stays a zombie until the
    /// supervisor reaps it, so its /proc entry tells).
    fn exited(&self, name: &str) -> bool {
        let Ok(pid) = std::fs::read_to_string(self.dir.join(format!("{name}.pid"))) else {
            return false; // not started yet
        };
        match std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())) {
            Ok(stat) => stat
                .rsplit_once(") ")
                .is_some_and(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X')),
            Err(_) => true,
        }
    }

    fn log_tail(&self, file: &str) -> String {
        let text = std::fs::read_to_string(self.dir.join(file)).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = stdin.flush();
        }
        // Closing stdin told the supervisor to stop; wait for it so nothing outlives us.
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            match self.supervisor.try_wait() {
                Ok(Some(_)) | Err(_) => break,
                Ok(None) if Instant::now() > deadline => {
                    let _ = self.supervisor.kill();
                    let _ = self.supervisor.wait();
                    break;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }
}

pub(crate) async fn client_from_yaml(yaml: &str) -> Result<kube::Client, Error> {
    let kubeconfig = Kubeconfig::from_yaml(yaml).map_err(|e| Error::Kubeconfig(e.to_string()))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| Error::Kubeconfig(e.to_string()))?;
    kube::Client::try_from(config).map_err(Error::kube("building a client"))
}

/// Create `namespace` unless it exists.
pub async fn ensure_namespace(client: &kube::Client, namespace: &str) -> Result<(), Error> {
    let api: Api<Namespace> = Api::all(client.clone());
    let mut ns = Namespace::default();
    ns.metadata.name = Some(namespace.to_owned());
    match api.create(&PostParams::default(), &ns).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(e) => Err(Error::kube(format!("creating namespace {namespace}"))(e)),
    }
}

/// Append one line for an apiserver start to `log`: the time (RFC 3339), the test binary
/// (without Cargo's hash suffix) and the starting thread, which the test harness names after
/// the test (`kube-harness-shared` for [`ControlPlane::shared`]). Tab-separated.
fn append_start_line(log: &Path) -> Result<(), Error> {
    let binary = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "unknown".to_owned());
    let thread = std::thread::current();
    let line = start_line(
        &k8s_openapi::jiff::Timestamp::now().to_string(),
        &binary,
        thread.name().unwrap_or("unnamed"),
    );
    // One `write` of a short line to a file opened for appending: lines of concurrently
    // starting test processes do not interleave.
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .and_then(|mut file| file.write_all(line.as_bytes()))
        .map_err(Error::io(format!("append to {}", log.display())))
}

fn start_line(time: &str, binary: &str, thread: &str) -> String {
    // Cargo names test binaries `<target>-<16 hex digits>`.
    let binary = match binary.rsplit_once('-') {
        Some((name, hash)) if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => {
            name
        }
        _ => binary,
    };
    format!("{time}\t{binary}\t{thread}\n")
}

fn free_port() -> Result<u16, Error> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(Error::io("pick a free port"))?;
    let port = listener
        .local_addr()
        .map_err(Error::io("read a bound port"))?
        .port();
    Ok(port)
}

fn command_line(binary: &Path, args: &[String]) -> String {
    std::iter::once(binary.display().to_string())
        .chain(args.iter().cloned())
        .map(|part| format!("'{}'", part.replace('\'', "'\\''")))
        .collect::<Vec<_>>()
        .join(" ")
}

fn kubeconfig(server: &str, ca_pem: &str, user: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: harness\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\nusers:\n- name: harness-user\n  user:\n    {user}\ncontexts:\n- name: harness\n  context:\n    cluster: harness\n    user: harness-user\n    namespace: default\ncurrent-context: harness\n",
        ca = b64(ca_pem),
    )
}

fn admin_user(cert_pem: &str, key_pem: &str) -> String {
    format!(
        "client-certificate-data: {}\n    client-key-data: {}",
        b64(cert_pem),
        b64(key_pem)
    )
}

fn admin_kubeconfig(server: &str, pki: &Pki) -> String {
    kubeconfig(
        server,
        &pki.ca_cert,
        &admin_user(&pki.admin_cert, &pki.admin_key),
    )
}

fn b64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_start_line_names_the_binary_without_cargos_hash_and_the_test() {
        assert_eq!(
            start_line(
                "2026-11-25T03:00:00Z",
                "integration-2c836d0511555978",
                "node_controller::a_test"
            ),
            "2026-11-25T03:00:00Z\tintegration\tnode_controller::a_test\n"
        );
        // Not a Cargo hash: kept whole.
        assert_eq!(
            start_line("t", "hcloud-ccm", "main"),
            "t\thcloud-ccm\tmain\n"
        );
    }

    #[test]
    fn every_start_appends_one_line() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("starts.log");
        append_start_line(&log).unwrap();
        append_start_line(&log).unwrap();
        let text = std::fs::read_to_string(&log).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        let fields: Vec<&str> = lines[0].split('\t').collect();
        assert_eq!(fields.len(), 3, "{text}");
        assert!(
            fields[0].parse::<k8s_openapi::jiff::Timestamp>().is_ok(),
            "{text}"
        );
        assert!(fields[1].starts_with("kube_harness"), "{text}");
        assert!(fields[2].contains("every_start_appends_one_line"), "{text}");
    }
}
