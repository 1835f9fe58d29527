//! `/actions` and the action waiter.
//!
//! [`ActionsApi::wait_all`] shares its polls with every other waiter of the same client and
//! its clones: each poll round asks `GET /actions?id=…` once per [`ACTIONS_PER_REQUEST`]
//! pending IDs in total, whoever waits for them, and hands each waiter its own result. One
//! of the waiting callers runs the rounds for all (no background task); when it is done or
//! its future is dropped, another takes over. A dropped waiter's IDs are no longer polled.
//!
//! - An action already known to have succeeded costs no request; one known to have failed
//!   fails at once.
//! - A freshly returned running action is first polled one poll interval later; bare IDs
//!   are polled in the next round (at once unless a round ended less than an interval ago).
//!   [`ActionsApi::wait_checking_after`] chooses the first check itself, and gets it then,
//!   however recently a round ended (and without waiting for other waiters).
//! - Rounds are at least one poll interval apart; waiters that join while a round is in
//!   flight are part of the next one.
//! - A freshly returned action may be polled up to [`STREAM_PATIENCE`] poll intervals after
//!   it is due when other waiters are due soon after it, so that a stream of them (one
//!   `add_target` per load balancer) shares full requests instead of a round every interval.
//!   A lone action is polled when it is due.
//! - A waiter gets the first failure among its own actions (a failed action before a
//!   failed request before a missing ID); an ID the API does not return fails (with code
//!   `not_found`) only the waiters asking for it.
//! - A failed poll request (after the client's retries) fails the waiters whose IDs were in
//!   it: one gets the original error, the others a copy (API errors are cloned; a transport
//!   failure, which cannot be copied, becomes an action error with code `poll_failed`). The
//!   other waiters go on polling.
//!
//! Wrap a wait in a timeout to bound it. A future of `wait`/`wait_all` should be polled to
//! the end or dropped: while it runs the rounds, keeping it without polling it stalls the
//! other waiters.

use std::collections::BTreeSet;

use tokio::time::Instant;

use super::action_batch::failure;
use crate::Client;
use crate::api::Collection;
use crate::error::Error;
use crate::models::{Action, ActionStatus};
use crate::transport::Query;

const ACTIONS: Collection = Collection {
    path: "/actions",
    one: "action",
    many: "actions",
};

/// Ids per `GET /actions?id=…` request: the API's largest page (`per_page` 50). The official
/// client asks for 25 at a time; 50 halves the polls when many actions run at once (a Node
/// joining 100 load balancers).
pub const ACTIONS_PER_REQUEST: usize = 50;

/// How many poll intervals a freshly returned action may be polled late to share a round
/// with waiters due after it (see the [module docs](self)). Three intervals let a stream of
/// `add_target` calls at 20 ms each share one request per 50 actions; a lone action is
/// never late.
pub const STREAM_PATIENCE: u32 = 3;

/// Something that names an action: an [`Action`] (whose known state saves a poll when it is
/// already finished) or a bare ID.
pub trait ActionRef {
    /// ID of the action.
    fn action_id(&self) -> i64;
    /// The action as last seen, if known.
    fn known(&self) -> Option<&Action> {
        None
    }
}

impl ActionRef for Action {
    fn action_id(&self) -> i64 {
        self.id
    }
    fn known(&self) -> Option<&Action> {
        Some(self)
    }
}

impl ActionRef for i64 {
    fn action_id(&self) -> i64 {
        *self
    }
}

impl<T: ActionRef + ?Sized> ActionRef for &T {
    fn action_id(&self) -> i64 {
        (**self).action_id()
    }
    fn known(&self) -> Option<&Action> {
        (**self).known()
    }
}

/// Actions.
#[derive(Debug, Clone, Copy)]
pub struct ActionsApi<'a> {
    pub(crate) client: &'a Client,
}

/// `GET /actions` for up to [`ACTIONS_PER_REQUEST`] ids.
async fn fetch(client: &Client, ids: Vec<i64>) -> Result<Vec<Action>, Error> {
    let mut query: Query = ids.iter().map(|id| ("id", id.to_string())).collect();
    query.push(("per_page", ACTIONS_PER_REQUEST.to_string()));
    Ok(ACTIONS.page(client, &query).await?.items)
}

impl ActionsApi<'_> {
    /// `GET /actions/{id}`.
    pub async fn get(&self, id: i64) -> Result<Action, Error> {
        ACTIONS.get(self.client, id).await
    }

    /// Fetches the given actions, [`ACTIONS_PER_REQUEST`] ids per request.
    pub async fn list(&self, ids: &[i64]) -> Result<Vec<Action>, Error> {
        let mut all = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(ACTIONS_PER_REQUEST) {
            all.extend(fetch(self.client, chunk.to_vec()).await?);
        }
        Ok(all)
    }

    /// Waits until `action` finished; an action ending in `error` gives
    /// [`Error::Action`] with its code and message.
    pub async fn wait<A: ActionRef + ?Sized>(&self, action: &A) -> Result<(), Error> {
        self.wait_all(&[action]).await
    }

    /// Waits until all actions finished, sharing the polls (every `poll_interval`, up to
    /// [`ACTIONS_PER_REQUEST`] ids per request) with the client's other waiters (see the [module docs](self)).
    /// Returns the first failure as soon as it is seen. An ID the API does not return fails
    /// with code `not_found`. Wrap in a timeout to bound the wait.
    pub async fn wait_all<A: ActionRef>(&self, actions: &[A]) -> Result<(), Error> {
        self.wait_from(actions, None).await
    }

    /// Like [`ActionsApi::wait`], with the first check of a running `action` `first_check`
    /// after now (instead of one poll interval), even when another waiter's round ended just
    /// before: for a caller that knows how long its actions usually take, so that one check
    /// usually finds it done, and that runs them one after another (the next starts when the
    /// check finds this one done). Later checks are the shared rounds of every waiter, an
    /// interval apart.
    pub async fn wait_checking_after<A: ActionRef + ?Sized>(
        &self,
        action: &A,
        first_check: std::time::Duration,
    ) -> Result<(), Error> {
        self.wait_from(&[action], Some(first_check)).await
    }

    async fn wait_from<A: ActionRef>(
        &self,
        actions: &[A],
        first_check: Option<std::time::Duration>,
    ) -> Result<(), Error> {
        let mut pending = BTreeSet::new();
        let mut known_running = false;
        for action in actions {
            match action.known() {
                Some(a) if a.status == ActionStatus::Success => {}
                Some(a) if a.status == ActionStatus::Error => return Err(failure(a)),
                Some(a) => {
                    known_running = true;
                    pending.insert(a.id);
                }
                None => {
                    pending.insert(action.action_id());
                }
            }
        }
        if pending.is_empty() {
            return Ok(());
        }
        // Freshly returned actions are rarely done at once: their first poll waits.
        let now = Instant::now();
        let interval = self.client.poll_interval();
        tracing::trace!(pending = pending.len(), "waiting for hcloud actions");
        let batch = self.client.action_batch();
        let ticket = match first_check {
            Some(first) => batch.join_punctual(pending, now + first),
            None if known_running => {
                batch.join(pending, now + interval, interval * STREAM_PATIENCE)
            }
            None => batch.join(pending, now, std::time::Duration::ZERO),
        };
        let client = self.client;
        ticket.wait(|ids| fetch(client, ids)).await
    }
}
