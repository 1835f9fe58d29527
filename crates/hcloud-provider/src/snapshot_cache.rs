//! The provider's one kind of cache: a snapshot of something listed from the API (every
//! server, every load balancer, the network with its routes, the load balancer types), shared
//! by every caller and refreshed by one request (or one paged listing) at a time.
//!
//! # Freshness policy
//!
//! Every cache of the provider follows these rules; each owner adds only its own lookups on
//! top (misses, direct reads, labelled lookups and the like, described in its module).
//!
//! 1. **Age.** A snapshot is immutable and shared. Its age counts from the moment the refresh
//!    that made it started: it shows no change made after that moment.
//! 2. **Fresh per call.** Each call says how old a snapshot it accepts (a max age from
//!    [`CacheConfig`]). A snapshot younger than that is fresh, unless it is marked outdated.
//! 3. **Single flight.** A call that finds nothing fresh joins the refresh under way, or starts
//!    one. Everyone who waits for a refresh gets its result, the same error included; a failed
//!    refresh leaves the last good snapshot in place. A refresh may have a deadline, after
//!    which its waiters get an error.
//! 4. **The newest wins.** A snapshot never replaces one whose refresh started later. A caller
//!    that needs data read after a moment of its own (e.g. to see whether a write whose answer
//!    was lost took effect) starts a refresh of its own ([`SnapshotCache::reload`]).
//! 5. **Outdated.** A cheaper check that sees a change marks the snapshot outdated as of a
//!    moment taken before it looked ([`SnapshotCache::mark_outdated`]): the snapshot is then not
//!    fresh, whatever its age, until a refresh that started after that moment finishes (a
//!    mark changes nothing when the snapshot comes from such a refresh already). A refresh
//!    that started before it may not show the change, and leaves the mark. So a check that
//!    sees a change while a refresh is under way first waits for that refresh
//!    ([`SnapshotCache::under_way`], no request of its own) and marks only when the new
//!    snapshot does not show what the check saw: a refresh that started a moment before the
//!    check usually shows the same (the first listing of a burst, which the first check of
//!    the burst's Nodes meets under way).
//! 6. **Forgotten.** When the API rejects a change planned on the snapshot, the owner forgets it
//!    ([`SnapshotCache::forget`]) and the next call refreshes. A refresh under way still lands.
//! 7. **Stale answers.** Callers that accept older data (periodic checks, messages) take the last
//!    good snapshot with its age ([`SnapshotCache::latest`]), outdated or not.
//! 8. **Own writes.** The owner may amend the snapshot with the outcome of its own writes
//!    ([`SnapshotCache::modify`]); the snapshot keeps its age. A refresh that started before the
//!    amendment replaces it: what must outlive such a refresh, the owner keeps beside the
//!    snapshot.
//!
//! Every age and threshold of the caches is a field of [`CacheConfig`], so tests shorten them
//! instead of waiting.
//!
//! [`CacheConfig`]: crate::CacheConfig

use std::future::{Future, IntoFuture};
use std::ops::Deref;
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::FutureExt;
use futures::future::{BoxFuture, Either, Ready, Shared};
use parking_lot::Mutex;
use tokio::time::Instant;

/// A point in a cache's history, taken with [`SnapshotCache::moment`]: a refresh that started
/// after it shows every change made before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Moment {
    /// Orders moments and refresh starts of one cache (instants may be equal).
    seq: u64,
    at: Instant,
}

/// One snapshot: the value and when the refresh that made it started. Cheap to clone; derefs
/// to the value.
#[derive(Debug)]
pub(crate) struct Snapshot<T> {
    /// When the refresh that made it started.
    pub at: Instant,
    seq: u64,
    value: Arc<T>,
}

impl<T> Clone for Snapshot<T> {
    fn clone(&self) -> Self {
        Self {
            at: self.at,
            seq: self.seq,
            value: self.value.clone(),
        }
    }
}

impl<T> Deref for Snapshot<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T> Snapshot<T> {
    /// How long ago its refresh started.
    pub fn age(&self) -> Duration {
        self.at.elapsed()
    }

