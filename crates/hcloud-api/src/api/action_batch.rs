//! One set of action polls for all waiters of a client.
//!
//! Every [`crate::ActionsApi::wait_all`] call of a client (and of its clones) registers its
//! pending action IDs here. Polls happen in rounds: a round asks `GET /actions?id=…` for the
//! IDs of every waiter that is due, [`ACTIONS_PER_REQUEST`] IDs per request, and hands each
//! waiter its own result. There is no background task: one of the waiting callers, the
//! leader, runs the rounds for everybody while the others sleep until a round brought news.
//! When the leader's own actions are done, or its future is dropped (e.g. by a timeout),
//! another waiter takes over at once.
//!
//! Timing:
//! - A waiter is due at once when it only named IDs, and one poll interval after it joined
//!   when it brought a freshly returned running action. It is never polled before it is due.
//! - Rounds start at least one poll interval after the previous round ended. A waiter that
//!   joins while a round is in flight is due by the next round (or at once, if it is due
//!   later than that, when it is due).
//! - A punctual waiter (its caller chose its first check, knowing how long its actions take)
//!   is first polled when it is due, however recently a round ended, and that round does not
//!   wait for others due after it: a caller that runs one action after another (the routes of
//!   a network, which takes one change at a time) has each checked when it should be done,
//!   not up to an interval later because the previous one's check just ended. Its later polls
//!   are an interval apart, as everybody's.
//! - Waiters that become due within half an interval of each other share one round: the
//!   round waits for the last of them. A lone waiter is polled when it is due.
//! - A waiter may have patience: it accepts being polled up to that long after it is due.
//!   A round then waits until every open waiter is due (one round covers them all), until
//!   enough IDs are due to fill a request, or until the first deadline (due + patience),
//!   whichever comes first. A round that comes because requests are full (while others are
//!   due later) polls only full requests, the waiters due first, and leaves the rest to the
//!   next one. While waiters keep joining (a Node added to 100 load balancers, one
//!   `add_target` after the other), they thus cost about one request per
//!   [`ACTIONS_PER_REQUEST`] of them instead of one per round; a lone waiter is still
//!   polled when it is due.
//!
//! Results: a success counts for every waiter holding the ID; a failed action fails every
//! waiter holding it; an ID missing from the answer fails (with code `not_found`) only the
//! waiters polled in that round; a failed request fails the waiters whose IDs were in it.
//! One of them gets the original error, the others an equivalent one ([`duplicate`]).

use parking_lot::{Mutex, MutexGuard};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::future::Future;
use std::time::Duration;

use serde::de::Error as _;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

use super::actions::ACTIONS_PER_REQUEST;
use crate::error::{ActionError, Error};
use crate::models::{Action, ActionStatus};

/// Shared poll state of one client and its clones.
pub(crate) struct ActionBatch {
    /// Pause between the end of one round and the start of the next.
    interval: Duration,
    state: Mutex<State>,
    /// Bumped after each round and whenever leadership becomes free; followers sleep on it.
    changed: watch::Sender<u64>,
    /// Wakes the leader when a waiter joined (it may be due before the planned round).
    joined: Notify,
}

#[derive(Default)]
struct State {
    next_key: u64,
    /// Key of the waiter that runs the rounds.
    leader: Option<u64>,
    /// When the last round ended.
    last_round_end: Option<Instant>,
    waiters: BTreeMap<u64, Waiter>,
}

struct Waiter {
    /// IDs not yet seen finished.
    pending: BTreeSet<i64>,
    /// Earliest start of a round that polls this waiter.
    due: Instant,
    /// How long after `due` the waiter may still be left for a later round.
    patience: Duration,
    /// Not yet polled, and to be polled at `due` exactly (see the module docs).
    punctual: bool,
    /// Set once the waiter is done; taken by the waiter.
    outcome: Option<Result<(), Error>>,
}

/// A registered waiter. Dropping it unregisters the waiter and, if it led, frees the lead.
pub(crate) struct Ticket<'a> {
    batch: &'a ActionBatch,
    key: u64,
}

/// Answers of one round: the IDs asked for and what the request returned.
type Answers = Vec<(Vec<i64>, Result<Vec<Action>, Error>)>;

