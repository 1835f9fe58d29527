//! The command line and the environment, exactly as written by the user: [`Args`] holds each
//! setting's text (given or defaulted) by flag name.
//!
//! Values that can be wrong are kept as text here and parsed by
//! [`Args::validate`](crate::config::Args::validate), so that one run reports every problem at
//! once instead of stopping at the first. The settings themselves are declared in their areas'
//! files ([`SETTINGS`] lists them all); the flags accepted without effect are
//! [`NO_EFFECT_FLAGS`].

use std::collections::BTreeMap;
use std::ffi::OsString;

use clap::parser::ValueSource;
use clap::{CommandFactory, FromArgMatches};

use super::setting::{Setting, Spec};
use super::values::Secret;

pub(super) const KUBE: &str = "Kubernetes client";
pub(super) const CONTROLLERS: &str = "Controllers";
pub(super) const LEADER: &str = "Leader election";
pub(super) const SERVING: &str = "Secure serving";
pub(super) const LOGGING: &str = "Logging";
pub(super) const COMPAT: &str = "Upstream compatibility";
const NO_EFFECT: &str = "Accepted without effect (a startup line says so when one is given)";
pub(super) const HCLOUD: &str = "Hetzner Cloud (environment)";
pub(super) const LB: &str = "Load balancers (environment)";
pub(super) const ROBOT: &str = "Robot dedicated servers (environment)";

const LONG_ABOUT: &str = "\
Kubernetes cloud-controller-manager for Hetzner Cloud.

A drop-in replacement for the official hcloud-cloud-controller-manager: it takes the same \
command-line flags as every Kubernetes cloud-controller-manager and the same HCLOUD_* and ROBOT_* \
environment variables as the official Hetzner CCM. Each environment variable except the secrets \
can also be given as the flag of the same name in lower case (HCLOUD_NETWORK = --hcloud-network). \
The secrets HCLOUD_TOKEN, ROBOT_USER and ROBOT_PASSWORD are read from the environment (or the \
file named by their *_FILE variable) only: a secret on a command line shows in `ps` and in Pod \
specs.

Upstream flags that mean nothing here are accepted and listed under \"Accepted without effect\"; \
each one given logs a warning at startup. Flag names may use _ for - (--leader_elect), and a flag \
given twice takes its last value.

Durations use Go syntax (\"30s\", \"5m\", \"1m30s\", \"200ms\"). Booleans accept Go's forms \
(true/false, 1/0, t/f, TRUE/FALSE, True/False); a boolean flag given without a value means true, \
and must be written --flag=false to switch it off.

Invalid configuration is reported all at once and the process exits with status 2. So does a \
configuration the Hetzner Cloud refuses at start, naming the setting: a rejected token, no API at \
HCLOUD_ENDPOINT, an unknown HCLOUD_NETWORK or this server not attached to it, a metadata service \
that refuses the attached-network check. What may pass by itself (no connection, a timeout, a \
5xx, a 429) is tried again, with /readyz red and /healthz green meanwhile. Exit status: 0 after \
SIGTERM or SIGINT, 1 a failure (leadership lost, a controller stopped), 2 a configuration to fix.";

const AFTER_LONG_HELP: &str = "\
Logging: RUST_LOG, when set, overrides the level derived from -v (e.g. \
RUST_LOG=info,hcloud_api=debug).

Endpoints: /healthz, /readyz and /metrics on the secure port (HTTPS; /metrics needs a bearer token \
the apiserver authorises for GET /metrics) and on HCLOUD_METRICS_ADDRESS (plain HTTP, :8233 by \
default).";

/// `hcloud-ccm --version`: the crate version and the commit it was built from (build.rs).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("HCLOUD_CCM_COMMIT"),
    ")"
);

/// Every setting, in `--help` order (each area's list, area by area).
pub fn all_settings() -> impl Iterator<Item = &'static Spec> {
    SETTINGS.iter().flat_map(|area| area.iter().copied())
}

