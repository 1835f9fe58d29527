//! The load balancers as last seen, shared by every ensure, update and delete of the process.
//!
//! Finding a Service's load balancer used to cost one labelled listing per call, so a leader
//! start with 100 Services cost 100 requests and a Node joining another 100 before any target
//! was added. Here one paged listing of all load balancers (`GET /load_balancers`, 50 per
//! page), kept as a snapshot cache with the freshness policy of [`crate::snapshot_cache`],
//! answers every lookup for [`CacheConfig::load_balancer_max_age`] (`max_age` below):
//!
//! - **When to list**: a lookup that finds no fresh listing joins the one under way, or starts
//!   one when there is none yet, when it fits one page anyway, or when lookups come in a burst
//!   (a second lookup within `max_age`, or a burst announced by [`LoadBalancerCache::expect_burst`]); a
//!   lone lookup of a stale snapshot with many load balancers asks by label instead (one
//!   request, as before).
//! - **Write-through**: what this process learns from its own writes (a created load
//!   balancer, targets added or removed, a reload after changes, a deletion) is kept beside the
//!   listing and shown over it at once, and a listing started before such a write does not
//!   overwrite it.
//! - **Doubt means a read**: an entry whose change failed half-way is marked stale and read
//!   again (`GET /load_balancers/{id}`) by the next lookup that would use it. A Service whose
//!   load balancer may have been created without this process learning its ID (the answer to
//!   the create was lost) is looked up by its label again ([`LoadBalancerCache::doubt_service`]).
//! - **Absence is never concluded from the snapshot**: before a Service lets go of its load
//!   balancer, [`LoadBalancerCache::labelled_now`] asks the API by label selector. A listing can miss
//!   an entry (a page shift while others are deleted, a create whose answer was lost), and a
//!   Service released on such an answer would leave its load balancer billed for good.
//!
//! - **One cluster's**: with a cluster name (`HCLOUD_LOAD_BALANCERS_CLUSTER_NAME`) the listing
//!   asks for the cluster label only ([`LoadBalancerCache::scoped`]); a lookup it answers with nothing
//!   asks the API for that Service alone, so load balancers without the label are still found.
//!
//! What a stale snapshot can hide is a load balancer created by someone else in the last
//! `max_age`. Creating ours then fails on the name (names are unique in a project), which
//! [`LoadBalancerCache::forget`] answers with a new listing on the retry: the stranger is found by name
//! and adopted, or refused when it belongs to another Service.
//!
//! [`CacheConfig::load_balancer_max_age`]: crate::CacheConfig::load_balancer_max_age

use parking_lot::{Mutex, MutexGuard};
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use hcloud_api::Client;
use hcloud_api::api::params::ListParams;
use hcloud_api::models::LoadBalancer;
use tokio::time::Instant;

use super::naming::{SERVICE_UID_LABEL, uid_selector};
use crate::snapshot_cache::{self, Answer, SnapshotCache};

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

/// Every load balancer by ID, as listed.
type Listed = BTreeMap<i64, LoadBalancer>;

/// A listing of all load balancers under way.
type Listing = Answer<Listed, SharedError>;

/// What this process did to (or learned by label of) one load balancer.
#[derive(Debug)]
struct Written {
    /// When: a listing that started before this moment does not show it.
    at: Instant,
    /// The load balancer as left (`None`: gone).
    lb: Option<LoadBalancer>,
}

#[derive(Debug, Default)]
struct State {
    /// Entries changed by this process since the listing started (shown over it).
    written: BTreeMap<i64, Written>,
    /// Entries not to be trusted: read again before use.
    stale: HashSet<i64>,
    /// The last lookup, to tell a burst from a lone lookup.
    last_lookup: Option<Instant>,
    /// Services (by UID) whose load balancer may exist unseen: looked up by label next time.
    doubted_services: HashSet<String>,
    /// When the listing that `written` and `stale` were last settled against started.
    settled: Option<Instant>,
}