    /// Whether the refresh that made it started after `moment` (it shows every change made
    /// before `moment`).
    pub fn is_after(&self, moment: Moment) -> bool {
        self.seq > moment.seq
    }
}

type SharedRefresh<T, E> = Shared<BoxFuture<'static, Result<Snapshot<T>, E>>>;

/// What a call gets: a fresh snapshot at once, or the refresh to wait for (`.await` it).
#[must_use = "await it for the snapshot"]
pub(crate) struct Answer<T, E>(AnswerKind<T, E>);

enum AnswerKind<T, E> {
    Fresh(Snapshot<T>),
    Joined(SharedRefresh<T, E>),
    Started(SharedRefresh<T, E>),
}

impl<T, E> Answer<T, E> {
    /// Whether this call started a refresh (and so costs requests); `false` when the snapshot
    /// was fresh or a refresh was under way.
    pub fn started(&self) -> bool {
        matches!(self.0, AnswerKind::Started(_))
    }
}

impl<T, E> IntoFuture for Answer<T, E>
where
    T: Send + Sync + 'static,
    E: Clone + Send + Sync + 'static,
{
    type Output = Result<Snapshot<T>, E>;
    type IntoFuture = Either<Ready<Self::Output>, SharedRefresh<T, E>>;

    fn into_future(self) -> Self::IntoFuture {
        match self.0 {
            AnswerKind::Fresh(snapshot) => Either::Left(futures::future::ready(Ok(snapshot))),
            AnswerKind::Joined(refresh) | AnswerKind::Started(refresh) => Either::Right(refresh),
        }
    }
}

/// The refresh under way.
struct InFlight<T, E> {
    id: u64,
    refresh: SharedRefresh<T, E>,
}

struct Inner<T, E> {
    /// The last good snapshot.
    current: Option<Snapshot<T>>,
    in_flight: Option<InFlight<T, E>>,
    /// Set by [`SnapshotCache::mark_outdated`]: the moment the snapshot is outdated as of.
    outdated: Option<Moment>,
    /// Counts moments and refresh starts.
    clock: u64,
    /// Counts refreshes launched, to tell which one is in flight.
    launched: u64,
}

impl<T, E> Inner<T, E> {
    fn moment(&mut self) -> Moment {
        self.clock += 1;
        Moment {
            seq: self.clock,
            at: Instant::now(),
        }
    }

    /// A refresh that started at `start` finished with `snapshot` (`None`: it failed).
    fn finish(&mut self, id: u64, start: Moment, snapshot: Option<&Snapshot<T>>) {
        if self.in_flight.as_ref().is_some_and(|f| f.id == id) {
            self.in_flight = None;
        }
        let Some(snapshot) = snapshot else { return };
        if self.current.as_ref().is_some_and(|c| c.seq > start.seq) {
            return;
        }
        self.current = Some(snapshot.clone());
        self.outdated.take_if(|since| since.seq < start.seq);
    }
}

struct Deadline<E> {
    limit: Duration,
    error: fn(Duration) -> E,
}

// Not derived: that would ask `E: Copy`.
impl<E> Clone for Deadline<E> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<E> Copy for Deadline<E> {}

/// A snapshot cache following the freshness policy of the module documentation. Cheap to
/// clone; clones share the snapshot and the refresh under way.
pub(crate) struct SnapshotCache<T, E> {
    inner: Arc<Mutex<Inner<T, E>>>,
    deadline: Option<Deadline<E>>,
}

impl<T, E> Clone for SnapshotCache<T, E> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            deadline: self.deadline,
        }
    }
}

impl<T, E> std::fmt::Debug for SnapshotCache<T, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.inner.lock();
        f.debug_struct("SnapshotCache")
            .field("age", &inner.current.as_ref().map(Snapshot::age))
            .field("refreshing", &inner.in_flight.is_some())
            .field("outdated", &inner.outdated.is_some())
            .finish()
    }
}

impl<T, E> Default for SnapshotCache<T, E> {
    fn default() -> Self {
        Self {
            inner: Arc::new(Mutex::new(Inner {
                current: None,
                in_flight: None,
                outdated: None,
                clock: 0,
                launched: 0,
            })),
            deadline: None,
        }
    }
}

