//! Label values held once for the whole process, by a small number.
//!
//! A broker series is labelled by cluster, data type, method and code: on a hub with 10,000
//! clusters the same data type is a label of tens of thousands of series and each cluster's name
//! of a dozen. A series keeps the numbers of its values here instead of copies of them. Values are
//! never forgotten, as the series that name them are never removed.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use parking_lot::{RwLock, RwLockReadGuard};

/// Every label value seen, and its number.
#[derive(Default)]
pub struct LabelValues {
    numbers: HashMap<Arc<str>, u32>,
    values: Vec<Arc<str>>,
}

static VALUES: LazyLock<RwLock<LabelValues>> = LazyLock::new(RwLock::default);

impl LabelValues {
    /// The values, to look numbers up in while the guard lives.
    pub fn read() -> RwLockReadGuard<'static, LabelValues> {
        VALUES.read()
    }

    /// The number of `value`, given it at its first use.
    pub fn number(value: &str) -> u32 {
        if let Some(n) = VALUES.read().numbers.get(value) {
            return *n;
        }
        let mut all = VALUES.write();
        if let Some(n) = all.numbers.get(value) {
            return *n;
        }
        let n = u32::try_from(all.values.len()).expect("fewer than 2^32 label values");
        let value: Arc<str> = Arc::from(value);
        all.values.push(Arc::clone(&value));
        all.numbers.insert(value, n);
        n
    }

    /// The value numbered `n` (given by [`LabelValues::number`]).
    pub fn value(&self, n: u32) -> &str {
        &self.values[n as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_keeps_its_number() {
        let a = LabelValues::number("label-values-test-a");
        let b = LabelValues::number("label-values-test-b");
        assert_ne!(a, b);
        assert_eq!(LabelValues::number("label-values-test-a"), a);
        let values = LabelValues::read();
        assert_eq!(values.value(a), "label-values-test-a");
        assert_eq!(values.value(b), "label-values-test-b");
    }
}
