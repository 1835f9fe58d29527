//! Paginated lists: one page, or all pages by following `meta.pagination.next_page`.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::error::{DecodeError, Error};
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

/// Decodes a list answer whose entries are under `key` (e.g. `servers`).
pub(crate) fn decode_page<T: DeserializeOwned>(
    path: &str,
    key: &str,
    status: u16,
    body: &[u8],
) -> Result<Page<T>, Error> {
    let decode_err = |source: serde_json::Error| {
        Error::Decode(DecodeError {
            method: "GET".to_owned(),
            path: path.to_owned(),
            status,
            source,
        })
    };
    let mut map: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(body).map_err(decode_err)?;
    // A list answer without its list is not an empty list: reading it as one could make a
    // caller conclude that something does not exist.
    let items = match map.remove(key) {
        Some(serde_json::Value::Null) | None => {
            return Err(decode_err(<serde_json::Error as serde::de::Error>::custom(
                format!("the answer has no `{key}` list"),
            )));
        }
        Some(value) => serde_json::from_value(value).map_err(decode_err)?,
    };
    let meta = match map.remove("meta") {
        Some(serde_json::Value::Null) | None => None,
        Some(value) => Some(serde_json::from_value(value).map_err(decode_err)?),
    };
    Ok(Page { items, meta })
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
    let base: Query = query
        .iter()
        .filter(|(k, _)| *k != "page" && *k != "per_page")
        .cloned()
        .collect();
    let mut all = Vec::new();
    let mut page_number: u32 = 1;
    for _ in 0..MAX_PAGES {
        let mut q = base.clone();
        q.push(("page", page_number.to_string()));
        q.push(("per_page", ALL_PAGES_PER_PAGE.to_string()));
        let page: Page<T> = get_page(transport, path, key, &q).await?;
        let next = page.next_page();
        all.extend(page.items);
        match next {
            Some(next) if next > page_number => page_number = next,
            _ => break,
        }
    }
    Ok(all)
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