impl ActionBatch {
    /// Shared state for waiters polling every `interval`.
    pub(crate) fn new(interval: Duration) -> ActionBatch {
        let (changed, _) = watch::channel(0);
        ActionBatch {
            interval,
            state: Mutex::new(State::default()),
            changed,
            joined: Notify::new(),
        }
    }

    /// Registers a waiter for `ids` (not empty), to be polled no earlier than `due` and, while
    /// other waiters keep joining, possibly up to `patience` later.
    pub(crate) fn join(&self, ids: BTreeSet<i64>, due: Instant, patience: Duration) -> Ticket<'_> {
        self.register(ids, due, patience, false)
    }

    /// Registers a punctual waiter for `ids` (not empty): first polled at `due`, however
    /// recently a round ended.
    pub(crate) fn join_punctual(&self, ids: BTreeSet<i64>, due: Instant) -> Ticket<'_> {
        self.register(ids, due, Duration::ZERO, true)
    }

    fn register(
        &self,
        ids: BTreeSet<i64>,
        due: Instant,
        patience: Duration,
        punctual: bool,
    ) -> Ticket<'_> {
        let key = {
            let mut state = self.lock();
            let key = state.next_key;
            state.next_key = key.wrapping_add(1);
            state.waiters.insert(
                key,
                Waiter {
                    pending: ids,
                    due,
                    patience,
                    punctual,
                    outcome: None,
                },
            );
            key
        };
        self.joined.notify_one();
        Ticket { batch: self, key }
    }

    /// Number of registered waiters.
    pub(crate) fn waiters(&self) -> usize {
        self.lock().waiters.len()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing panics while holding the lock; a poisoned lock still holds valid state.
        self.state.lock()
    }

    fn announce(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// One step of the leader: sleep until the next round (or a join), or run the round.
    async fn lead<F, Fut>(&self, poll: &F)
    where
        F: Fn(Vec<i64>) -> Fut,
        Fut: Future<Output = Result<Vec<Action>, Error>>,
    {
        let now = Instant::now();
        let next = self.lock().next_round(self.interval);
        let Some(at) = next else {
            return;
        };
        if at > now {
            tokio::select! {
                () = tokio::time::sleep_until(at) => {}
                () = self.joined.notified() => {}
            }
            return;
        }
        let (ids, polled) = self.lock().due_at(now);
        if ids.is_empty() {
            return;
        }
        tracing::trace!(
            ids = ids.len(),
            waiters = polled.len(),
            "polling hcloud actions"
        );
        let mut answers: Answers = Vec::new();
        for chunk in ids.chunks(ACTIONS_PER_REQUEST) {
            let answer = poll(chunk.to_vec()).await;
            answers.push((chunk.to_vec(), answer));
        }
        let end = Instant::now();
        self.lock().settle(answers, &polled, end, self.interval);
        self.announce();
    }
}

impl fmt::Debug for ActionBatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ActionBatch")
            .field("interval", &self.interval)
            .field("waiters", &self.waiters())
            .finish()
    }
}

impl State {
    fn open(&self) -> impl Iterator<Item = &Waiter> {
        self.waiters.values().filter(|w| w.outcome.is_none())
    }

    /// Start of the next round: one interval after the last one ended, but not before some
    /// waiter is due; then as late as the last waiter due within half an interval. With
    /// patient waiters, later still: until every open waiter is due, the due IDs fill a
    /// request, or a waiter's patience runs out, whichever comes first. A punctual waiter is
    /// not held back by the last round, and no round waits past its due time.
    fn next_round(&self, interval: Duration) -> Option<Instant> {
        let spaced = self.last_round_end.map(|end| end + interval);
        let at = self
            .open()
            .map(|w| match spaced {
                Some(spaced) if !w.punctual => w.due.max(spaced),
                _ => w.due,
            })
            .min()?;
        let limit = at + interval / 2;
        let grouped = self
            .open()
            .map(|w| w.due)
            .filter(|due| *due <= limit)
            .fold(at, Instant::max);
        // Patient waiters wait for the others to be due, so that one round covers them all.
        let all_due = self.open().map(|w| w.due).max()?;
        let deadline = self.deadline()?;
        let full = self.full_at().unwrap_or(all_due);
        let round = grouped.max(all_due.min(deadline).min(full));
        // Nor is a punctual waiter's first poll later than it is due.
        let punctual = self.open().filter(|w| w.punctual).map(|w| w.due).min();
        Some(punctual.map_or(round, |first| round.min(first)))
    }

