//! Credentials read again while the process runs: the token of `HCLOUD_TOKEN_FILE` and the
//! Robot user and password of `ROBOT_USER_FILE` / `ROBOT_PASSWORD_FILE`.
//!
//! A Secret mounted as a volume changes by an atomic swap of its `..data` symlink, so the file
//! is watched by its content: read every [`POLL_INTERVAL`], and at once when the API answers
//! 401 (the clients ask through [`hcloud_api::credentials::Reauthorize`] and try the refused
//! request once more with the new credential). A new Hetzner token is checked before it is
//! used: it must see the cluster's servers, as the project check at start demands
//! ([`hcloud_provider::HcloudInstances::check_token`]); a token of another project, or one the
//! API rejects, is refused and the one in use kept. Requests under way finish with the
//! credential they were sent with.
//!
//! Every outcome is counted in `cloud_controller_credential_reloads_total{credential, result}`
//! (`applied`, `refused`, `unreadable`) and logged, a refusal at warn level with a
//! `CloudProjectMismatch` Warning on the first cloud Node for a token of another project. The
//! credentials themselves never reach a log line, an event or a metric.
//!
//! Credentials from the environment (`HCLOUD_TOKEN`, `ROBOT_USER`, `ROBOT_PASSWORD`) are not
//! watched: changing them needs a restart.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use hcloud_api::credentials::{Reauthorize, Reauthorizing};
use hcloud_api::robot::{RobotClient, RobotPassword};
use hcloud_api::{Client, ClientConfig, Token};
use hcloud_provider::{CLOUD_PROJECT_MISMATCH, Events, HcloudInstances, ProjectCheck};
use k8s_openapi::api::core::v1::Node;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use tokio_util::sync::CancellationToken;

use crate::config::Secret;

/// How often the credential files are read.
pub const POLL_INTERVAL: Duration = Duration::from_secs(5);

/// Which credential: the `credential` label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Credential {
    /// The Hetzner Cloud API token.
    Hcloud,
    /// The Robot webservice user and password.
    Robot,
}

impl Credential {
    /// The label value and the name in log lines.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Hcloud => "hcloud",
            Self::Robot => "robot",
        }
    }

    /// The variables naming the files, for log lines.
    fn files(self) -> &'static str {
        match self {
            Self::Hcloud => "HCLOUD_TOKEN_FILE",
            Self::Robot => "ROBOT_USER_FILE/ROBOT_PASSWORD_FILE",
        }
    }
}

/// What a reading of the files that found something new came to: the `result` label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A new credential is in use.
    Applied,
    /// A new credential was refused (another project, rejected by the API); the old one is
    /// kept.
    Refused,
    /// A file could not be read or is empty; the old credential is kept.
    Unreadable,
}

impl Outcome {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Applied => "applied",
            Self::Refused => "refused",
            Self::Unreadable => "unreadable",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReloadLabels {
    credential: String,
    result: String,
}

/// `cloud_controller_credential_reloads_total{credential, result}`. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct ReloadMetrics {
    reloads: Family<ReloadLabels, Counter>,
}

impl ReloadMetrics {
    /// Register `cloud_controller_credential_reloads_total`.
    pub fn register(&self, registry: &mut prometheus_client::registry::Registry) {
        registry.register(
            "cloud_controller_credential_reloads",
            "Credential files read again with a new content, by credential (hcloud, robot) and result (applied, refused, unreadable).",
            self.reloads.clone(),
        );
    }

    fn count(&self, credential: Credential, outcome: Outcome) {
        self.counter(credential, outcome).inc();
    }

    fn counter(&self, credential: Credential, outcome: Outcome) -> Counter {
        self.reloads
            .get_or_create(&ReloadLabels {
                credential: credential.as_str().to_owned(),
                result: outcome.as_str().to_owned(),
            })
            .clone()
    }

    /// The count for `credential` and `outcome` (for tests and logs).
    pub fn get(&self, credential: Credential, outcome: Outcome) -> u64 {
        self.counter(credential, outcome).get()
    }
}

/// Why a new credential is not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckError {
    /// It is wrong for good (another project, rejected): refused, not checked again until the
    /// file changes again.
    Refused(String),
    /// The check could not be made (no answer): tried again at the next reading.
    Failed(String),
}