/// The load balancers as this process knows them: a listing, with the writes of this process
/// since it started shown over it.
struct View<'a> {
    state: MutexGuard<'a, State>,
    listing: Option<snapshot_cache::Snapshot<Listed>>,
}

impl View<'_> {
    /// Every load balancer known.
    fn lbs(&self) -> impl Iterator<Item = &LoadBalancer> + Clone {
        let written = &self.state.written;
        self.listing
            .iter()
            .flat_map(|listing| listing.values())
            .filter(move |lb| !written.contains_key(&lb.id))
            .chain(written.values().filter_map(|w| w.lb.as_ref()))
    }
}

/// The load balancers as last seen (see the module docs).
#[derive(Debug)]
pub(super) struct LoadBalancerCache {
    client: Client,
    max_age: Duration,
    /// The cluster label selector of listings (`HCLOUD_LOAD_BALANCERS_CLUSTER_NAME`); `None`:
    /// every load balancer of the project is listed.
    scope: Option<String>,
    listing: SnapshotCache<Listed, SharedError>,
    state: Mutex<State>,
}

enum Next {
    Answer(Box<Lookup>),
    Join(Listing),
    Direct,
}

impl LoadBalancerCache {
    /// A cache that answers lookups for `max_age` after its listing started.
    pub fn new(client: Client, max_age: Duration) -> Self {
        Self {
            client,
            max_age,
            scope: None,
            listing: SnapshotCache::default(),
            state: Mutex::default(),
        }
    }

    /// List only the load balancers matching `selector` (the cluster's). A lookup the scoped
    /// listing answers with nothing then asks the API for the Service alone (by its UID label,
    /// then by name), so that a load balancer made before the cluster label existed, or by
    /// hand, is still found (and then labelled) instead of created a second time.
    pub fn scoped(mut self, selector: Option<String>) -> Self {
        self.scope = selector;
        self
    }