    /// The first moment a waiter's patience runs out.
    fn deadline(&self) -> Option<Instant> {
        self.open().map(|w| w.due + w.patience).min()
    }

    /// When the due IDs fill a request, if the open waiters have that many.
    fn full_at(&self) -> Option<Instant> {
        let mut dues: Vec<(Instant, usize)> =
            self.open().map(|w| (w.due, w.pending.len())).collect();
        dues.sort_unstable();
        let mut count = 0;
        dues.into_iter().find_map(|(due, ids)| {
            count += ids;
            (count >= ACTIONS_PER_REQUEST).then_some(due)
        })
    }

    /// The IDs to poll at `now` (sorted, each once) and the waiters they belong to: every
    /// due waiter, or, when the round comes only because requests are full (other waiters
    /// are due later and nobody's patience ran out), the waiters due first that fill whole
    /// requests.
    fn due_at(&self, now: Instant) -> (Vec<i64>, BTreeSet<u64>) {
        let mut due: Vec<(Instant, u64, &Waiter)> = self
            .waiters
            .iter()
            .filter(|(_, w)| w.outcome.is_none() && w.due <= now)
            .map(|(key, w)| (w.due, *key, w))
            .collect();
        due.sort_unstable_by_key(|(due, key, _)| (*due, *key));
        let more_coming = self.open().any(|w| w.due > now);
        let patient = self.deadline().is_none_or(|deadline| deadline > now);
        let total: usize = due.iter().map(|(_, _, w)| w.pending.len()).sum();
        let take = if more_coming && patient && total > ACTIONS_PER_REQUEST {
            total - total % ACTIONS_PER_REQUEST
        } else {
            usize::MAX
        };
        let mut ids = BTreeSet::new();
        let mut keys = BTreeSet::new();
        let mut counted = 0;
        for (_, key, waiter) in due {
            counted += waiter.pending.len();
            if counted > take && !keys.is_empty() {
                break;
            }
            ids.extend(waiter.pending.iter().copied());
            keys.insert(key);
        }
        (ids.into_iter().collect(), keys)
    }

    /// Hands the answers of a round that polled the waiters `polled` and ended at `end`.
    fn settle(
        &mut self,
        answers: Answers,
        polled: &BTreeSet<u64>,
        end: Instant,
        interval: Duration,
    ) {
        let mut seen: HashMap<i64, Action> = HashMap::new();
        let mut failed_in: HashMap<i64, usize> = HashMap::new();
        let mut errors: Vec<Error> = Vec::new();
        for (ids, answer) in answers {
            match answer {
                Ok(actions) => seen.extend(actions.into_iter().map(|a| (a.id, a))),
                Err(err) => {
                    failed_in.extend(ids.into_iter().map(|id| (id, errors.len())));
                    errors.push(err);
                }
            }
        }
        // Per failed request: the waiters it fails and the first of their IDs in it.
        let mut failing: Vec<Vec<(u64, i64)>> = errors.iter().map(|_| Vec::new()).collect();
        for (key, waiter) in &mut self.waiters {
            if waiter.outcome.is_some() {
                continue;
            }
            let was_polled = polled.contains(key);
            let mut action_failure = None;
            let mut request_failure = None;
            let mut missing = None;
            waiter.pending.retain(|id| match seen.get(id) {
                Some(action) => match action.status {
                    ActionStatus::Success => false,
                    ActionStatus::Error => {
                        action_failure.get_or_insert_with(|| failure(action));
                        true
                    }
                    _ => true,
                },
                None if was_polled => {
                    match failed_in.get(id) {
                        Some(&request) => {
                            request_failure.get_or_insert((request, *id));
                        }
                        None => {
                            missing.get_or_insert(*id);
                        }
                    }
                    true
                }
                None => true,
            });
            if let Some(err) = action_failure {
                waiter.outcome = Some(Err(err));
            } else if let Some((request, id)) = request_failure {
                if let Some(list) = failing.get_mut(request) {
                    list.push((*key, id));
                }
            } else if let Some(id) = missing {
                waiter.outcome = Some(Err(not_found(id)));
            } else if waiter.pending.is_empty() {
                waiter.outcome = Some(Ok(()));
            }
            if was_polled {
                waiter.due = end + interval;
                waiter.punctual = false;
            }
        }
        for (err, list) in errors.into_iter().zip(failing) {
            let Some(((last, _), others)) = list.split_last() else {
                continue;
            };
            for (key, id) in others {
                if let Some(waiter) = self.waiters.get_mut(key) {
                    waiter.outcome = Some(Err(duplicate(&err, *id)));
                }
            }
            if let Some(waiter) = self.waiters.get_mut(last) {
                waiter.outcome = Some(Err(err));
            }
        }
        self.last_round_end = Some(end);
    }
}

