//! Label values held once for the whole process, by a small number.
//!
//! A broker series is labelled by cluster, data type, method and code: on a hub with 10,000
//! clusters the same data type is a label of tens of thousands of series and each cluster's name
//! of a dozen. A series keeps the numbers of its values here instead of copies of them. Each value
//! counts the label sets that hold it; one no set holds any more (its cluster left, its series
//! were forgotten) is forgotten too, and its number given to the next new value.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use parking_lot::{RwLock, RwLockReadGuard};

/// Every label value in use, its number and how many label sets hold it.
#[derive(Default)]
pub struct LabelValues {
    numbers: HashMap<Arc<str>, u32>,
    /// By number: the value and its holders; `None`, a number free for the next value.
    values: Vec<Option<(Arc<str>, u32)>>,
    free: Vec<u32>,
}

static VALUES: LazyLock<RwLock<LabelValues>> = LazyLock::new(RwLock::default);

impl LabelValues {
    /// The values, to look numbers up in while the guard lives.
    pub fn read() -> RwLockReadGuard<'static, LabelValues> {
        VALUES.read()
    }

    /// The number of `value`, for a label set about to hold it: counted as one more holder
    /// (give it back with [`LabelValues::release`] when the set goes, or is not kept).
    pub fn hold(value: &str) -> u32 {
        let mut all = VALUES.write();
        if let Some(&n) = all.numbers.get(value) {
            if let Some((_, holders)) = &mut all.values[n as usize] {
                *holders += 1;
            }
            return n;
        }
        let value: Arc<str> = Arc::from(value);
        let n = match all.free.pop() {
            Some(n) => {
                all.values[n as usize] = Some((Arc::clone(&value), 1));
                n
            }
            None => {
                let n = u32::try_from(all.values.len()).expect("fewer than 2^32 label values");
                all.values.push(Some((Arc::clone(&value), 1)));
                n
            }
        };
        all.numbers.insert(value, n);
        n
    }

    /// A label set holding `numbers` went: each value it held has one holder less, and one that
    /// no set holds any more is forgotten.
    pub fn release(numbers: &[u32]) {
        let mut all = VALUES.write();
        for &n in numbers {
            let Some(Some((value, holders))) = all.values.get_mut(n as usize) else {
                continue;
            };
            *holders -= 1;
            if *holders == 0 {
                let value = Arc::clone(value);
                all.numbers.remove(&value);
                all.values[n as usize] = None;
                all.free.push(n);
            }
        }
    }

    /// The number of `value`, if a label set holds it.
    #[cfg(test)]
    pub fn find(&self, value: &str) -> Option<u32> {
        self.numbers.get(value).copied()
    }

    /// The value numbered `n` (given by [`LabelValues::hold`]); `""` once it is forgotten.
    pub fn value(&self, n: u32) -> &str {
        match self.values.get(n as usize) {
            Some(Some((value, _))) => value,
            _ => "",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_keeps_its_number_while_held_and_is_forgotten_after() {
        let a = LabelValues::hold("label-values-test-a");
        let b = LabelValues::hold("label-values-test-b");
        assert_ne!(a, b);
        assert_eq!(LabelValues::hold("label-values-test-a"), a);
        {
            let values = LabelValues::read();
            assert_eq!(values.value(a), "label-values-test-a");
            assert_eq!(values.value(b), "label-values-test-b");
        }
        LabelValues::release(&[a]);
        assert_eq!(
            LabelValues::read().find("label-values-test-a"),
            Some(a),
            "one holder left"
        );
        LabelValues::release(&[a, b]);
        let values = LabelValues::read();
        assert_eq!(values.find("label-values-test-a"), None);
        assert_eq!(values.find("label-values-test-b"), None);
    }
}