/// Where a credential is read from, how a new one is checked and how it is put in place.
pub trait Source: Send + Sync + 'static {
    /// The credential (compared to find a change; never shown).
    type Value: PartialEq + Send + Sync;
    /// Which one.
    const CREDENTIAL: Credential;
    /// Read the files.
    fn read(&self) -> Result<Self::Value, String>;
    /// Whether `value` may be used.
    fn check<'a>(&'a self, value: &'a Self::Value) -> BoxFuture<'a, Result<(), CheckError>>;
    /// Use `value` from now on.
    fn apply(&self, value: &Self::Value) -> Result<(), String>;
}

struct State<V> {
    current: V,
    /// The last refused value: not checked (nor counted) again while the files hold it.
    refused: Option<V>,
    /// Whether the last reading failed: counted and logged once per failing spell.
    unreadable: bool,
}

/// Reads a [`Source`] again and swaps its credential when it changed and passes its check.
/// One reading at a time: a poll and the question after a 401 do not race.
pub struct Reloader<S: Source> {
    source: S,
    state: tokio::sync::Mutex<State<S::Value>>,
    metrics: ReloadMetrics,
}

impl<S: Source> std::fmt::Debug for Reloader<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reloader")
            .field("credential", &S::CREDENTIAL)
            .finish_non_exhaustive()
    }
}

impl<S: Source> Reloader<S> {
    /// A reloader of `source` whose credential in use is `current`.
    pub fn new(source: S, current: S::Value, metrics: ReloadMetrics) -> Self {
        Self {
            source,
            state: tokio::sync::Mutex::new(State {
                current,
                refused: None,
                unreadable: false,
            }),
            metrics,
        }
    }

    /// Read the files again; `None` when nothing new was found (the same credential, the
    /// same refused one, still unreadable, or a check that could not be made).
    pub async fn reload(&self) -> Option<Outcome> {
        let credential = S::CREDENTIAL;
        let mut state = self.state.lock().await;
        let value = match self.source.read() {
            Ok(value) => {
                state.unreadable = false;
                value
            }
            Err(reason) => {
                if std::mem::replace(&mut state.unreadable, true) {
                    return None;
                }
                tracing::warn!(
                    credential = credential.as_str(),
                    error = %reason,
                    "cannot read the credential files ({}) again; keeping the credential in use",
                    credential.files()
                );
                self.metrics.count(credential, Outcome::Unreadable);
                return Some(Outcome::Unreadable);
            }
        };
        if value == state.current || state.refused.as_ref() == Some(&value) {
            return None;
        }
        let outcome = match self.source.check(&value).await {
            Ok(()) => self.source.apply(&value).map_err(CheckError::Refused),
            Err(err) => Err(err),
        };
        match outcome {
            Ok(()) => {
                tracing::info!(
                    credential = credential.as_str(),
                    "a new credential from {} is in use",
                    credential.files()
                );
                state.current = value;
                state.refused = None;
                self.metrics.count(credential, Outcome::Applied);
                Some(Outcome::Applied)
            }
            Err(CheckError::Refused(reason)) => {
                tracing::warn!(
                    credential = credential.as_str(),
                    reason = %reason,
                    "the new credential from {} is refused; keeping the one in use",
                    credential.files()
                );
                state.refused = Some(value);
                self.metrics.count(credential, Outcome::Refused);
                Some(Outcome::Refused)
            }
            Err(CheckError::Failed(reason)) => {
                tracing::warn!(
                    credential = credential.as_str(),
                    error = %reason,
                    "cannot check the new credential from {} yet; keeping the one in use and trying again",
                    credential.files()
                );
                None
            }
        }
    }

    /// Read the files every [`POLL_INTERVAL`] until `shutdown`.
    pub fn spawn_polling(self: &Arc<Self>, shutdown: CancellationToken) {
        let reloader = self.clone();
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(POLL_INTERVAL);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticks.tick().await;
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    _ = ticks.tick() => {}
                }
                reloader.reload().await;
            }
        });
    }
}

