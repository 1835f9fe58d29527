//! `/actions` and the batched action waiter.

use std::collections::BTreeSet;

use crate::Client;
use crate::api::get_one;
use crate::error::{ActionError, Error};
use crate::models::{Action, ActionStatus};
use crate::pagination::get_page;
use crate::transport::Query;

/// Ids per `GET /actions?id=…` request, as the official client does.
pub const ACTIONS_PER_REQUEST: usize = 25;

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

fn failure(action: &Action) -> Error {
    let (code, message) = action
        .error
        .as_ref()
        .map(|e| (e.code.clone(), e.message.clone()))
        .unwrap_or_else(|| ("action_failed".to_owned(), "action failed".to_owned()));
    Error::Action(ActionError {
        id: action.id,
        command: action.command.clone(),
        code,
        message,
    })
}

impl ActionsApi<'_> {
    /// `GET /actions/{id}`.
    pub async fn get(&self, id: i64) -> Result<Action, Error> {
        get_one(self.client.transport(), &format!("/actions/{id}"), "action").await
    }

    /// Fetches the given actions, [`ACTIONS_PER_REQUEST`] ids per request.
    pub async fn list(&self, ids: &[i64]) -> Result<Vec<Action>, Error> {
        let mut all = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(ACTIONS_PER_REQUEST) {
            let mut query: Query = chunk.iter().map(|id| ("id", id.to_string())).collect();
            query.push(("per_page", ACTIONS_PER_REQUEST.to_string()));
            let page =
                get_page::<Action>(self.client.transport(), "/actions", "actions", &query).await?;
            all.extend(page.items);
        }
        Ok(all)
    }

    /// Waits until `action` finished; an action ending in `error` gives
    /// [`Error::Action`] with its code and message.
    pub async fn wait<A: ActionRef + ?Sized>(&self, action: &A) -> Result<(), Error> {
        self.wait_all(&[action]).await
    }

    /// Waits until all actions finished, polling every `poll_interval` with up to 25 ids per
    /// request. Returns the first failure as soon as it is seen. An ID the API does not
    /// return fails with code `not_found`. Wrap in a timeout to bound the wait.
    pub async fn wait_all<A: ActionRef>(&self, actions: &[A]) -> Result<(), Error> {
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
        let interval = self.client.poll_interval();
        if known_running && !pending.is_empty() {
            // Freshly returned actions are rarely done at once; wait before the first poll.
            tokio::time::sleep(interval).await;
        }
        while !pending.is_empty() {
            let ids: Vec<i64> = pending.iter().copied().collect();
            let seen = self.list(&ids).await?;
            let mut returned = BTreeSet::new();
            for action in &seen {
                if !pending.contains(&action.id) {
                    continue;
                }
                returned.insert(action.id);
                match action.status {
                    ActionStatus::Success => {
                        pending.remove(&action.id);
                    }
                    ActionStatus::Error => return Err(failure(action)),
                    _ => {}
                }
            }
            if let Some(missing) = ids.iter().find(|id| !returned.contains(id)) {
                return Err(Error::Action(ActionError {
                    id: *missing,
                    command: String::new(),
                    code: "not_found".to_owned(),
                    message: "the API did not return this action".to_owned(),
                }));
            }
            if pending.is_empty() {
                break;
            }
            tracing::trace!(pending = pending.len(), "waiting for hcloud actions");
            tokio::time::sleep(interval).await;
        }
        Ok(())
    }
}