/// The areas' lists of settings, in `--help` order.
const SETTINGS: &[&[&Spec]] = &[
    super::kube::SETTINGS,
    super::validate::CONTROLLER_SETTINGS,
    super::leader::SETTINGS,
    super::serving::SETTINGS,
    super::validate::LOGGING_SETTINGS,
    super::validate::COMPAT_SETTINGS,
    super::hcloud::SETTINGS,
    super::load_balancers::SETTINGS,
    super::robot::SETTINGS,
];

/// The reference table of docs/configuration.md: one row per setting of [`all_settings`]
/// (variable, flag, default, help) and one per secret of [`SECRET_FLAGS`].
pub fn reference_table() -> String {
    let mut table = String::from("| Variable | Flag | Default | Meaning |\n|---|---|---|---|\n");
    for spec in all_settings() {
        table.push_str(&spec.table_row());
        table.push('\n');
    }
    for (_, variable) in SECRET_FLAGS {
        table.push_str(&format!(
            "| `{variable}` | – | – | Secret, read from the environment only (or from the file \
             named by {variable}_FILE, which is read again when it changes); never a flag. A \
             change of the variable needs a restart |\n"
        ));
    }
    table
}

/// Every flag and environment variable the binary understands, as written: each setting of
/// [`all_settings`] by flag name (given, or its default), the secrets, and the flags accepted
/// without effect that were given.
#[derive(Debug, Clone, Default)]
pub struct Args {
    /// Each setting's text by flag name (a list's values joined by commas); absent when it was
    /// neither given nor has a default.
    values: BTreeMap<&'static str, String>,
    /// `HCLOUD_TOKEN`, read from the environment only: there is no `--hcloud-token` flag, a
    /// token on a command line shows in `ps` and Pod specs.
    pub hcloud_token: Option<Secret>,
    /// `ROBOT_USER`, read from the environment only (no flag, as for `HCLOUD_TOKEN`).
    pub robot_user: Option<Secret>,
    /// `ROBOT_PASSWORD`, read from the environment only (no flag, as for `HCLOUD_TOKEN`).
    pub robot_password: Option<Secret>,
    /// Flags of [`NO_EFFECT_FLAGS`] given on the command line (filled by
    /// [`Args::try_parse_command_line`]).
    pub no_effect: Vec<GivenFlag>,
}

impl Args {
    /// The text of the setting with this flag name, if given or defaulted.
    pub fn value(&self, flag: &str) -> Option<&str> {
        self.values.get(flag).map(String::as_str)
    }

    /// Sets `setting` as if it was given this value.
    pub fn set<T>(&mut self, setting: &Setting<T>, value: impl Into<String>) {
        self.values.insert(setting.spec.flag, value.into());
    }

    /// Sets the setting with this flag name (of [`all_settings`]) as if it was given this
    /// value; `false` when there is no such setting.
    pub fn set_text(&mut self, flag: &str, value: impl Into<String>) -> bool {
        match all_settings().find(|spec| spec.flag == flag) {
            Some(spec) => {
                self.values.insert(spec.flag, value.into());
                true
            }
            None => false,
        }
    }
}

impl CommandFactory for Args {
    fn command() -> clap::Command {
        all_settings().fold(
            clap::Command::new("hcloud-ccm")
                .version(VERSION)
                .about("Kubernetes cloud-controller-manager for Hetzner Cloud")
                .long_about(LONG_ABOUT)
                .max_term_width(110)
                .args_override_self(true),
            |cmd, spec| cmd.arg(spec.arg()),
        )
    }

    fn command_for_update() -> clap::Command {
        Self::command()
    }
}

impl FromArgMatches for Args {
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
        Ok(Args {
            values: all_settings()
                .filter_map(|spec| Some((spec.flag, spec.value_in(matches)?)))
                .collect(),
            ..Args::default()
        })
    }

    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        for spec in all_settings() {
            if let Some(value) = spec.value_in(matches) {
                self.values.insert(spec.flag, value);
            }
        }
        Ok(())
    }
}

/// The value type of a flag accepted without effect (checked like upstream would).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlagKind {
    /// A boolean; given without a value it means true.
    Bool,
    /// A Go duration.
    Duration,
    /// An integer.
    Int,
    /// Anything.
    Text,
}