/// After a 401: read the files at once (the refused request is tried again if that changed
/// the credential).
impl<S: Source> Reauthorize for Reloader<S> {
    fn reauthorize(&self) -> Reauthorizing<'_> {
        Box::pin(async move {
            tracing::info!(
                credential = S::CREDENTIAL.as_str(),
                "the API refused the credential in use; reading {} again",
                S::CREDENTIAL.files()
            );
            self.reload().await;
        })
    }
}

/// A secret file's content, trimmed; empty is an error.
fn read_secret(path: &Path) -> Result<Secret, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let value = text.trim();
    if value.is_empty() {
        return Err(format!("{} is empty", path.display()));
    }
    Ok(Secret::new(value))
}

/// The token of `HCLOUD_TOKEN_FILE` for `client`, checked against the cluster's Nodes.
#[derive(Debug)]
pub struct HcloudTokenFile {
    /// The file.
    pub file: PathBuf,
    /// The client whose token is swapped.
    pub client: Client,
    /// The Nodes the new token must see servers of.
    pub nodes: kube::Api<Node>,
    /// Where the Warning about a token of another project goes.
    pub events: Events,
}

impl HcloudTokenFile {
    /// A client with `token` and the endpoint of the one in use, counted in its metrics.
    fn candidate(&self, token: &Secret) -> Result<Client, String> {
        let mut config =
            ClientConfig::new(Token::new(token.expose())).with_endpoint(self.client.endpoint());
        config.metrics = Some(self.client.metrics().clone());
        Client::new(config).map_err(|e| e.to_string())
    }
}

impl Source for HcloudTokenFile {
    type Value = Secret;
    const CREDENTIAL: Credential = Credential::Hcloud;

    fn read(&self) -> Result<Secret, String> {
        read_secret(&self.file)
    }

    fn check<'a>(&'a self, token: &'a Secret) -> BoxFuture<'a, Result<(), CheckError>> {
        Box::pin(async move {
            let candidate = self.candidate(token).map_err(CheckError::Refused)?;
            // The start-up's token check first: a token the API rejects is refused at once.
            if let Err(err) = candidate.locations().list().await {
                return Err(match err.status() {
                    Some(401 | 403) => CheckError::Refused(format!(
                        "the Hetzner Cloud API rejects the new token ({})",
                        err.code().map(ToString::to_string).unwrap_or_default()
                    )),
                    _ => CheckError::Failed(err.to_string()),
                });
            }
            let nodes = hcloud_provider::project_nodes(&self.nodes)
                .await
                .map_err(|e| CheckError::Failed(format!("listing Nodes: {e}")))?;
            match HcloudInstances::check_token(&candidate, &nodes).await {
                Ok(ProjectCheck::Mismatch { nodes: count }) => {
                    let message = format!(
                        "the new API token of HCLOUD_TOKEN_FILE sees none of the servers of the {count} Nodes with an hcloud:// providerID: it belongs to another project. It is not used; the token in use is kept"
                    );
                    if let Some(first) = first_cloud_node(&nodes) {
                        self.events
                            .warn(first, CLOUD_PROJECT_MISMATCH, &message)
                            .await;
                    }
                    Err(CheckError::Refused(message))
                }
                Ok(_) => Ok(()),
                Err(err) => Err(CheckError::Failed(err.to_string())),
            }
        })
    }

    fn apply(&self, token: &Secret) -> Result<(), String> {
        self.client
            .set_token(&Token::new(token.expose()))
            .map_err(|e| e.to_string())
    }
}

/// The first Node (by name) with an `hcloud://` providerID: the subject of the Warning.
fn first_cloud_node(nodes: &[Node]) -> Option<&Node> {
    nodes
        .iter()
        .filter(|node| {
            matches!(
                hcloud_provider::server_key(node),
                Ok(hcloud_provider::ServerKey::Id(_))
            )
        })
        .min_by_key(|node| node.metadata.name.as_deref().unwrap_or_default())
}

/// The Robot user and password of `ROBOT_USER_FILE` and `ROBOT_PASSWORD_FILE` for `client`
/// (no check beyond both being readable: Robot allows few requests an hour).
#[derive(Debug)]
pub struct RobotCredentialFiles {
    /// `ROBOT_USER_FILE`.
    pub user_file: PathBuf,
    /// `ROBOT_PASSWORD_FILE`.
    pub password_file: PathBuf,
    /// The client whose credentials are swapped.
    pub client: RobotClient,
}