impl<T, E> SnapshotCache<T, E> {
    /// An empty cache whose refreshes end with `error(limit)` when they take longer than
    /// `limit`.
    pub fn with_deadline(limit: Duration, error: fn(Duration) -> E) -> Self {
        Self {
            deadline: Some(Deadline { limit, error }),
            ..Self::default()
        }
    }

    /// The snapshot if it is younger than `max_age` and not outdated.
    pub fn fresh(&self, max_age: Duration) -> Option<Snapshot<T>> {
        let inner = self.inner.lock();
        inner
            .current
            .as_ref()
            .filter(|s| inner.outdated.is_none() && s.age() < max_age)
            .cloned()
    }

    /// The last good snapshot, whatever its age and marks (a stale answer).
    pub fn latest(&self) -> Option<Snapshot<T>> {
        self.inner.lock().current.clone()
    }

    /// Whether a refresh is under way.
    pub fn is_refreshing(&self) -> bool {
        self.inner.lock().in_flight.is_some()
    }

    /// The moment the snapshot is outdated as of, if it is marked outdated.
    pub fn outdated_since(&self) -> Option<Instant> {
        self.inner.lock().outdated.map(|m| m.at)
    }

    /// Now, in this cache's history: take it before looking for changes, and pass it to
    /// [`SnapshotCache::mark_outdated`] when a change was seen.
    pub fn moment(&self) -> Moment {
        self.inner.lock().moment()
    }

    /// The snapshot does not show a change made before `since`: it is not fresh until a refresh
    /// that started after `since` finishes (nothing changes when the current snapshot comes
    /// from such a refresh already).
    pub fn mark_outdated(&self, since: Moment) {
        let mut inner = self.inner.lock();
        if inner.current.as_ref().is_some_and(|c| c.seq > since.seq) {
            return;
        }
        if inner.outdated.is_none_or(|m| m.seq < since.seq) {
            inner.outdated = Some(since);
        }
    }

    /// Drop the snapshot: the next call refreshes.
    pub fn forget(&self) {
        let mut inner = self.inner.lock();
        inner.current = None;
        inner.outdated = None;
    }

    /// Amend the snapshot (if any) with the outcome of the owner's own write; it keeps its age.
    /// Changed in place unless a reader still holds it.
    pub fn modify(&self, change: impl FnOnce(&mut T))
    where
        T: Clone,
    {
        if let Some(snapshot) = self.inner.lock().current.as_mut() {
            change(Arc::make_mut(&mut snapshot.value));
        }
    }
}