/// An upstream cloud-controller-manager flag that means nothing for this CCM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoEffectFlag {
    /// Name without the leading dashes.
    pub name: &'static str,
    /// Its value type.
    pub kind: FlagKind,
    /// Why it has no effect here (shown in `--help` and in the startup line).
    pub reason: &'static str,
}

/// One of [`NO_EFFECT_FLAGS`] as given on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GivenFlag {
    /// The flag.
    pub flag: NoEffectFlag,
    /// Its value (`true` for a bare boolean).
    pub value: String,
}

const fn no_effect(name: &'static str, kind: FlagKind, reason: &'static str) -> NoEffectFlag {
    NoEffectFlag { name, kind, reason }
}

const NO_SERVING: &str = "the secure port only serves /healthz, /readyz and /metrics";
const NO_WEBHOOKS: &str = "this CCM serves no webhooks";
const NO_AUTHN: &str = "the secure port authenticates bearer tokens with TokenReviews only";
const NO_AUTHZ: &str = "the secure port authorises with SubjectAccessReviews through the main \
                        Kubernetes client, without a cache";
const NO_LOGS: &str = "logging is configured with -v, --logging-format and RUST_LOG";
const NO_METRICS: &str = "all metrics are always exposed";

/// Every upstream flag (k8s.io/cloud-provider options, controller-manager options and
/// component-base) this CCM accepts so that existing command lines start, without acting on it.
pub const NO_EFFECT_FLAGS: &[NoEffectFlag] = &[
    // Generic controller-manager options.
    no_effect(
        "controller-start-interval",
        FlagKind::Duration,
        "controllers start together once leading",
    ),
    no_effect(
        "kube-api-content-type",
        FlagKind::Text,
        "this CCM always speaks JSON to the API server",
    ),
    no_effect(
        "profiling",
        FlagKind::Bool,
        "no profiling endpoints are served",
    ),
    no_effect(
        "contention-profiling",
        FlagKind::Bool,
        "no profiling endpoints are served",
    ),
    // Cloud provider and shared options.
    no_effect(
        "cloud-config",
        FlagKind::Text,
        "hcloud is configured through HCLOUD_* environment variables",
    ),
    no_effect(
        "external-cloud-volume-plugin",
        FlagKind::Text,
        "only used by kube-controller-manager",
    ),
    no_effect(
        "use-service-account-credentials",
        FlagKind::Bool,
        "every controller uses the CCM's own credentials",
    ),
    no_effect(
        "cidr-allocator-type",
        FlagKind::Text,
        "this CCM allocates no pod CIDRs",
    ),
    // Webhooks.
    no_effect("webhooks", FlagKind::Text, NO_WEBHOOKS),
    no_effect("webhook-bind-address", FlagKind::Text, NO_WEBHOOKS),
    no_effect("webhook-cert-dir", FlagKind::Text, NO_WEBHOOKS),
    no_effect("webhook-tls-cert-file", FlagKind::Text, NO_WEBHOOKS),
    no_effect("webhook-tls-private-key-file", FlagKind::Text, NO_WEBHOOKS),
    // Secure serving.
    no_effect(
        "cert-dir",
        FlagKind::Text,
        "a generated serving certificate is kept in memory",
    ),
    no_effect(
        "tls-cipher-suites",
        FlagKind::Text,
        "rustls' safe default cipher suites are used",
    ),
    no_effect(
        "tls-min-version",
        FlagKind::Text,
        "TLS 1.2 and 1.3 are served",
    ),
    no_effect(
        "tls-sni-cert-key",
        FlagKind::Text,
        "one certificate serves every name",
    ),
    no_effect(
        "http2-max-streams-per-connection",
        FlagKind::Int,
        "the secure port speaks HTTP/1.1",
    ),
    no_effect(
        "disable-http2-serving",
        FlagKind::Bool,
        "the secure port speaks HTTP/1.1",
    ),
    no_effect("permit-port-sharing", FlagKind::Bool, NO_SERVING),
    no_effect("permit-address-sharing", FlagKind::Bool, NO_SERVING),
    // Authentication of the secure port.
    no_effect("authentication-kubeconfig", FlagKind::Text, NO_AUTHN),
    no_effect("authentication-skip-lookup", FlagKind::Bool, NO_AUTHN),
    no_effect(
        "authentication-token-webhook-cache-ttl",
        FlagKind::Duration,
        NO_AUTHN,
    ),
    no_effect(
        "authentication-tolerate-lookup-failure",
        FlagKind::Bool,
        NO_AUTHN,
    ),
    no_effect("client-ca-file", FlagKind::Text, NO_AUTHN),
    no_effect("requestheader-allowed-names", FlagKind::Text, NO_AUTHN),
    no_effect("requestheader-client-ca-file", FlagKind::Text, NO_AUTHN),
    no_effect(
        "requestheader-extra-headers-prefix",
        FlagKind::Text,
        NO_AUTHN,
    ),
    no_effect("requestheader-group-headers", FlagKind::Text, NO_AUTHN),
    no_effect("requestheader-username-headers", FlagKind::Text, NO_AUTHN),
    no_effect("requestheader-uid-headers", FlagKind::Text, NO_AUTHN),
    // Authorisation of the secure port.
    no_effect("authorization-kubeconfig", FlagKind::Text, NO_AUTHZ),
    no_effect(
        "authorization-webhook-cache-authorized-ttl",
        FlagKind::Duration,
        NO_AUTHZ,
    ),
    no_effect(
        "authorization-webhook-cache-unauthorized-ttl",
        FlagKind::Duration,
        NO_AUTHZ,
    ),
    // Metrics.
    no_effect(
        "show-hidden-metrics-for-version",
        FlagKind::Text,
        NO_METRICS,
    ),
    no_effect("disabled-metrics", FlagKind::Text, NO_METRICS),
    no_effect("allow-metric-labels", FlagKind::Text, NO_METRICS),
    no_effect("allow-metric-labels-manifest", FlagKind::Text, NO_METRICS),
    // Logging.
    no_effect("vmodule", FlagKind::Text, NO_LOGS),
    no_effect(
        "log-flush-frequency",
        FlagKind::Duration,
        "log lines are written at once",
    ),
    no_effect("log-json-split-stream", FlagKind::Bool, NO_LOGS),
    no_effect("log-json-info-buffer-size", FlagKind::Text, NO_LOGS),
    no_effect("log-text-split-stream", FlagKind::Bool, NO_LOGS),
    no_effect("log-text-info-buffer-size", FlagKind::Text, NO_LOGS),
];

