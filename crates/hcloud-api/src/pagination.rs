//! Paginated lists: one page, or all pages by following `meta.pagination.next_page`.

use std::marker::PhantomData;

use serde::de::{self, DeserializeOwned, DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::transport::{Query, Transport};

/// Page size used when fetching all pages (the API's maximum).
pub const ALL_PAGES_PER_PAGE: u32 = 50;

/// Upper bound on pages fetched by one `list_all`, against a misbehaving server.
const MAX_PAGES: u32 = 10_000;

/// `meta` of a list answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListMeta {
    /// Pagination state.
    #[serde(default)]
    pub pagination: Option<Pagination>,
}

/// `meta.pagination` of a list answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pagination {
    /// Current page (1-based).
    #[serde(default)]
    pub page: u32,
    /// Entries per page.
    #[serde(default)]
    pub per_page: u32,
    /// Previous page, if any.
    #[serde(default)]
    pub previous_page: Option<u32>,
    /// Next page, if any.
    #[serde(default)]
    pub next_page: Option<u32>,
    /// Last page, if known.
    #[serde(default)]
    pub last_page: Option<u32>,
    /// Total number of entries, if known.
    #[serde(default)]
    pub total_entries: Option<u64>,
}

/// One page of a list.
#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    /// Entries on this page.
    pub items: Vec<T>,
    /// Pagination metadata, if the API sent it.
    pub meta: Option<ListMeta>,
}

impl<T> Page<T> {
    /// The pagination block, if any.
    pub fn pagination(&self) -> Option<&Pagination> {
        self.meta.as_ref().and_then(|m| m.pagination.as_ref())
    }

    /// Number of the next page, if there is one.
    pub fn next_page(&self) -> Option<u32> {
        self.pagination().and_then(|p| p.next_page)
    }
}

/// Decodes a list answer whose entries are under `key` (e.g. `servers`), straight into the
/// entries: the other fields are skipped unread, and no generic JSON tree of the page is built
/// (for a page of 50 servers that tree is larger than the servers themselves).
pub(crate) fn decode_page<T: DeserializeOwned>(
    path: &str,
    key: &str,
    status: u16,
    body: &[u8],
) -> Result<Page<T>, Error> {
    let decode_err = |source| Error::decode("GET", path, status, source);
    let mut json = serde_json::Deserializer::from_slice(body);
    let (items, meta) = PageSeed::<T> {
        key,
        items: PhantomData,
    }
    .deserialize(&mut json)
    .and_then(|page| json.end().map(|()| page))
    .map_err(decode_err)?;
    // A list answer without its list is not an empty list: reading it as one could make a
    // caller conclude that something does not exist.
    let Some(items) = items else {
        return Err(decode_err(<serde_json::Error as de::Error>::custom(
            format!("the answer has no `{key}` list"),
        )));
    };
    Ok(Page { items, meta })
}

/// Reads a list answer's object: the entries under `key` and `meta`, both `None` when absent
/// or `null`.
struct PageSeed<'k, T> {
    key: &'k str,
    items: PhantomData<T>,
}

type PageParts<T> = (Option<Vec<T>>, Option<ListMeta>);

impl<'de, T: Deserialize<'de>> DeserializeSeed<'de> for PageSeed<'_, T> {
    type Value = PageParts<T>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de, T: Deserialize<'de>> Visitor<'de> for PageSeed<'_, T> {
    type Value = PageParts<T>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "an object with a `{}` list", self.key)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let (mut items, mut meta) = (None, None);
        while let Some(field) = map.next_key::<String>()? {
            if field == self.key {
                items = map.next_value::<Option<Vec<T>>>()?;
            } else if field == "meta" {
                meta = map.next_value::<Option<ListMeta>>()?;
            } else {
                map.next_value::<de::IgnoredAny>()?;
            }
        }
        Ok((items, meta))
    }
}

/// Fetches one page.
pub(crate) async fn get_page<T: DeserializeOwned>(
    transport: &Transport,
    path: &str,
    key: &str,
    query: &Query,
) -> Result<Page<T>, Error> {
    let (status, body) = transport
        .send(reqwest::Method::GET, path, query, None)
        .await?;
    decode_page(path, key, status, &body)
}

/// Fetches every page (50 entries each) and concatenates them. Any `page`/`per_page` in
/// `query` is replaced.
pub(crate) async fn get_all<T: DeserializeOwned>(
    transport: &Transport,
    path: &str,
    key: &str,
    query: &Query,
) -> Result<Vec<T>, Error> {
    get_all_map(transport, path, key, query, |item| item).await
}

/// How often a listing of several pages is made again when its pages disagree about the total
/// (see [`get_all_map`]).
const CONSISTENCY_ATTEMPTS: usize = 3;