impl<T, E> SnapshotCache<T, E>
where
    T: Send + Sync + 'static,
    E: Clone + Send + Sync + 'static,
{
    /// The refresh under way, if any, to wait for without starting one (so at no cost).
    pub fn under_way(&self) -> Option<Answer<T, E>> {
        let inner = self.inner.lock();
        let in_flight = inner.in_flight.as_ref()?;
        Some(Answer(AnswerKind::Joined(in_flight.refresh.clone())))
    }

    /// The snapshot if it is fresh for `max_age`, or else the refresh under way, or else a
    /// refresh that `fetch` makes.
    pub fn get<F, Fut>(&self, max_age: Duration, fetch: F) -> Answer<T, E>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
    {
        let mut inner = self.inner.lock();
        match inner
            .current
            .as_ref()
            .filter(|s| inner.outdated.is_none() && s.age() < max_age)
        {
            Some(snapshot) => Answer(AnswerKind::Fresh(snapshot.clone())),
            None => self.join_or_launch(&mut inner, fetch),
        }
    }

    /// The refresh under way, or a refresh that `fetch` makes, whatever the snapshot's age.
    pub fn refresh<F, Fut>(&self, fetch: F) -> Answer<T, E>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
    {
        self.join_or_launch(&mut self.inner.lock(), fetch)
    }

    /// A refresh that `fetch` makes starting now, even while another one is under way (which
    /// it then replaces for later callers).
    pub fn reload<F, Fut>(&self, fetch: F) -> Answer<T, E>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
    {
        self.launch(&mut self.inner.lock(), fetch)
    }

    fn join_or_launch<F, Fut>(&self, inner: &mut Inner<T, E>, fetch: F) -> Answer<T, E>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
    {
        match &inner.in_flight {
            Some(in_flight) => Answer(AnswerKind::Joined(in_flight.refresh.clone())),
            None => self.launch(inner, fetch),
        }
    }

    fn launch<F, Fut>(&self, inner: &mut Inner<T, E>, fetch: F) -> Answer<T, E>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
    {
        inner.launched += 1;
        let id = inner.launched;
        // Weak: the refresh is kept in the cache, and must not keep the cache alive.
        let cache: Weak<Mutex<Inner<T, E>>> = Arc::downgrade(&self.inner);
        let deadline = self.deadline;
        let refresh = async move {
            // Started when first polled: that is when its request goes out.
            let start = match cache.upgrade() {
                Some(cache) => cache.lock().moment(),
                None => Moment {
                    seq: 0,
                    at: Instant::now(),
                },
            };
            let fetched = match deadline {
                Some(Deadline { limit, error }) => tokio::time::timeout(limit, fetch())
                    .await
                    .unwrap_or_else(|_| Err(error(limit))),
                None => fetch().await,
            };
            let result = fetched.map(|value| Snapshot {
                at: start.at,
                seq: start.seq,
                value: Arc::new(value),
            });
            if let Some(cache) = cache.upgrade() {
                cache.lock().finish(id, start, result.as_ref().ok());
            }
            result
        }
        .boxed()
        .shared();
        inner.in_flight = Some(InFlight {
            id,
            refresh: refresh.clone(),
        });
        Answer(AnswerKind::Started(refresh))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    const MAX_AGE: Duration = Duration::from_secs(10);

    /// A source whose every read takes `took` and returns the number of reads so far (or an
    /// error while `failing` is set), counting the reads.
    #[derive(Clone, Default)]
    struct Source {
        reads: Arc<AtomicUsize>,
        failing: Arc<std::sync::atomic::AtomicBool>,
    }

    impl Source {
        fn read(
            &self,
            took: Duration,
        ) -> impl FnOnce() -> BoxFuture<'static, Result<usize, String>> + Send + 'static {
            let source = self.clone();
            move || {
                async move {
                    let n = source.reads.fetch_add(1, Ordering::SeqCst) + 1;
                    tokio::time::sleep(took).await;
                    if source.failing.load(Ordering::SeqCst) {
                        Err(format!("read {n} failed"))
                    } else {
                        Ok(n)
                    }
                }
                .boxed()
            }
        }

        fn reads(&self) -> usize {
            self.reads.load(Ordering::SeqCst)
        }

        fn fail(&self, failing: bool) {
            self.failing.store(failing, Ordering::SeqCst);
        }
    }

    /// A cache with one snapshot (read 1 of its source), and its source.
    async fn filled() -> (SnapshotCache<usize, String>, Source) {
        let cache = SnapshotCache::default();
        let source = Source::default();
        let first = cache.get(MAX_AGE, source.read(Duration::ZERO)).await;
        assert_eq!(first.map(|s| *s), Ok(1));
        (cache, source)
    }

    #[tokio::test(start_paused = true)]
    async fn concurrent_callers_share_one_refresh() {
        let cache = SnapshotCache::<usize, String>::default();
        let source = Source::default();
        let answers: Vec<_> = (0..20)
            .map(|_| cache.get(MAX_AGE, source.read(Duration::from_secs(1))))
            .collect();
        assert_eq!(answers.iter().filter(|a| a.started()).count(), 1);
        let snapshots =
            futures::future::join_all(answers.into_iter().map(IntoFuture::into_future)).await;
        assert_eq!(source.reads(), 1);
        for snapshot in snapshots {
            let snapshot = snapshot.unwrap();
            assert_eq!(*snapshot, 1);
        }
        // Fresh until the max age, counted from the refresh's start.
        tokio::time::advance(MAX_AGE - Duration::from_secs(1) - Duration::from_millis(1)).await;
        let fresh = cache.get(MAX_AGE, source.read(Duration::from_secs(1)));
        assert!(!fresh.started());
        assert_eq!(*fresh.await.unwrap(), 1);
        tokio::time::advance(Duration::from_millis(1)).await;
        let again = cache.get(MAX_AGE, source.read(Duration::from_secs(1)));
        assert!(again.started());
        assert_eq!(*again.await.unwrap(), 2);
        // A caller that accepts less joins the refresh (and so does one that forces it).
        assert!(
            cache
                .get(Duration::ZERO, source.read(Duration::ZERO))
                .started()
        );
        assert!(!cache.refresh(source.read(Duration::ZERO)).started());
        assert!(cache.is_refreshing());
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_refresh_is_every_waiters_error_and_keeps_the_last_good_snapshot() {
        let (cache, source) = filled().await;
        tokio::time::advance(MAX_AGE).await;
        source.fail(true);
        let waiters = (0..5).map(|_| {
            cache
                .get(MAX_AGE, source.read(Duration::from_secs(1)))
                .into_future()
        });
        for result in futures::future::join_all(waiters).await {
            assert_eq!(result.unwrap_err(), "read 2 failed");
        }
        assert_eq!(source.reads(), 2);
        assert!(!cache.is_refreshing());
        // Not fresh, but there for stale answers, with its age.
        assert!(cache.fresh(MAX_AGE).is_none());
        let stale = cache.latest().unwrap();
        assert_eq!((*stale, stale.age()), (1, MAX_AGE + Duration::from_secs(1)));
        // The next call tries again.
        source.fail(false);
        assert_eq!(
            *cache
                .get(MAX_AGE, source.read(Duration::ZERO))
                .await
                .unwrap(),
            3
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_refresh_past_its_deadline_fails_and_the_next_call_starts_another() {
        let cache =
            SnapshotCache::<usize, String>::with_deadline(Duration::from_secs(5), |limit| {
                format!("no answer within {limit:?}")
            });
        let source = Source::default();
        let slow = cache.get(MAX_AGE, source.read(Duration::from_secs(6)));
        let joined = cache.get(MAX_AGE, source.read(Duration::from_secs(6)));
        let started = Instant::now();
        let (slow, joined) = futures::join!(slow.into_future(), joined.into_future());
        assert_eq!(started.elapsed(), Duration::from_secs(5));
        assert_eq!(slow.unwrap_err(), "no answer within 5s");
        assert_eq!(joined.unwrap_err(), "no answer within 5s");
        assert!(cache.latest().is_none() && !cache.is_refreshing());
        let quick = cache.get(MAX_AGE, source.read(Duration::from_secs(4)));
        assert!(quick.started());
        assert_eq!(*quick.await.unwrap(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn an_outdated_mark_survives_a_refresh_that_started_before_it() {
        let (cache, source) = filled().await;
        // A refresh starts (its request goes out when first polled), then a check sees a
        // change and marks the snapshot outdated.
        let mut older = Box::pin(
            cache
                .refresh(source.read(Duration::from_secs(2)))
                .into_future(),
        );
        assert!(futures::poll!(older.as_mut()).is_pending());
        tokio::time::advance(Duration::from_secs(1)).await;
        let moment = cache.moment();
        cache.mark_outdated(moment);
        assert_eq!(cache.outdated_since(), Some(moment.at));
        assert!(cache.fresh(MAX_AGE).is_none());
        assert_eq!(*older.await.unwrap(), 2);
        // Newer, but still outdated: stale answers only.
        assert!(cache.fresh(MAX_AGE).is_none());
        assert_eq!(cache.latest().map(|s| *s), Some(2));
        assert_eq!(cache.outdated_since(), Some(moment.at));
        // A refresh that starts after the moment clears it, even at the same instant.
        let newer = cache.get(MAX_AGE, source.read(Duration::ZERO));
        assert!(newer.started());
        assert_eq!(*newer.await.unwrap(), 3);
        assert_eq!(cache.fresh(MAX_AGE).map(|s| *s), Some(3));
        assert_eq!(cache.outdated_since(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_refresh_that_started_after_the_moment_clears_a_later_mark() {
        let cache = SnapshotCache::<usize, String>::default();
        let source = Source::default();
        // The check takes its moment, a refresh starts, then the check marks.
        let moment = cache.moment();
        let mut refresh = Box::pin(
            cache
                .get(MAX_AGE, source.read(Duration::from_secs(1)))
                .into_future(),
        );
        assert!(futures::poll!(refresh.as_mut()).is_pending());
        cache.mark_outdated(moment);
        assert_eq!(*refresh.await.unwrap(), 1);
        assert_eq!(cache.fresh(MAX_AGE).map(|s| *s), Some(1));
    }

    #[tokio::test(start_paused = true)]
    async fn a_check_can_wait_for_the_refresh_under_way_and_an_older_mark_changes_nothing() {
        let (cache, source) = filled().await;
        assert!(cache.under_way().is_none());
        tokio::time::advance(MAX_AGE).await;
        // A refresh starts, then a check takes its moment and finds the refresh under way.
        let mut refresh = Box::pin(
            cache
                .get(MAX_AGE, source.read(Duration::from_secs(1)))
                .into_future(),
        );
        assert!(futures::poll!(refresh.as_mut()).is_pending());
        let during = cache.moment();
        let joined = cache.under_way().unwrap();
        assert!(!joined.started());
        assert_eq!(*joined.await.unwrap(), 2);
        assert_eq!(*refresh.await.unwrap(), 2);
        assert_eq!(source.reads(), 2);
        assert!(cache.under_way().is_none());
        // That refresh started before the check's moment: a mark as of it still holds.
        cache.mark_outdated(during);
        assert!(cache.fresh(MAX_AGE).is_none());
        // A check that took its moment before a refresh that has landed since: its mark
        // changes nothing, the snapshot is newer than what the check saw.
        let before = cache.moment();
        assert_eq!(
            *cache.refresh(source.read(Duration::ZERO)).await.unwrap(),
            3
        );
        cache.mark_outdated(before);
        assert_eq!(cache.fresh(MAX_AGE).map(|s| *s), Some(3));
        assert_eq!(cache.outdated_since(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn the_newest_refresh_wins_and_own_writes_keep_the_age() {
        let cache = SnapshotCache::<Vec<usize>, String>::default();
        let reads = Arc::new(AtomicUsize::new(0));
        let read = |took: Duration| {
            let reads = reads.clone();
            move || async move {
                let n = reads.fetch_add(1, Ordering::SeqCst) + 1;
                tokio::time::sleep(took).await;
                Ok::<_, String>(vec![n])
            }
        };
        let slow = cache.get(MAX_AGE, read(Duration::from_secs(3)));
        let mut slow = Box::pin(slow.into_future());
        assert!(futures::poll!(slow.as_mut()).is_pending());
        tokio::time::advance(Duration::from_secs(1)).await;
        // A caller that needs a read made from now on does not join the slow one.
        let reloaded = cache.reload(read(Duration::from_secs(1)));
        assert!(reloaded.started());
        assert_eq!(*reloaded.await.unwrap(), vec![2]);
        // Later callers join the newest refresh; the slow one lands last but does not win.
        assert_eq!(*slow.await.unwrap(), vec![1]);
        let current = cache.latest().unwrap();
        assert_eq!(*current, vec![2]);
        // An own write amends the snapshot in place, keeping its age.
        tokio::time::advance(Duration::from_secs(2)).await;
        cache.modify(|v| v.push(99));
        let amended = cache.fresh(MAX_AGE).unwrap();
        assert_eq!((amended.to_vec(), amended.at), (vec![2, 99], current.at));
        // Forgotten: the next call refreshes.
        cache.forget();
        assert!(cache.latest().is_none());
        let next = cache.get(MAX_AGE, read(Duration::ZERO));
        assert!(next.started());
        assert_eq!(*next.await.unwrap(), vec![3]);
    }
}