/// Why the command line was refused (exit status 2; `--help` and `--version` are "errors" that
/// print to stdout and exit 0, as clap's).
#[derive(Debug, thiserror::Error)]
pub enum CommandLineError {
    /// A clap usage error, `--help` or `--version`.
    #[error(transparent)]
    Clap(#[from] clap::Error),
    /// A secret (`--hcloud-token`, `--robot-user`, `--robot-password`) was given as a flag.
    #[error(
        "error: --{flag} is not a flag: a secret on the command line is visible in `ps` and in \
         Pod specs. Put it in the environment variable {variable}, or in a file named by \
         {variable}_FILE"
    )]
    SecretFlag {
        /// The flag given, without dashes.
        flag: &'static str,
        /// The environment variable to use instead.
        variable: &'static str,
    },
}

/// The secrets, read from the environment only: (refused flag, variable).
pub const SECRET_FLAGS: [(&str, &str); 3] = [
    ("hcloud-token", "HCLOUD_TOKEN"),
    ("robot-user", "ROBOT_USER"),
    ("robot-password", "ROBOT_PASSWORD"),
];

impl CommandLineError {
    /// Print the message (stdout for help/version) and return the exit status.
    pub fn report(&self) -> u8 {
        match self {
            Self::Clap(e) => {
                let _ = e.print();
                u8::try_from(e.exit_code()).unwrap_or(2)
            }
            Self::SecretFlag { .. } => {
                eprintln!("{self}");
                2
            }
        }
    }
}