    /// The last listing with this process's writes over it.
    fn view(&self) -> View<'_> {
        self.view_of(self.listing.latest())
    }

    /// `listing` (the last or a fresh one) with this process's writes over it: what the
    /// listing shows, from writes made before it started, is forgotten, and so are doubts
    /// about entries this process did not write since.
    fn view_of(&self, listing: Option<snapshot_cache::Snapshot<Listed>>) -> View<'_> {
        let mut state = self.state.lock();
        if let Some(started) = listing.as_ref().map(|l| l.at)
            && state.settled.is_none_or(|at| at < started)
        {
            state.written.retain(|_, w| w.at >= started);
            let State { written, stale, .. } = &mut *state;
            stale.retain(|id| written.contains_key(id));
            state.settled = Some(started);
        }
        View { state, listing }
    }

    /// The Service's load balancers: those labelled with `uid` and, when `name` is given and
    /// none is labelled, the one named `name`.
    pub async fn lookup(&self, uid: &str, name: Option<&str>) -> Result<Lookup, SharedError> {
        let mut found = match self.next(Instant::now(), uid, name) {
            Next::Answer(found) => *found,
            Next::Join(listing) => {
                listing.await?;
                // The listing just landed: answer from it, however long it took.
                select(self.view().lbs(), uid, name)
            }
            Next::Direct => return self.direct(uid, name).await,
        };
        if self.scope.is_some() && found == Lookup::default() {
            return self.direct(uid, name).await;
        }
        self.reread_stale(&mut found).await?;
        Ok(found)
    }

    /// What to do for a lookup now: answer, join a listing (starting it if needed), or ask
    /// the API for this Service only.
    fn next(&self, now: Instant, uid: &str, name: Option<&str>) -> Next {
        let fresh = self.listing.fresh(self.max_age);
        let answers = fresh.is_some();
        let mut view = self.view_of(fresh.or_else(|| self.listing.latest()));
        let burst = view
            .state
            .last_lookup
            .is_some_and(|last| now.saturating_duration_since(last) <= self.max_age);
        view.state.last_lookup = Some(now);
        if view.state.doubted_services.contains(uid) {
            return Next::Direct;
        }
        if answers {
            return Next::Answer(Box::new(select(view.lbs(), uid, name)));
        }
        if self.listing.is_refreshing() {
            return Next::Join(self.listing.get(self.max_age, self.list_all()));
        }
        let listed = view.listing.is_some();
        let one_page = listed && view.lbs().count() < PER_PAGE;
        if listed && !one_page && !burst {
            return Next::Direct;
        }
        Next::Join(self.listing.get(self.max_age, self.list_all()))
    }

    /// One listing of all load balancers.
    fn list_all(
        &self,
    ) -> impl FnOnce() -> BoxFuture<'static, Result<Listed, SharedError>> + Send + 'static {
        let client = self.client.clone();
        let params = self
            .scope
            .clone()
            .map_or_else(ListParams::default, ListParams::label_selector);
        move || {
            Box::pin(async move {
                let lbs = client
                    .load_balancers()
                    .list_all(&params)
                    .await
                    .map_err(Arc::new)?;
                Ok(lbs.into_iter().map(|lb| (lb.id, lb)).collect())
            })
        }
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
        let mut view = self.view();
        // Whatever the snapshot knew as this Service's and the API no longer has is gone
        // (unless this process wrote it meanwhile).
        let gone: Vec<i64> = view
            .lbs()
            .filter(|lb| lb.labels.get(SERVICE_UID_LABEL).map(String::as_str) == Some(uid))
            .filter(|lb| !labelled.iter().any(|l| l.id == lb.id))
            .filter(|lb| {
                view.state
                    .written
                    .get(&lb.id)
                    .is_none_or(|w| w.at < requested_at)
            })
            .map(|lb| lb.id)
            .collect();
        // Kept over a listing that started before this request, like a write: such a listing
        // may not show a load balancer created just before this answer.
        let found = labelled.iter().map(|lb| (lb.id, Some(lb.clone())));
        for (id, lb) in found.chain(gone.into_iter().map(|id| (id, None))) {
            view.state.stale.remove(&id);
            view.state.written.insert(
                id,
                Written {
                    at: requested_at,
                    lb,
                },
            );
        }
        view.state.doubted_services.remove(uid);
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
                    self.note_read(lb);
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
            let view = self.view();
            found
                .labelled
                .iter()
                .chain(&found.by_name)
                .map(|lb| lb.id)
                .filter(|id| view.state.stale.contains(id))
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
    fn note_read(&self, lb: &LoadBalancer) {
        let mut view = self.view();
        view.state.stale.remove(&lb.id);
        match view.state.written.get_mut(&lb.id) {
            Some(written) => written.lb = Some(lb.clone()),
            None => self.listing.modify(|listed| {
                listed.insert(lb.id, lb.clone());
            }),
        }
    }

    /// The load balancers known (as last listed or written, perhaps stale) that carry the
    /// label `key`: a hint, from memory only, that the API is worth asking.
    pub fn known_with_label(&self, key: &str) -> Vec<LoadBalancer> {
        self.view()
            .lbs()
            .filter(|lb| lb.labels.contains_key(key))
            .cloned()
            .collect()
    }

    /// `lb` as this process left it after a change.
    pub fn store(&self, lb: &LoadBalancer) {
        self.write(lb.id, Some(lb.clone()));
    }

    /// The load balancer `id` is gone.
    pub fn remove(&self, id: i64) {
        self.write(id, None);
    }

    fn write(&self, id: i64, lb: Option<LoadBalancer>) {
        let mut view = self.view();
        view.state.stale.remove(&id);
        let at = Instant::now();
        view.state.written.insert(id, Written { at, lb });
    }

    /// The load balancer `id` may have changed in ways this process does not know: read it
    /// before using it again.
    pub fn doubt(&self, id: i64) {
        self.view().state.stale.insert(id);
    }

    /// The Service with `uid` may have a load balancer this snapshot does not show (a create
    /// whose answer was lost): its next lookup asks the API by label.
    pub fn doubt_service(&self, uid: &str) {
        self.view().state.doubted_services.insert(uid.to_owned());
    }

    /// Lookups for many Services follow (e.g. every load balancer takes a joining Node): the
    /// next lookup of a stale snapshot counts as part of a burst and lists, instead of first
    /// asking for its one Service alone.
    pub fn expect_burst(&self) {
        self.view().state.last_lookup = Some(Instant::now());
    }

    /// Everything may be outdated (e.g. a name turned out to be taken): the next lookup
    /// lists again.
    pub fn forget(&self) {
        let mut view = self.view();
        self.listing.forget();
        view.state.last_lookup = None;
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

    /// A cache whose client reaches nothing: listings are landed by hand.
    fn offline(max_age: Duration) -> LoadBalancerCache {
        let config = hcloud_api::ClientConfig::new(hcloud_api::Token::new("t"))
            .with_endpoint("http://127.0.0.1:9");
        LoadBalancerCache::new(Client::new(config).unwrap(), max_age)
    }

    /// A listing of `lbs` that takes `took`, started (first polled) now.
    fn listing(snapshot: &LoadBalancerCache, lbs: Vec<LoadBalancer>, took: Duration) -> Listing {
        snapshot.listing.refresh(move || {
            Box::pin(async move {
                tokio::time::sleep(took).await;
                Ok(lbs.into_iter().map(|lb| (lb.id, lb)).collect())
            })
        })
    }

    fn names(snapshot: &LoadBalancerCache) -> Vec<(i64, String)> {
        let mut names: Vec<(i64, String)> = snapshot
            .view()
            .lbs()
            .map(|l| (l.id, l.name.clone()))
            .collect();
        names.sort();
        names
    }

    #[tokio::test(start_paused = true)]
    async fn a_listing_keeps_what_was_written_after_it_started() {
        let snapshot = offline(Duration::from_secs(10));
        // Written before the listing started: the listing wins, and the doubt goes.
        snapshot.store(&lb(1, "old-write", None));
        snapshot.doubt(1);
        tokio::time::advance(Duration::from_secs(1)).await;
        let listed = (1..=4).map(|id| lb(id, "listed", None)).collect();
        let mut running =
            Box::pin(listing(&snapshot, listed, Duration::from_secs(1)).into_future());
        assert!(futures::poll!(running.as_mut()).is_pending());
        // Written after it started: the write wins, also a deletion.
        tokio::time::advance(Duration::from_millis(5)).await;
        snapshot.store(&lb(2, "new-write", None));
        snapshot.remove(3);
        assert_eq!(
            names(&snapshot),
            [(1, "old-write".to_owned()), (2, "new-write".to_owned())]
        );
        running.await.unwrap();
        assert_eq!(
            names(&snapshot),
            [
                (1, "listed".to_owned()),
                (2, "new-write".to_owned()),
                (4, "listed".to_owned())
            ]
        );
        assert!(
            snapshot.view().state.stale.is_empty(),
            "a listed entry is fresh again"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_announced_burst_lists_where_a_lone_lookup_would_ask_alone() {
        let snapshot = offline(Duration::from_secs(10));
        let many = (1..=60).map(|id| lb(id, "lb", None)).collect();
        listing(&snapshot, many, Duration::ZERO).await.unwrap();
        let long_ago = Instant::now();
        tokio::time::advance(Duration::from_secs(60)).await;
        snapshot.view().state.last_lookup = Some(long_ago);
        let lone = snapshot.next(Instant::now(), "u1", None);
        assert!(matches!(lone, Next::Direct), "a lone lookup asks alone");
        snapshot.view().state.last_lookup = Some(long_ago);
        snapshot.expect_burst();
        let announced = snapshot.next(Instant::now(), "u1", None);
        assert!(
            matches!(announced, Next::Join(_)),
            "an announced burst lists"
        );
        assert!(snapshot.listing.is_refreshing());
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