impl Source for RobotCredentialFiles {
    type Value = (Secret, Secret);
    const CREDENTIAL: Credential = Credential::Robot;

    fn read(&self) -> Result<(Secret, Secret), String> {
        Ok((
            read_secret(&self.user_file)?,
            read_secret(&self.password_file)?,
        ))
    }

    fn check<'a>(&'a self, _: &'a Self::Value) -> BoxFuture<'a, Result<(), CheckError>> {
        Box::pin(async { Ok(()) })
    }

    fn apply(&self, (user, password): &(Secret, Secret)) -> Result<(), String> {
        self.client
            .set_credentials(user.expose(), RobotPassword::new(password.expose()))
            .map_err(|e| e.to_string())
    }
}

/// Watch the credential files the configuration read (none when the credentials came from the
/// environment): poll them and answer the clients' questions after a 401.
pub fn watch(
    config: &crate::config::Config,
    cloud: &crate::cloud::Cloud,
    kube: kube::Client,
    metrics: &ReloadMetrics,
    shutdown: &CancellationToken,
) {
    if let Some(file) = &config.hcloud.token_file {
        let source = HcloudTokenFile {
            file: file.clone(),
            client: cloud.client.clone(),
            nodes: kube::Api::all(kube),
            events: cloud.provider.events().clone(),
        };
        let reloader = Arc::new(Reloader::new(
            source,
            config.hcloud.token.clone(),
            metrics.clone(),
        ));
        cloud.client.set_reauthorize(reloader.clone());
        reloader.spawn_polling(shutdown.clone());
        tracing::info!(file = %file.display(), "watching HCLOUD_TOKEN_FILE for a new token");
    }
    let robot = &config.robot;
    if let (Some(client), Some((user_file, password_file)), Some(user), Some(password)) =
        (&cloud.robot, &robot.files, &robot.user, &robot.password)
    {
        let source = RobotCredentialFiles {
            user_file: user_file.clone(),
            password_file: password_file.clone(),
            client: client.clone(),
        };
        let reloader = Arc::new(Reloader::new(
            source,
            (user.clone(), password.clone()),
            metrics.clone(),
        ));
        client.set_reauthorize(reloader.clone());
        reloader.spawn_polling(shutdown.clone());
        tracing::info!("watching ROBOT_USER_FILE and ROBOT_PASSWORD_FILE for new credentials");
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)] // test code

    use std::sync::Mutex;

    use super::*;

    /// A source over a value in memory: `None` is unreadable; values starting with `bad` are
    /// refused, `down` cannot be checked.
    #[derive(Default)]
    struct Fake {
        file: Mutex<Option<&'static str>>,
        applied: Mutex<Vec<&'static str>>,
        checks: Mutex<usize>,
    }

    impl Source for Arc<Fake> {
        type Value = &'static str;
        const CREDENTIAL: Credential = Credential::Hcloud;

        fn read(&self) -> Result<&'static str, String> {
            self.file.lock().unwrap().ok_or_else(|| "gone".to_owned())
        }

        fn check<'a>(&'a self, value: &'a &'static str) -> BoxFuture<'a, Result<(), CheckError>> {
            *self.checks.lock().unwrap() += 1;
            let verdict = if value.starts_with("bad") {
                Err(CheckError::Refused("another project".to_owned()))
            } else if value.starts_with("down") {
                Err(CheckError::Failed("no answer".to_owned()))
            } else {
                Ok(())
            };
            Box::pin(async move { verdict })
        }

        fn apply(&self, value: &&'static str) -> Result<(), String> {
            self.applied.lock().unwrap().push(value);
            Ok(())
        }
    }

    fn reloader(current: &'static str) -> (Arc<Fake>, Reloader<Arc<Fake>>, ReloadMetrics) {
        let fake = Arc::new(Fake::default());
        *fake.file.lock().unwrap() = Some(current);
        let metrics = ReloadMetrics::default();
        let reloader = Reloader::new(fake.clone(), current, metrics.clone());
        (fake, reloader, metrics)
    }

    fn set(fake: &Fake, value: Option<&'static str>) {
        *fake.file.lock().unwrap() = value;
    }

    #[tokio::test]
    async fn a_new_value_is_checked_applied_once_and_counted() {
        let (fake, reloader, metrics) = reloader("old");
        assert_eq!(reloader.reload().await, None, "unchanged");
        assert_eq!(*fake.checks.lock().unwrap(), 0, "nothing to check");
        set(&fake, Some("new"));
        assert_eq!(reloader.reload().await, Some(Outcome::Applied));
        assert_eq!(reloader.reload().await, None, "in use now");
        assert_eq!(*fake.applied.lock().unwrap(), ["new"]);
        assert_eq!(metrics.get(Credential::Hcloud, Outcome::Applied), 1);
    }

    #[tokio::test]
    async fn a_refused_value_keeps_the_old_one_and_is_not_checked_again() {
        let (fake, reloader, metrics) = reloader("old");
        set(&fake, Some("bad-other-project"));
        assert_eq!(reloader.reload().await, Some(Outcome::Refused));
        assert_eq!(reloader.reload().await, None, "the same refused value");
        assert_eq!(*fake.checks.lock().unwrap(), 1);
        assert!(fake.applied.lock().unwrap().is_empty(), "the old one kept");
        assert_eq!(metrics.get(Credential::Hcloud, Outcome::Refused), 1);
        // Back to the one in use, then a good one: applied.
        set(&fake, Some("old"));
        assert_eq!(reloader.reload().await, None);
        set(&fake, Some("good"));
        assert_eq!(reloader.reload().await, Some(Outcome::Applied));
        // A refused value again after a good one is checked again.
        set(&fake, Some("bad-other-project"));
        assert_eq!(reloader.reload().await, Some(Outcome::Refused));
        assert_eq!(metrics.get(Credential::Hcloud, Outcome::Refused), 2);
    }

    #[tokio::test]
    async fn an_unreadable_file_is_counted_once_per_spell_and_a_failed_check_is_retried() {
        let (fake, reloader, metrics) = reloader("old");
        set(&fake, None);
        assert_eq!(reloader.reload().await, Some(Outcome::Unreadable));
        assert_eq!(
            reloader.reload().await,
            None,
            "still unreadable: counted once"
        );
        assert_eq!(metrics.get(Credential::Hcloud, Outcome::Unreadable), 1);
        set(&fake, Some("old"));
        assert_eq!(reloader.reload().await, None);
        set(&fake, None);
        assert_eq!(reloader.reload().await, Some(Outcome::Unreadable));
        assert_eq!(metrics.get(Credential::Hcloud, Outcome::Unreadable), 2);
        set(&fake, Some("down-for-now"));
        assert_eq!(
            reloader.reload().await,
            None,
            "not checked: nothing decided"
        );
        assert_eq!(reloader.reload().await, None);
        assert_eq!(*fake.checks.lock().unwrap(), 2, "checked again each time");
        assert!(fake.applied.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn the_question_after_a_401_reads_the_file() {
        let (fake, reloader, metrics) = reloader("old");
        set(&fake, Some("new"));
        reloader.reauthorize().await;
        assert_eq!(*fake.applied.lock().unwrap(), ["new"]);
        assert_eq!(metrics.get(Credential::Hcloud, Outcome::Applied), 1);
    }

    #[test]
    fn a_secret_file_is_trimmed_and_may_not_be_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "  abc\n").unwrap();
        assert_eq!(read_secret(&path).unwrap().expose(), "abc");
        std::fs::write(&path, "\n").unwrap();
        assert!(read_secret(&path).unwrap_err().contains("empty"));
        assert!(read_secret(&dir.path().join("missing")).is_err());
    }

    #[test]
    fn the_metric_names_credential_and_result_and_no_secret() {
        let metrics = ReloadMetrics::default();
        metrics.count(Credential::Robot, Outcome::Applied);
        let mut registry = prometheus_client::registry::Registry::default();
        metrics.register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(
            text.contains(
                r#"cloud_controller_credential_reloads_total{credential="robot",result="applied"} 1"#
            ),
            "{text}"
        );
    }
}