/// Like [`get_all`], passing each entry through `map` as its page arrives: only one page of
/// full entries is in memory at a time.
///
/// The API pages by page number over an ordered list. When an entry on an earlier page is
/// deleted (or one is added) between two page requests, the later entries shift by one, so a
/// listing can skip an entry that existed the whole time. A caller that concludes "absent"
/// from a listing would then act on something that still exists. A listing of several pages
/// is therefore accepted only when every page names the same `total_entries` and that many
/// entries arrived; otherwise it is made again, up to [`CONSISTENCY_ATTEMPTS`] times in all.
/// When the pages still disagree, the last attempt is returned with a warning in the log:
/// the project changes faster than it can be listed, and the caller's own rules for
/// listings (never delete on absence alone) must hold.
pub(crate) async fn get_all_map<T: DeserializeOwned, U>(
    transport: &Transport,
    path: &str,
    key: &str,
    query: &Query,
    mut map: impl FnMut(T) -> U + Send,
) -> Result<Vec<U>, Error> {
    let base: Query = query
        .iter()
        .filter(|(k, _)| *k != "page" && *k != "per_page")
        .cloned()
        .collect();
    let mut attempt = 1;
    loop {
        let listing = list_pages(transport, path, key, &base, &mut map).await?;
        if listing.consistent || attempt >= CONSISTENCY_ATTEMPTS {
            if !listing.consistent {
                tracing::warn!(
                    path,
                    attempts = attempt,
                    "the pages of a listing disagreed about the number of entries on every attempt; using the last one"
                );
            }
            return Ok(listing.items);
        }
        tracing::debug!(
            path,
            attempt,
            "the pages of a listing disagreed about the number of entries; listing again"
        );
        attempt += 1;
    }
}

/// The entries of one pass over every page, and whether the pass is known to have seen every
/// entry (one page, or pages that agree about a total that arrived in full).
struct Pass<U> {
    items: Vec<U>,
    consistent: bool,
}

async fn list_pages<T: DeserializeOwned, U>(
    transport: &Transport,
    path: &str,
    key: &str,
    base: &Query,
    map: &mut (impl FnMut(T) -> U + Send),
) -> Result<Pass<U>, Error> {
    let mut items = Vec::new();
    let mut page_number: u32 = 1;
    let mut pages = 0usize;
    // `None` before the first page; `Some(None)` once a page came without a total.
    let mut total: Option<Option<u64>> = None;
    let mut agree = true;
    for _ in 0..MAX_PAGES {
        let mut q = base.clone();
        q.push(("page", page_number.to_string()));
        q.push(("per_page", ALL_PAGES_PER_PAGE.to_string()));
        let page: Page<T> = get_page(transport, path, key, &q).await?;
        pages += 1;
        let this_total = page.pagination().and_then(|p| p.total_entries);
        match total {
            None => total = Some(this_total),
            Some(seen) => agree &= seen == this_total,
        }
        let next = page.next_page();
        items.extend(page.items.into_iter().map(&mut *map));
        match next {
            Some(next) if next > page_number => page_number = next,
            _ => break,
        }
    }
    let complete = match total.flatten() {
        Some(total) => u64::try_from(items.len()).is_ok_and(|n| n == total),
        // Without a total nothing can be checked; one page cannot have shifted anyway.
        None => true,
    };
    Ok(Pass {
        consistent: pages <= 1 || (agree && complete),
        items,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_page_with_and_without_meta() {
        let body = br#"{"servers":[{"id":1},{"id":2}],"meta":{"pagination":{"page":1,"per_page":2,"previous_page":null,"next_page":2,"last_page":3,"total_entries":5}}}"#;
        #[derive(Deserialize)]
        struct Item {
            id: i64,
        }
        let page: Page<Item> = decode_page("/servers", "servers", 200, body).expect("page");
        assert_eq!(
            page.items.iter().map(|i| i.id).collect::<Vec<_>>(),
            vec![1, 2]
        );
        assert_eq!(page.next_page(), Some(2));
        assert_eq!(page.pagination().and_then(|p| p.total_entries), Some(5));

        let bare: Page<Item> =
            decode_page("/servers", "servers", 200, br#"{"servers":[]}"#).expect("bare");
        assert!(bare.items.is_empty());
        assert_eq!(bare.next_page(), None);

        let wrong = decode_page::<Item>("/servers", "servers", 200, br#"{"servers":{}}"#);
        assert!(matches!(wrong, Err(Error::Decode(_))));
    }

    #[test]
    fn an_answer_without_its_list_is_an_error_not_an_empty_list() {
        #[derive(Debug, Deserialize)]
        struct Item {}
        for body in [&br#"{}"#[..], br#"{"servers":null}"#, br#"{"networks":[]}"#] {
            let result = decode_page::<Item>("/servers", "servers", 200, body);
            assert!(matches!(result, Err(Error::Decode(_))), "{body:?}");
        }
    }
}