/// Rewrite `--some_flag` to `--some-flag` (upstream's `WordSepNormalizeFunc`); values are kept.
fn normalize(arg: OsString) -> OsString {
    let Some(text) = arg.to_str() else {
        return arg;
    };
    let Some(rest) = text.strip_prefix("--") else {
        return arg;
    };
    let (name, value) = match rest.split_once('=') {
        Some((name, value)) => (name, Some(value)),
        None => (rest, None),
    };
    let mut out = format!("--{}", name.replace('_', "-"));
    if let Some(value) = value {
        out.push('=');
        out.push_str(value);
    }
    OsString::from(out)
}

fn no_effect_arg(flag: &NoEffectFlag) -> clap::Arg {
    let arg = clap::Arg::new(flag.name)
        .long(flag.name)
        .help(format!("No effect: {}.", flag.reason))
        .help_heading(NO_EFFECT);
    match flag.kind {
        FlagKind::Bool => arg
            .value_name("BOOL")
            .num_args(0..=1)
            .require_equals(true)
            .default_missing_value("true"),
        FlagKind::Duration => arg.value_name("DURATION"),
        FlagKind::Int => arg.value_name("N"),
        FlagKind::Text => arg.value_name("VALUE"),
    }
}

impl Args {
    /// The clap command: the derived flags plus [`NO_EFFECT_FLAGS`].
    pub fn full_command() -> clap::Command {
        NO_EFFECT_FLAGS
            .iter()
            .fold(<Self as CommandFactory>::command(), |cmd, flag| {
                cmd.arg(no_effect_arg(flag))
            })
            .override_usage(
                "hcloud-ccm [OPTIONS]\n       hcloud-ccm plan [-o text|json] [--detailed-exitcode] [OPTIONS]\n       hcloud-ccm delete-orphans [OPTIONS]",
            )
            .after_long_help(format!(
                "{}\n\n{}\n\n{AFTER_LONG_HELP}",
                crate::plan::HELP,
                crate::orphans::HELP
            ))
    }

    /// Parse a command line (`argv[0]` first) and the environment: flag names are normalised
    /// (`_` to `-`), `--hcloud-token`, `--robot-user` and `--robot-password` are refused, and
    /// `HCLOUD_TOKEN`, `ROBOT_USER` and `ROBOT_PASSWORD` are read from the environment.
    pub fn try_parse_command_line<I, T>(argv: I) -> Result<Self, CommandLineError>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString>,
    {
        Self::try_parse_with_secrets(argv, |name| {
            std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())
        })
    }

    /// [`Args::try_parse_command_line`] with the secrets read through `secret` (the
    /// environment, or a test's map) instead of the process's environment.
    pub fn try_parse_with_secrets<I, T>(
        argv: I,
        secret: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, CommandLineError>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString>,
    {
        let mut seen_end = false;
        let mut normalized = Vec::new();
        for (i, arg) in argv.into_iter().map(Into::into).enumerate() {
            if i == 0 || seen_end {
                normalized.push(arg);
                continue;
            }
            if arg == "--" {
                seen_end = true;
                normalized.push(arg);
                continue;
            }
            let arg = normalize(arg);
            if let Some(text) = arg.to_str().and_then(|t| t.strip_prefix("--")) {
                let name = text.split_once('=').map_or(text, |(name, _)| name);
                if let Some((flag, variable)) = SECRET_FLAGS.iter().find(|(f, _)| *f == name) {
                    return Err(CommandLineError::SecretFlag { flag, variable });
                }
            }
            normalized.push(arg);
        }
        let matches = Self::full_command().try_get_matches_from(normalized)?;
        let mut args = <Self as FromArgMatches>::from_arg_matches(&matches)?;
        args.no_effect = NO_EFFECT_FLAGS
            .iter()
            .filter(|flag| matches.value_source(flag.name) == Some(ValueSource::CommandLine))
            .map(|flag| GivenFlag {
                flag: *flag,
                value: matches
                    .get_one::<String>(flag.name)
                    .cloned()
                    .unwrap_or_default(),
            })
            .collect();
        args.hcloud_token = secret("HCLOUD_TOKEN").map(Secret::new);
        args.robot_user = secret("ROBOT_USER").map(Secret::new);
        args.robot_password = secret("ROBOT_PASSWORD").map(Secret::new);
        Ok(args)
    }
}