impl Ticket<'_> {
    /// Waits until the waiter is done, leading the rounds whenever nobody else does. `poll`
    /// fetches one request's worth of IDs.
    pub(crate) async fn wait<F, Fut>(self, poll: F) -> Result<(), Error>
    where
        F: Fn(Vec<i64>) -> Fut,
        Fut: Future<Output = Result<Vec<Action>, Error>>,
    {
        let batch = self.batch;
        let mut changed = batch.changed.subscribe();
        loop {
            // Marks the current round as seen before looking, so no later one is missed.
            changed.borrow_and_update();
            let leading = {
                let mut state = batch.lock();
                let outcome = match state.waiters.get_mut(&self.key) {
                    Some(waiter) => waiter.outcome.take(),
                    // Only dropping the ticket removes the entry; answer rather than hang.
                    None => Some(Err(lost())),
                };
                if let Some(outcome) = outcome {
                    return outcome;
                }
                match state.leader {
                    None => {
                        state.leader = Some(self.key);
                        true
                    }
                    Some(leader) => leader == self.key,
                }
            };
            if leading {
                batch.lead(&poll).await;
            } else if changed.changed().await.is_err() {
                // The sender lives in the batch, which outlives this ticket.
                return Err(lost());
            }
        }
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        let freed = {
            let mut state = self.batch.lock();
            state.waiters.remove(&self.key);
            let led = state.leader == Some(self.key);
            if led {
                state.leader = None;
            }
            led
        };
        if freed {
            self.batch.announce();
        }
    }
}

