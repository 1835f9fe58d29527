//! The Kubernetes client, configured like client-go's `BuildConfigFromFlags`: `--kubeconfig`
//! when given, otherwise the in-cluster service account (falling back to `KUBECONFIG` /
//! the default kubeconfig outside a cluster); `--master` overrides the server URL.

use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::config::KubeSettings;

/// Why no client could be built.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The kubeconfig file could not be read or used.
    #[error("kubeconfig {path}: {source}")]
    Kubeconfig {
        /// The file.
        path: String,
        /// The error.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// Neither in-cluster configuration nor a default kubeconfig is available.
    #[error(
        "no Kubernetes configuration: not running in a cluster ({in_cluster}) and no usable \
         default kubeconfig ({kubeconfig}); pass --kubeconfig"
    )]
    NoConfig {
        /// Why the in-cluster configuration failed.
        in_cluster: String,
        /// Why the default kubeconfig failed.
        kubeconfig: String,
    },
    /// `--master` is not a URI.
    #[error("--master {0:?} is not a valid URL")]
    Master(String),
    /// The client could not be constructed (e.g. TLS setup).
    #[error("cannot create the Kubernetes client: {0}")]
    Client(#[from] kube::Error),
}

/// Builds the client configuration.
pub async fn build_config(settings: &KubeSettings) -> Result<kube::Config, ClientError> {
    let mut config = match &settings.kubeconfig {
        Some(path) => {
            let wrap = |source| ClientError::Kubeconfig {
                path: path.display().to_string(),
                source,
            };
            let kubeconfig = Kubeconfig::read_from(path).map_err(wrap)?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .map_err(wrap)?
        }
        None => match kube::Config::incluster() {
            Ok(config) => config,
            Err(in_cluster) => kube::Config::from_kubeconfig(&KubeConfigOptions::default())
                .await
                .map_err(|kubeconfig| ClientError::NoConfig {
                    in_cluster: in_cluster.to_string(),
                    kubeconfig: kubeconfig.to_string(),
                })?,
        },
    };
    if let Some(master) = &settings.master {
        config.cluster_url = master
            .parse()
            .map_err(|_| ClientError::Master(master.clone()))?;
    }
    Ok(config)
}

/// Builds the client.
pub async fn build_client(settings: &KubeSettings) -> Result<kube::Client, ClientError> {
    let config = build_config(settings).await?;
    Ok(kube::Client::try_from(config)?)
}
