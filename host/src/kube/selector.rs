//! Label selectors as the API server reads them (`a=b`, `a==b`, `a!=b`, `a in (x,y)`,
//! `a notin (x,y)`, `a`, `!a`, comma-separated, all must hold), so that lists can be answered from a
//! watch's cache exactly as the API server would answer them.

use std::collections::BTreeMap;

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

/// A parsed label selector; empty selects everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector(Vec<Requirement>);

/// A selector the API server would refuse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid label selector {selector:?}: {reason}")]
pub struct SelectorError {
    selector: String,
    reason: String,
}

/// Splits at commas outside parentheses.
fn requirements(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

fn values(list: &str) -> Option<Vec<String>> {
    let inner = list.trim().strip_prefix('(')?.strip_suffix(')')?;
    Some(
        inner
            .split(',')
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
            .collect(),
    )
}

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

impl LabelSelector {
    pub fn parse(selector: &str) -> Result<Self, SelectorError> {
        let fail = |reason: &str| SelectorError {
            selector: selector.to_owned(),
            reason: reason.to_owned(),
        };
        let mut out = Vec::new();
        if selector.trim().is_empty() {
            return Ok(Self(out));
        }
        for req in requirements(selector) {
            let req = req.trim();
            let parsed = if let Some(key) = req.strip_prefix('!') {
                Requirement::DoesNotExist(key.trim().to_owned())
            } else if let Some((k, v)) = req.split_once("!=") {
                Requirement::NotEquals(k.trim().to_owned(), v.trim().to_owned())
            } else if let Some((k, v)) = req.split_once("==").or_else(|| req.split_once('=')) {
                Requirement::Equals(k.trim().to_owned(), v.trim().to_owned())
            } else if let Some((k, list)) = req.split_once(" notin ") {
                Requirement::NotIn(
                    k.trim().to_owned(),
                    values(list).ok_or_else(|| fail("notin needs (values)"))?,
                )
            } else if let Some((k, list)) = req.split_once(" in ") {
                Requirement::In(
                    k.trim().to_owned(),
                    values(list).ok_or_else(|| fail("in needs (values)"))?,
                )
            } else {
                Requirement::Exists(req.to_owned())
            };
            let key = match &parsed {
                Requirement::Equals(k, _)
                | Requirement::NotEquals(k, _)
                | Requirement::In(k, _)
                | Requirement::NotIn(k, _)
                | Requirement::Exists(k)
                | Requirement::DoesNotExist(k) => k,
            };
            if !valid_key(key) {
                return Err(fail(&format!("invalid label key {key:?}")));
            }
            out.push(parsed);
        }
        Ok(Self(out))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether an object with `labels` is selected.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| match r {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|l| vs.contains(l)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|l| !vs.contains(l)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
        })
    }

    /// Whether every object this selector selects is also selected by `wider` (so a cache
    /// holding what `wider` selects has all of this selector's objects).
    pub fn narrows(&self, wider: &LabelSelector) -> bool {
        wider.0.iter().all(|w| {
            self.0.iter().any(|n| match (w, n) {
                _ if w == n => true,
                (Requirement::Exists(k), Requirement::Equals(nk, _) | Requirement::In(nk, _)) => k == nk,
                (Requirement::In(k, allowed), Requirement::Equals(nk, v)) => k == nk && allowed.contains(v),
                (Requirement::In(k, allowed), Requirement::In(nk, vs)) => {
                    k == nk && vs.iter().all(|v| allowed.contains(v))
                }
                _ => false,
            })
        })
    }
}

/// A field selector the cache can answer: equality on `metadata.name` and `metadata.namespace`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    pub name: Option<String>,
    pub namespace: Option<String>,
}

impl FieldSelector {
    /// `None` when the selector needs the API server (other fields or operators).
    pub fn parse_cacheable(selector: &str) -> Option<Self> {
        let mut out = Self::default();
        for req in selector.split(',').map(str::trim).filter(|r| !r.is_empty()) {
            let (k, v) = req.split_once("==").or_else(|| req.split_once('='))?;
            if k.ends_with('!') {
                return None;
            }
            match k.trim() {
                "metadata.name" => out.name = Some(v.trim().to_owned()),
                "metadata.namespace" => out.namespace = Some(v.trim().to_owned()),
                _ => return None,
            }
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn selectors_match_as_the_api_server_does() {
        let l = labels(&[
            ("app", "web"),
            ("tier", "front"),
            ("open-cluster-management.io/cluster-name", "c1"),
        ]);
        for (sel, want) in [
            ("", true),
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app=db", false),
            ("tier in (front, back)", true),
            ("tier notin (front)", false),
            ("missing notin (x)", true),
            ("open-cluster-management.io/cluster-name", true),
            ("!open-cluster-management.io/cluster-name", false),
            ("!missing,app=web", true),
            ("app=web,tier in (back)", false),
        ] {
            assert_eq!(LabelSelector::parse(sel).unwrap().matches(&l), want, "{sel}");
        }
        assert!(LabelSelector::parse("a in x").is_err());
        assert!(LabelSelector::parse("a b=c").is_err());
    }

    #[test]
    fn a_narrower_selector_is_served_by_a_wider_cache() {
        let p = |s: &str| LabelSelector::parse(s).unwrap();
        let cluster_label = "open-cluster-management.io/cluster-name";
        assert!(p(&format!("{cluster_label}=c1")).narrows(&p(cluster_label)));
        assert!(p("app=web").narrows(&p("")));
        assert!(p("a=x,b=y").narrows(&p("a=x")));
        assert!(p("a=x").narrows(&p("a in (x,y)")));
        assert!(!p("").narrows(&p(cluster_label)));
        assert!(!p("a=z").narrows(&p("a in (x,y)")));
        assert!(!p("b=y").narrows(&p("a=x")));
    }

    #[test]
    fn only_name_and_namespace_equality_is_answered_from_the_cache() {
        assert_eq!(
            FieldSelector::parse_cacheable("metadata.name=w1,metadata.namespace=c1"),
            Some(FieldSelector {
                name: Some("w1".into()),
                namespace: Some("c1".into())
            })
        );
        assert_eq!(FieldSelector::parse_cacheable("status.phase=Running"), None);
        assert_eq!(FieldSelector::parse_cacheable("metadata.name!=w1"), None);
    }
}