/// The error for an action that finished with status `error`.
pub(crate) fn failure(action: &Action) -> Error {
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

/// The error for an ID the API did not return.
fn not_found(id: i64) -> Error {
    Error::Action(ActionError {
        id,
        command: String::new(),
        code: "not_found".to_owned(),
        message: "the API did not return this action".to_owned(),
    })
}

fn lost() -> Error {
    Error::Action(ActionError {
        id: 0,
        command: String::new(),
        code: "waiter_lost".to_owned(),
        message: "the action waiter lost its registration".to_owned(),
    })
}

/// An error equivalent to `err` (a failed poll request) for another waiter, whose first ID
/// in the request is `id`. API errors and action errors are cloned; an undecodable answer
/// keeps method, path, status and message. A transport failure cannot be copied (its cause
/// is not `Clone`): it becomes an action error with code `poll_failed` and the failure's
/// text as message.
pub(crate) fn duplicate(err: &Error, id: i64) -> Error {
    match err {
        Error::Api(e) => Error::Api(e.clone()),
        Error::Action(e) => Error::Action(e.clone()),
        Error::Decode(e) => Error::decode(
            &e.method,
            &e.path,
            e.status,
            serde_json::Error::custom(e.source.to_string()),
        ),
        other => Error::Action(ActionError {
            id,
            command: String::new(),
            code: "poll_failed".to_owned(),
            message: other.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code

    use std::sync::Arc;

    use super::*;
    use crate::error::{ApiError, ErrorCode};

    const INTERVAL: Duration = Duration::from_millis(100);

    /// A fake `GET /actions`: logs each request; an action succeeds once it was polled
    /// `polls_to_finish` times, IDs at or above 1000 do not exist, ID 666 fails.
    #[derive(Default)]
    struct Fake {
        log: Mutex<Vec<(Instant, Vec<i64>)>>,
        polls: Mutex<HashMap<i64, u32>>,
        polls_to_finish: u32,
        /// Requests answered with 503 from this one (by index) on, if set.
        fail_from: Option<usize>,
        /// How long a request takes.
        latency: Duration,
    }

    impl Fake {
        fn new(polls_to_finish: u32) -> Arc<Fake> {
            Arc::new(Fake {
                polls_to_finish,
                ..Fake::default()
            })
        }

        async fn answer(&self, ids: Vec<i64>) -> Result<Vec<Action>, Error> {
            let index = {
                let mut log = self.log.lock();
                log.push((Instant::now(), ids.clone()));
                log.len() - 1
            };
            tokio::time::sleep(self.latency).await;
            if self.fail_from.is_some_and(|from| index >= from) {
                return Err(ApiError::from_response(
                    503,
                    br#"{"error":{"code":"unavailable","message":"try later"}}"#,
                    "GET",
                    "/actions",
                )
                .into());
            }
            let mut polls = self.polls.lock();
            Ok(ids
                .into_iter()
                .filter(|id| *id < 1000)
                .map(|id| {
                    let n = polls.entry(id).or_default();
                    *n += 1;
                    let status = if id == 666 {
                        ActionStatus::Error
                    } else if *n >= self.polls_to_finish {
                        ActionStatus::Success
                    } else {
                        ActionStatus::Running
                    };
                    Action {
                        id,
                        command: "test".to_owned(),
                        status,
                        ..Action::default()
                    }
                })
                .collect())
        }

        fn requests(&self) -> Vec<(Instant, Vec<i64>)> {
            self.log.lock().clone()
        }
    }

    /// Waits for `ids` due at `due`, with `patience`, polling `fake`.
    async fn wait_with(
        batch: &ActionBatch,
        fake: &Arc<Fake>,
        ids: &[i64],
        due: Instant,
        patience: Duration,
    ) -> Result<(), Error> {
        let fake = Arc::clone(fake);
        batch
            .join(ids.iter().copied().collect(), due, patience)
            .wait(move |ids| {
                let fake = Arc::clone(&fake);
                async move { fake.answer(ids).await }
            })
            .await
    }

    async fn wait(
        batch: &ActionBatch,
        fake: &Arc<Fake>,
        ids: &[i64],
        due: Instant,
    ) -> Result<(), Error> {
        wait_with(batch, fake, ids, due, Duration::ZERO).await
    }

    #[tokio::test(start_paused = true)]
    async fn concurrent_waiters_share_each_round() {
        let batch = ActionBatch::new(INTERVAL);
        let fake = Fake::new(3);
        let start = Instant::now();
        let due = start + INTERVAL;
        let ids: Vec<i64> = (1..=60).collect();
        let results = tokio::join!(
            wait(&batch, &fake, &ids[..20], due),
            wait(&batch, &fake, &ids[20..40], due),
            wait(&batch, &fake, &ids[40..], due),
            wait(&batch, &fake, &[5], due),
        );
        assert!(results.0.is_ok() && results.1.is_ok() && results.2.is_ok() && results.3.is_ok());
        let requests = fake.requests();
        // Three rounds of 60 distinct IDs: 50 + 10 each.
        assert_eq!(requests.len(), 6, "{requests:?}");
        for (i, (at, ids)) in requests.iter().enumerate() {
            let round = i / 2;
            assert_eq!(ids.len(), [50, 10][i % 2]);
            assert!(
                *at >= start + INTERVAL * (round as u32 + 1),
                "request {i} too early"
            );
        }
        assert_eq!(batch.waiters(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn nobody_is_polled_before_due_and_near_dues_share_a_round() {
        let batch = ActionBatch::new(INTERVAL);
        let fake = Fake::new(1);
        let start = Instant::now();
        let a = wait(&batch, &fake, &[1], start + INTERVAL);
        let b = async {
            tokio::time::sleep(INTERVAL / 20).await;
            wait(&batch, &fake, &[2], Instant::now() + INTERVAL).await
        };
        let c = async {
            tokio::time::sleep(INTERVAL * 3 / 4).await;
            wait(&batch, &fake, &[3], Instant::now() + INTERVAL).await
        };
        let d = async {
            tokio::time::sleep(INTERVAL * 2 / 5).await;
            wait(&batch, &fake, &[4], Instant::now() + INTERVAL).await
        };
        let (a, b, c, d) = tokio::join!(a, b, c, d);
        assert!(a.is_ok() && b.is_ok() && c.is_ok() && d.is_ok());
        let requests = fake.requests();
        assert_eq!(requests.len(), 2, "{requests:?}");
        // 1, 2 and 4 are due within half an interval of the first: one round, when 4 is due.
        assert_eq!(requests[0].1, vec![1, 2, 4]);
        assert_eq!(requests[0].0, start + INTERVAL + INTERVAL * 2 / 5);
        // 3 is due at 175 ms, past that window, and rounds are an interval apart.
        assert_eq!(requests[1].1, vec![3]);
        assert_eq!(requests[1].0, requests[0].0 + INTERVAL);
    }

    async fn wait_patiently(
        batch: &ActionBatch,
        fake: &Arc<Fake>,
        id: i64,
        due: Instant,
    ) -> Result<(), Error> {
        wait_with(batch, fake, &[id], due, INTERVAL * 3).await
    }

    /// Two patient waiters for `ids`, due `dues` intervals from now, polling a fresh fake:
    /// the start and the requests they took.
    async fn two_patient_waiters(
        batch: &ActionBatch,
        ids: [i64; 2],
        dues: [u32; 2],
    ) -> (Instant, Vec<(Instant, Vec<i64>)>) {
        let fake = Fake::new(1);
        let start = Instant::now();
        let (first, second) = tokio::join!(
            wait_patiently(batch, &fake, ids[0], start + INTERVAL * dues[0]),
            wait_patiently(batch, &fake, ids[1], start + INTERVAL * dues[1]),
        );
        first.and(second).expect("done");
        (start, fake.requests())
    }

    /// 100 waiters join one after another, 4.8 ms apart (an `add_target` per load balancer
    /// at 20 ms per request, scaled to this interval); the requests their polls took.
    async fn stream_of_joins(patient: bool) -> Vec<(Instant, Vec<i64>)> {
        let batch = Arc::new(ActionBatch::new(INTERVAL));
        let fake = Fake::new(1);
        let gap = INTERVAL * 48 / 1000;
        let mut waiters = tokio::task::JoinSet::new();
        for i in 0..100u32 {
            let (batch, fake) = (Arc::clone(&batch), Arc::clone(&fake));
            waiters.spawn(async move {
                tokio::time::sleep(gap * i).await;
                let due = Instant::now() + INTERVAL;
                let result = if patient {
                    wait_patiently(&batch, &fake, i64::from(i), due).await
                } else {
                    wait(&batch, &fake, &[i64::from(i)], due).await
                };
                result.expect("done");
                // Never later than its patience allows.
                assert!(
                    Instant::now() <= due + INTERVAL * 3,
                    "waiter {i} polled late"
                );
            });
        }
        while let Some(joined) = waiters.join_next().await {
            joined.expect("waiter");
        }
        assert_eq!(batch.waiters(), 0);
        fake.requests()
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_of_patient_waiters_fills_whole_requests() {
        let requests = stream_of_joins(true).await;
        assert_eq!(requests.len(), 2, "{requests:?}");
        assert_eq!(requests[0].1, (0..50).collect::<Vec<i64>>());
        assert_eq!(requests[1].1, (50..100).collect::<Vec<i64>>());
        // Without patience, a round every 1.5 intervals or so, each with fewer IDs.
        let impatient = stream_of_joins(false).await;
        assert!(impatient.len() >= 4, "{impatient:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn patience_never_delays_a_lone_waiter_and_ends_at_its_deadline() {
        let batch = ActionBatch::new(INTERVAL);
        let fake = Fake::new(1);
        let start = Instant::now();
        wait_patiently(&batch, &fake, 1, start + INTERVAL)
            .await
            .expect("done");
        assert_eq!(fake.requests(), vec![(start + INTERVAL, vec![1])]);

        // Another waiter due much later is not waited for beyond the deadline.
        let (start, requests) = two_patient_waiters(&batch, [2, 3], [1, 10]).await;
        assert_eq!(requests[0], (start + INTERVAL * 4, vec![2]), "{requests:?}");
        assert_eq!(
            requests[1],
            (start + INTERVAL * 10, vec![3]),
            "{requests:?}"
        );
        // And one due within its patience shares the round.
        let (start, requests) = two_patient_waiters(&batch, [4, 5], [1, 3]).await;
        assert_eq!(requests, vec![(start + INTERVAL * 3, vec![4, 5])]);
    }

    async fn wait_punctually(
        batch: &ActionBatch,
        fake: &Arc<Fake>,
        ids: &[i64],
        due: Instant,
    ) -> Result<(), Error> {
        let fake = Arc::clone(fake);
        batch
            .join_punctual(ids.iter().copied().collect(), due)
            .wait(move |ids| {
                let fake = Arc::clone(&fake);
                async move { fake.answer(ids).await }
            })
            .await
    }

    #[tokio::test(start_paused = true)]
    async fn punctual_waiters_one_after_another_are_each_polled_when_due() {
        let batch = ActionBatch::new(INTERVAL);
        let fake = Fake::new(1);
        let start = Instant::now();
        // One action after another, each checked a fifth of an interval after it started.
        for id in 1..=3 {
            let due = Instant::now() + INTERVAL / 5;
            wait_punctually(&batch, &fake, &[id], due)
                .await
                .expect("done");
        }
        let times: Vec<Instant> = fake.requests().iter().map(|(at, _)| *at).collect();
        assert_eq!(
            times,
            vec![
                start + INTERVAL / 5,
                start + INTERVAL * 2 / 5,
                start + INTERVAL * 3 / 5
            ]
        );
        // A waiter that is not punctual is polled an interval after the last round.
        let end = Instant::now();
        wait(&batch, &fake, &[4], end + INTERVAL / 5)
            .await
            .expect("done");
        assert_eq!(fake.requests()[3], (end + INTERVAL, vec![4]));
    }

    #[tokio::test(start_paused = true)]
    async fn a_punctual_round_waits_for_nobody_and_its_recheck_is_an_interval_later() {
        let batch = ActionBatch::new(INTERVAL);
        let fake = Fake::new(2);
        let start = Instant::now();
        let (a, b) = tokio::join!(
            wait_punctually(&batch, &fake, &[1], start + INTERVAL),
            wait(&batch, &fake, &[2], start + INTERVAL + INTERVAL / 4),
        );
        a.and(b).expect("done");
        assert_eq!(
            fake.requests(),
            vec![
                (start + INTERVAL, vec![1]),
                (start + INTERVAL * 2, vec![1, 2]),
                (start + INTERVAL * 3, vec![2]),
            ]
        );
        // Without punctuality, the first round waits for the second waiter.
        let fake = Fake::new(2);
        let start = Instant::now();
        let (a, b) = tokio::join!(
            wait(&batch, &fake, &[1], start + INTERVAL),
            wait(&batch, &fake, &[2], start + INTERVAL + INTERVAL / 4),
        );
        a.and(b).expect("done");
        let first = start + INTERVAL + INTERVAL / 4;
        assert_eq!(
            fake.requests(),
            vec![(first, vec![1, 2]), (first + INTERVAL, vec![1, 2])]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn bare_ids_are_polled_at_once_when_idle() {
        let batch = ActionBatch::new(INTERVAL);
        let fake = Fake::new(2);
        let start = Instant::now();
        wait(&batch, &fake, &[7, 8], start).await.expect("done");
        let requests = fake.requests();
        assert_eq!(requests.len(), 2);
        assert_eq!(requests[0].0, start);
        assert_eq!(requests[1].0, start + INTERVAL);
    }

    #[tokio::test(start_paused = true)]
    async fn dropped_leader_hands_over_and_its_ids_are_not_polled_again() {
        let batch = ActionBatch::new(INTERVAL);
        let fake = Arc::new(Fake {
            polls_to_finish: 5,
            latency: INTERVAL / 2,
            ..Fake::default()
        });
        let start = Instant::now();
        // The first waiter leads. Requests take 50 ms and start at 0, 150 and 300 ms; the
        // leader's timeout fires in the middle of the third.
        let cut = start + INTERVAL * 3 + INTERVAL / 4;
        let leader =
            tokio::time::timeout_at(cut, async { wait(&batch, &fake, &[500], start).await });
        let follower = async {
            tokio::task::yield_now().await;
            wait(&batch, &fake, &[1], start).await
        };
        let (led, followed) = tokio::join!(leader, follower);
        assert!(led.is_err(), "the leader timed out");
        followed.expect("the follower finishes on its own");
        let requests = fake.requests();
        let (before, after): (Vec<_>, Vec<_>) = requests.iter().partition(|(at, _)| *at < cut);
        assert_eq!(before.last().map(|(at, _)| *at), Some(start + INTERVAL * 3));
        assert_eq!(
            before.last().map(|(_, ids)| ids.clone()),
            Some(vec![1, 500])
        );
        // The follower takes over at once and polls only its own ID until it is done.
        assert_eq!(after.first().map(|(at, _)| *at), Some(cut));
        assert!(after.len() >= 2, "{requests:?}");
        assert!(after.iter().all(|(_, ids)| ids == &vec![1]), "{requests:?}");
        assert_eq!(batch.waiters(), 0);
        assert_eq!(batch.lock().leader, None);
    }

    #[tokio::test(start_paused = true)]
    async fn failures_reach_only_their_waiters() {
        let batch = ActionBatch::new(INTERVAL);
        let fake = Fake::new(2);
        let now = Instant::now();
        let (good, failed, unknown, mixed) = tokio::join!(
            wait(&batch, &fake, &[1, 2], now),
            wait(&batch, &fake, &[3, 666], now),
            wait(&batch, &fake, &[4000], now),
            wait(&batch, &fake, &[5, 5000], now),
        );
        good.expect("good");
        assert!(
            matches!(failed, Err(Error::Action(ref e)) if e.id == 666 && e.command == "test"),
            "{failed:?}"
        );
        assert!(
            matches!(unknown, Err(Error::Action(ref e)) if e.id == 4000 && e.code == "not_found"),
            "{unknown:?}"
        );
        assert!(
            matches!(mixed, Err(Error::Action(ref e)) if e.id == 5000 && e.code == "not_found"),
            "{mixed:?}"
        );
        // One request per round, for everybody: two rounds at most (the first may start
        // before the others joined).
        let requests = fake.requests();
        assert!(requests.len() <= 2, "{requests:?}");
        assert!(
            requests
                .iter()
                .any(|(_, ids)| [3, 666, 4000, 5, 5000].iter().all(|id| ids.contains(id))),
            "{requests:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_request_fails_its_waiters_and_polling_goes_on() {
        let batch = ActionBatch::new(INTERVAL);
        let fake = Arc::new(Fake {
            polls_to_finish: 2,
            fail_from: Some(1),
            ..Fake::default()
        });
        let now = Instant::now();
        let (a, b) = tokio::join!(
            wait(&batch, &fake, &[1], now),
            wait(&batch, &fake, &[2], now)
        );
        for result in [a, b] {
            let err = result.expect_err("the second round failed");
            assert_eq!(err.status(), Some(503));
            assert_eq!(err.code(), Some(&ErrorCode::Unavailable));
        }
        assert_eq!(fake.requests().len(), 2);
        assert_eq!(batch.waiters(), 0);
        // The batch still works.
        let healthy = Fake::new(1);
        wait(&batch, &healthy, &[9], Instant::now())
            .await
            .expect("polling again");
    }

    #[test]
    fn duplicates_keep_what_callers_look_at() {
        let api: Error = ApiError::from_response(
            503,
            br#"{"error":{"code":"unavailable","message":"m"}}"#,
            "GET",
            "/actions",
        )
        .into();
        let copy = duplicate(&api, 3);
        assert_eq!(copy.status(), Some(503));
        assert_eq!(copy.kind(), api.kind());
        assert_eq!(copy.to_string(), api.to_string());

        let source = serde_json::from_slice::<Action>(b"{").expect_err("broken");
        let decode = Error::decode("GET", "/actions", 200, source);
        let copy = duplicate(&decode, 3);
        assert_eq!(copy.kind(), "decode");
        assert_eq!(copy.to_string(), decode.to_string());

        let config = Error::Config(crate::error::ConfigError::EmptyToken {
            variable: "HCLOUD_TOKEN",
        });
        let Error::Action(copy) = duplicate(&config, 3) else {
            panic!("an action error");
        };
        assert_eq!((copy.id, copy.code.as_str()), (3, "poll_failed"));
        assert!(copy.message.contains("HCLOUD_TOKEN"));
    }
}
