//! Credentials that change while the client runs: the token of [`crate::Client`] and the user
//! and password of [`crate::robot::RobotClient`] can be swapped ([`crate::Client::set_token`],
//! [`crate::robot::RobotClient::set_credentials`]), and a client whose credential the API
//! refuses (401) asks its [`Reauthorize`] hook for a new one and tries the request once more
//! when the credential changed. Where credentials come from (a file, a Secret) is the caller's
//! business: the clients only hold the current one.
//!
//! Requests in flight keep the credential they were sent with; the next request takes the new
//! one.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};

use parking_lot::RwLock;

/// The future of [`Reauthorize::reauthorize`].
pub type Reauthorizing<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// Asked by a client after the API refused its credential (401) on a request sent with the
/// current credential: look for a new one and put it in place (with `set_token` or
/// `set_credentials`) before the future ends. The refused request is tried once more if the
/// credential changed meanwhile, else its error is returned.
pub trait Reauthorize: Send + Sync + fmt::Debug {
    /// Look for a new credential and set it on the client.
    fn reauthorize(&self) -> Reauthorizing<'_>;
}

/// A credential with the number of the swap that put it in place, and the hook asked after
/// a refusal.
pub(crate) struct Swappable<T> {
    current: RwLock<(u64, Arc<T>)>,
    hook: OnceLock<Arc<dyn Reauthorize>>,
}

// By hand: the credential is never shown.
impl<T> fmt::Debug for Swappable<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Swappable")
            .field("generation", &self.current.read().0)
            .field("hook", &self.hook.get().is_some())
            .finish_non_exhaustive()
    }
}

impl<T> Swappable<T> {
    pub(crate) fn new(value: T) -> Self {
        Self {
            current: RwLock::new((0, Arc::new(value))),
            hook: OnceLock::new(),
        }
    }

    /// The credential now and its generation.
    pub(crate) fn current(&self) -> (u64, Arc<T>) {
        let current = self.current.read();
        (current.0, current.1.clone())
    }

    /// Put `value` in place for the next requests.
    pub(crate) fn set(&self, value: T) {
        let mut current = self.current.write();
        *current = (current.0 + 1, Arc::new(value));
    }

    /// Set the hook asked after a refusal; `false` when one was set before (it is kept).
    pub(crate) fn set_hook(&self, hook: Arc<dyn Reauthorize>) -> bool {
        self.hook.set(hook).is_ok()
    }

    /// After a 401 answer to a request sent with generation `used`: whether a different
    /// credential is in place now (already, or after asking the hook), so the request is worth
    /// one more try.
    pub(crate) async fn renewed_since(&self, used: u64) -> bool {
        if self.current.read().0 != used {
            return true;
        }
        if let Some(hook) = self.hook.get() {
            hook.reauthorize().await;
        }
        self.current.read().0 != used
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct SetOnAsk(Arc<Swappable<String>>, Option<&'static str>);

    impl Reauthorize for SetOnAsk {
        fn reauthorize(&self) -> Reauthorizing<'_> {
            Box::pin(async move {
                if let Some(value) = self.1 {
                    self.0.set(value.to_owned());
                }
            })
        }
    }

    #[tokio::test]
    async fn a_refusal_asks_the_hook_unless_the_credential_changed_already() {
        let swappable = Arc::new(Swappable::new("old".to_owned()));
        let (used, value) = swappable.current();
        assert_eq!((used, value.as_str()), (0, "old"));
        assert!(!swappable.renewed_since(used).await, "no hook: nothing new");
        swappable.set("new".to_owned());
        assert!(swappable.renewed_since(used).await, "swapped meanwhile");
        let (used, _) = swappable.current();
        assert!(swappable.set_hook(Arc::new(SetOnAsk(swappable.clone(), None))));
        assert!(
            !swappable.renewed_since(used).await,
            "the hook found nothing"
        );
        assert!(!swappable.set_hook(Arc::new(SetOnAsk(swappable.clone(), None))));
        let fresh = Arc::new(Swappable::new("old".to_owned()));
        fresh.set_hook(Arc::new(SetOnAsk(fresh.clone(), Some("newer"))));
        assert!(fresh.renewed_since(0).await);
        assert_eq!(fresh.current().1.as_str(), "newer");
        assert!(!format!("{fresh:?}").contains("newer"));
    }
}
