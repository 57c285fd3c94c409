//! Decision counters: the fixed array a scheduler bumps, one slot per decision branch, and
//! `declare_counters!`, which declares each counter once (its index constant and its name
//! from one list), so that the two cannot drift apart.
//!
//! The names and their order are part of the output (the summary lists a scheduler's
//! counters in this order), so a list is only ever appended to.

/// A scheduler's counters: `names[i]` is the name of `values[i]`.
#[derive(Clone, Debug)]
pub struct Counters<const N: usize> {
    pub names: [&'static str; N],
    pub values: [u64; N],
}

impl<const N: usize> Counters<N> {
    pub const fn new(names: [&'static str; N]) -> Self {
        Counters {
            names,
            values: [0; N],
        }
    }
    #[inline]
    pub fn bump(&mut self, i: usize) {
        self.values[i] += 1;
    }
    pub fn list(&self) -> Vec<(&'static str, u64)> {
        self.names
            .iter()
            .copied()
            .zip(self.values.iter().copied())
            .collect()
    }
}

/// Declares a scheduler's counters in output order, each as `INDEX => "name"`. Generates
/// one `usize` constant per counter (its index), `NCOUNTERS`, and `COUNTER_NAMES` (the
/// names in the same order), for `Counters::<NCOUNTERS>::new(COUNTER_NAMES)`. An optional
/// visibility first (`pub(super)`) applies to every generated constant. Once per module.
///
/// ```ignore
/// declare_counters! {
///     WAKE_IDLE => "wake_on_idle_cpu",
///     WAKE_QUEUED => "wake_queued",
/// }
/// ```
macro_rules! declare_counters {
    ($vis:vis $($index:ident => $name:literal),+ $(,)?) => {
        /// Counter positions, in declaration order (only their discriminants are used).
        #[allow(non_camel_case_types, clippy::upper_case_acronyms)]
        enum CounterIndex {
            $($index,)+
        }
        $(
            $vis const $index: usize = CounterIndex::$index as usize;
        )+
        $vis const NCOUNTERS: usize = [$($name),+].len();
        $vis const COUNTER_NAMES: [&str; NCOUNTERS] = [$($name),+];
    };
}
pub(crate) use declare_counters;

#[cfg(test)]
mod tests {
    mod declared {
        crate::sched::counters::declare_counters! {
            pub(super) FIRST => "first_counter",
            SECOND => "second_counter",
            THIRD => "third_counter",
        }
    }

    /// Indices count from 0 in declaration order, and the names come in the same order.
    #[test]
    fn declared_counters_pair_each_index_with_its_name() {
        use declared::*;
        assert_eq!([FIRST, SECOND, THIRD], [0, 1, 2]);
        assert_eq!(NCOUNTERS, 3);
        assert_eq!(
            COUNTER_NAMES,
            ["first_counter", "second_counter", "third_counter"]
        );
        let mut c = super::Counters::new(COUNTER_NAMES);
        c.bump(SECOND);
        c.bump(SECOND);
        c.bump(THIRD);
        assert_eq!(
            c.list(),
            vec![
                ("first_counter", 0),
                ("second_counter", 2),
                ("third_counter", 1)
            ]
        );
    }
}
