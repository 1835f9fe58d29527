//! The load balancers as last seen, shared by every ensure, update and delete of the process.
//!
//! Finding a Service's load balancer used to cost one labelled listing per call, so a leader
//! start with 100 Services cost 100 requests and a Node joining another 100 before any target
//! was added. Here one paged listing of all load balancers (`GET /load_balancers`, 50 per
//! page) answers every lookup for [`Snapshot::max_age`]:
//!
//! - **Single flight**: lookups that find no fresh listing join the one under way, or start it.
//!   A listing is started when there is none yet, when it fits one page anyway, or when
//!   lookups come in a burst (a second lookup within `max_age`, or a burst announced by
//!   [`Snapshot::expect_burst`]); a lone lookup of a stale snapshot with many load balancers
//!   asks by label instead (one request, as before).
//! - **Write-through**: what this process learns from its own writes (a created load
//!   balancer, targets added or removed, a reload after changes, a deletion) goes into the
//!   snapshot at once, and a listing started before such a write does not overwrite it.
//! - **Doubt means a read**: an entry whose change failed half-way is marked stale and read
//!   again (`GET /load_balancers/{id}`) by the next lookup that would use it. A Service whose
//!   load balancer may have been created without this process learning its ID (the answer to
//!   the create was lost) is looked up by its label again ([`Snapshot::doubt_service`]).
//! - **Absence is never concluded from the snapshot**: before a Service lets go of its load
//!   balancer, [`Snapshot::labelled_now`] asks the API by label selector. A listing can miss
//!   an entry (a page shift while others are deleted, a create whose answer was lost), and a
//!   Service released on such an answer would leave its load balancer billed for good.
//!
//! What a stale snapshot can hide is a load balancer created by someone else in the last
//! `max_age`. Creating ours then fails on the name (names are unique in a project), which
//! [`Snapshot::forget`] answers with a new listing on the retry: the stranger is found by name
//! and adopted, or refused when it belongs to another Service.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use hcloud_api::Client;
use hcloud_api::api::params::ListParams;
use hcloud_api::models::LoadBalancer;

use super::naming::{SERVICE_UID_LABEL, uid_selector};

/// Load balancers per page of a listing (the API's maximum).
const PER_PAGE: usize = 50;

/// A failed read, shared by every lookup that waited for it.
pub(super) type SharedError = Arc<hcloud_api::Error>;

/// What a lookup found for one Service.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Lookup {
    /// The load balancers labelled with the Service's UID, lowest ID first.
    pub labelled: Vec<LoadBalancer>,
    /// The load balancer with the asked name, when a name was asked for and none is labelled.
    pub by_name: Option<LoadBalancer>,
}

type Listing = Shared<BoxFuture<'static, Result<(), SharedError>>>;

#[derive(Debug, Default)]
struct State {
    /// Every load balancer by ID, as listed (or written since).
    lbs: BTreeMap<i64, LoadBalancer>,
    /// When the request of the listing behind `lbs` started; `None`: never listed.
    listed_at: Option<Instant>,
    /// The listing under way.
    in_flight: Option<Listing>,
    /// Entries changed by this process, and when (kept over an older listing).
    written: HashMap<i64, Instant>,
    /// Entries not to be trusted: read again before use.
    stale: HashSet<i64>,
    /// The last lookup, to tell a burst from a lone lookup.
    last_lookup: Option<Instant>,
    /// Services (by UID) whose load balancer may exist unseen: looked up by label next time.
    doubted_services: HashSet<String>,
}

/// The load balancers as last seen (see the module docs).
#[derive(Debug)]
pub(super) struct Snapshot {
    client: Client,
    max_age: Duration,
    state: Arc<Mutex<State>>,
}

enum Next {
    Answer(Box<Lookup>),
    Join(Listing),
    Direct,
}

impl Snapshot {
    /// A snapshot that answers lookups for `max_age` after its listing started.
    pub fn new(client: Client, max_age: Duration) -> Self {
        Self {
            client,
            max_age,
            state: Arc::default(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// The Service's load balancers: those labelled with `uid` and, when `name` is given and
    /// none is labelled, the one named `name`.
    pub async fn lookup(&self, uid: &str, name: Option<&str>) -> Result<Lookup, SharedError> {
        let mut found = match self.next(Instant::now(), uid, name) {
            Next::Answer(found) => *found,
            Next::Join(listing) => {
                listing.await?;
                // The listing just merged: answer from it, however long it took.
                select(self.state().lbs.values(), uid, name)
            }
            Next::Direct => return self.direct(uid, name).await,
        };
        self.reread_stale(&mut found).await?;
        Ok(found)
    }

    /// What to do for a lookup now: answer, join a listing (starting it if needed), or ask
    /// the API for this Service only.
    fn next(&self, now: Instant, uid: &str, name: Option<&str>) -> Next {
        let mut state = self.state();
        let burst = state
            .last_lookup
            .is_some_and(|last| now.saturating_duration_since(last) <= self.max_age);
        state.last_lookup = Some(now);
        if state.doubted_services.contains(uid) {
            return Next::Direct;
        }
        if let Some(at) = state.listed_at
            && now.saturating_duration_since(at) <= self.max_age
        {
            return Next::Answer(Box::new(select(state.lbs.values(), uid, name)));
        }
        if let Some(listing) = &state.in_flight {
            return Next::Join(listing.clone());
        }
        let one_page = state.listed_at.is_some() && state.lbs.len() < PER_PAGE;
        if state.listed_at.is_some() && !one_page && !burst {
            return Next::Direct;
        }
        Next::Join(self.start_listing(&mut state, now))
    }

    fn start_listing(&self, state: &mut State, now: Instant) -> Listing {
        let client = self.client.clone();
        let shared = self.state.clone();
        let listing: Listing = async move {
            let result = client
                .load_balancers()
                .list_all(&ListParams::default())
                .await;
            let mut state = lock(&shared);
            state.in_flight = None;
            let lbs = result.map_err(Arc::new)?;
            merge(&mut state, now, &lbs);
            Ok(())
        }
        .boxed()
        .shared();
        state.in_flight = Some(listing.clone());
        listing
    }

    /// Every load balancer labelled with `uid`, lowest ID first, asked of the API now (one
    /// request by label selector): the answer a Service may be released on.
    pub async fn labelled_now(&self, uid: &str) -> Result<Vec<LoadBalancer>, SharedError> {
        let requested_at = Instant::now();
        let mut labelled = self
            .client
            .load_balancers()
            .list_all(&ListParams::label_selector(uid_selector(uid)))
            .await
            .map_err(Arc::new)?;
        labelled.sort_by_key(|lb| lb.id);
        let mut state = self.state();
        // Kept over a listing that started before this request, like a write: such a listing
        // may not show a load balancer created just before this answer.
        for lb in &labelled {
            state.stale.remove(&lb.id);
            state.written.insert(lb.id, requested_at);
            state.lbs.insert(lb.id, lb.clone());
        }
        // Whatever the snapshot knew as this Service's and the API no longer has is gone
        // (unless this process wrote it meanwhile).
        let gone: Vec<i64> = state
            .lbs
            .values()
            .filter(|lb| lb.labels.get(SERVICE_UID_LABEL).map(String::as_str) == Some(uid))
            .filter(|lb| !labelled.iter().any(|l| l.id == lb.id))
            .filter(|lb| {
                state
                    .written
                    .get(&lb.id)
                    .is_none_or(|at| *at < requested_at)
            })
            .map(|lb| lb.id)
            .collect();
        for id in gone {
            state.lbs.remove(&id);
            state.stale.remove(&id);
            state.written.insert(id, requested_at);
        }
        state.doubted_services.remove(uid);
        Ok(labelled)
    }

    /// One Service's load balancers straight from the API (labelled listing, then by name).
    async fn direct(&self, uid: &str, name: Option<&str>) -> Result<Lookup, SharedError> {
        let lbs = self.client.load_balancers();
        let labelled = self.labelled_now(uid).await?;
        let by_name = match name {
            Some(name) if labelled.is_empty() => {
                let found = lbs.get_by_name(name).await.map_err(Arc::new)?;
                if let Some(lb) = &found {
                    self.refresh(lb);
                }
                found
            }
            _ => None,
        };
        Ok(Lookup { labelled, by_name })
    }

    /// Read again the entries of `found` that are marked stale.
    async fn reread_stale(&self, found: &mut Lookup) -> Result<(), SharedError> {
        let stale: Vec<i64> = {
            let state = self.state();
            found
                .labelled
                .iter()
                .chain(&found.by_name)
                .map(|lb| lb.id)
                .filter(|id| state.stale.contains(id))
                .collect()
        };
        for id in stale {
            match self.client.load_balancers().get(id).await {
                Ok(lb) => {
                    self.store(&lb);
                    for slot in found.labelled.iter_mut().chain(found.by_name.as_mut()) {
                        if slot.id == id {
                            *slot = lb.clone();
                        }
                    }
                }
                Err(err) if err.is_not_found() => {
                    self.remove(id);
                    found.labelled.retain(|lb| lb.id != id);
                    found.by_name.take_if(|lb| lb.id == id);
                }
                Err(err) => return Err(Arc::new(err)),
            }
        }
        Ok(())
    }

    /// Put `lb` as read from the API into the snapshot (not a write of this process: a
    /// listing under way may still replace it).
    fn refresh(&self, lb: &LoadBalancer) {
        let mut state = self.state();
        state.stale.remove(&lb.id);
        state.lbs.insert(lb.id, lb.clone());
    }

    /// `lb` as this process left it after a change.
    pub fn store(&self, lb: &LoadBalancer) {
        let mut state = self.state();
        state.stale.remove(&lb.id);
        state.written.insert(lb.id, Instant::now());
        state.lbs.insert(lb.id, lb.clone());
    }

    /// The load balancer `id` is gone.
    pub fn remove(&self, id: i64) {
        let mut state = self.state();
        state.stale.remove(&id);
        state.written.insert(id, Instant::now());
        state.lbs.remove(&id);
    }

    /// The load balancer `id` may have changed in ways this process does not know: read it
    /// before using it again.
    pub fn doubt(&self, id: i64) {
        self.state().stale.insert(id);
    }

    /// The Service with `uid` may have a load balancer this snapshot does not show (a create
    /// whose answer was lost): its next lookup asks the API by label.
    pub fn doubt_service(&self, uid: &str) {
        self.state().doubted_services.insert(uid.to_owned());
    }

    /// Lookups for many Services follow (e.g. every load balancer takes a joining Node): the
    /// next lookup of a stale snapshot counts as part of a burst and lists, instead of first
    /// asking for its one Service alone.
    pub fn expect_burst(&self) {
        self.state().last_lookup = Some(Instant::now());
    }

    /// Everything may be outdated (e.g. a name turned out to be taken): the next lookup
    /// lists again.
    pub fn forget(&self) {
        let mut state = self.state();
        state.listed_at = None;
        state.last_lookup = None;
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Merge a finished listing into the state: entries this process wrote after the listing
/// started keep their written version.
fn merge(state: &mut State, started: Instant, listed: &[LoadBalancer]) {
    let mut lbs: BTreeMap<i64, LoadBalancer> =
        listed.iter().map(|lb| (lb.id, lb.clone())).collect();
    state.written.retain(|id, at| {
        if *at < started {
            return false;
        }
        match state.lbs.get(id) {
            Some(lb) => {
                lbs.insert(*id, lb.clone());
            }
            None => {
                lbs.remove(id);
            }
        }
        true
    });
    state.stale.retain(|id| state.written.contains_key(id));
    state.lbs = lbs;
    if state.listed_at.is_none_or(|at| at < started) {
        state.listed_at = Some(started);
    }
}

/// The Service's part of a listing (only its load balancers are copied).
fn select<'a, I>(lbs: I, uid: &str, name: Option<&str>) -> Lookup
where
    I: Iterator<Item = &'a LoadBalancer> + Clone,
{
    let mut labelled: Vec<LoadBalancer> = lbs
        .clone()
        .filter(|lb| lb.labels.get(SERVICE_UID_LABEL).map(String::as_str) == Some(uid))
        .cloned()
        .collect();
    labelled.sort_by_key(|lb| lb.id);
    let by_name = match name {
        Some(name) if labelled.is_empty() => lbs.into_iter().find(|lb| lb.name == name).cloned(),
        _ => None,
    };
    Lookup { labelled, by_name }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lb(id: i64, name: &str, uid: Option<&str>) -> LoadBalancer {
        let mut lb = LoadBalancer {
            id,
            name: name.to_owned(),
            ..LoadBalancer::default()
        };
        if let Some(uid) = uid {
            lb.labels
                .insert(SERVICE_UID_LABEL.to_owned(), uid.to_owned());
        }
        lb
    }

    #[test]
    fn a_listing_keeps_what_was_written_after_it_started() {
        let started = Instant::now();
        let mut state = State::default();
        // Written before the listing started: the listing wins.
        state.lbs.insert(1, lb(1, "old-write", None));
        state.written.insert(1, started - Duration::from_secs(1));
        // Written after it started: the write wins, also a deletion.
        state.lbs.insert(2, lb(2, "new-write", None));
        state.written.insert(2, started + Duration::from_millis(5));
        state.written.insert(3, started + Duration::from_millis(5));
        state.stale.insert(1);
        let listed = [
            lb(1, "listed", None),
            lb(2, "listed", None),
            lb(3, "listed", None),
            lb(4, "listed", None),
        ];
        merge(&mut state, started, &listed);
        let names: Vec<(i64, &str)> = state
            .lbs
            .values()
            .map(|l| (l.id, l.name.as_str()))
            .collect();
        assert_eq!(names, [(1, "listed"), (2, "new-write"), (4, "listed")]);
        assert!(state.stale.is_empty(), "a listed entry is fresh again");
        assert_eq!(state.listed_at, Some(started));
        // An older listing finishing later does not make the snapshot look older.
        merge(&mut state, started - Duration::from_secs(5), &listed);
        assert_eq!(state.listed_at, Some(started));
    }

    #[test]
    fn an_announced_burst_lists_where_a_lone_lookup_would_ask_alone() {
        let config = hcloud_api::ClientConfig::new(hcloud_api::Token::new("t"))
            .with_endpoint("http://127.0.0.1:9");
        let snapshot = Snapshot::new(Client::new(config).unwrap(), Duration::from_secs(10));
        let long_ago = Instant::now() - Duration::from_secs(60);
        {
            let mut state = snapshot.state();
            state.lbs = (1..=60).map(|id| (id, lb(id, "lb", None))).collect();
            state.listed_at = Some(long_ago);
            state.last_lookup = Some(long_ago);
        }
        let lone = snapshot.next(Instant::now(), "u1", None);
        assert!(matches!(lone, Next::Direct), "a lone lookup asks alone");
        snapshot.state().last_lookup = Some(long_ago);
        snapshot.expect_burst();
        let announced = snapshot.next(Instant::now(), "u1", None);
        assert!(
            matches!(announced, Next::Join(_)),
            "an announced burst lists"
        );
        assert!(snapshot.state().in_flight.is_some());
    }

    #[test]
    fn a_service_finds_its_labelled_load_balancers_before_its_name() {
        let lbs = [
            lb(7, "web", Some("u1")),
            lb(3, "web-2", Some("u1")),
            lb(4, "api", None),
            lb(5, "db", Some("u2")),
        ];
        let found = select(lbs.iter(), "u1", Some("api"));
        assert_eq!(
            found.labelled.iter().map(|l| l.id).collect::<Vec<_>>(),
            [3, 7]
        );
        assert_eq!(
            found.by_name, None,
            "the name only counts without a labelled one"
        );
        let found = select(lbs.iter(), "u3", Some("api"));
        assert!(found.labelled.is_empty());
        assert_eq!(found.by_name.map(|l| l.id), Some(4));
        assert_eq!(select(lbs.iter(), "u3", None), Lookup::default());
    }
}
