//! Host topology: sockets x cores x SMT threads, NUMA nodes, CPU sets and distances.
//!
//! ## pCPU numbering
//! pCPU ids are numbered thread-fastest: the SMT siblings of a core are adjacent.
//! `cpu = (socket * cores_per_socket + core) * threads_per_core + thread`.
//! With 2 sockets x 2 cores x 2 threads: cpus 0,1 are core 0 of socket 0; 2,3 core 1 of
//! socket 0; 4..7 socket 1. (Linux often lists first threads first; Windows numbers logical
//! processors sibling-adjacent, as we do. An affinity such as `"0-1"` therefore names one core.)
//!
//! ## NUMA
//! `numa_nodes` either groups whole sockets (nodes divides sockets) or splits each socket
//! into equal groups of cores (sockets divides nodes, "sub-NUMA clustering").

use std::fmt;

/// Distance between the pCPU a thread last ran on and the one it runs on now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Distance {
    SameCpu = 0,
    SmtSibling = 1,
    SameSocket = 2,
    OtherSocket = 3,
    OtherNuma = 4,
}

impl Distance {
    pub const MIGRATIONS: [Distance; 4] = [
        Distance::SmtSibling,
        Distance::SameSocket,
        Distance::OtherSocket,
        Distance::OtherNuma,
    ];
    pub fn key(self) -> &'static str {
        match self {
            Distance::SameCpu => "same_cpu",
            Distance::SmtSibling => "smt_sibling",
            Distance::SameSocket => "same_socket",
            Distance::OtherSocket => "other_socket",
            Distance::OtherNuma => "other_numa",
        }
    }
}

#[derive(Clone, Debug)]
pub struct CpuInfo {
    pub socket: u32,
    pub core: u32, // global core index
    pub thread: u32,
    pub node: u32,
}

#[derive(Clone, Debug)]
pub struct Topology {
    pub sockets: u32,
    pub cores_per_socket: u32,
    pub threads_per_core: u32,
    pub numa_nodes: u32,
    pub cpus: Vec<CpuInfo>,
}

impl Topology {
    /// Builds the topology; the caller has validated that the shape is consistent.
    pub fn new(
        sockets: u32,
        cores_per_socket: u32,
        threads_per_core: u32,
        numa_nodes: u32,
    ) -> Topology {
        let mut cpus = Vec::new();
        let total_cores = sockets * cores_per_socket;
        for socket in 0..sockets {
            for c in 0..cores_per_socket {
                let core = socket * cores_per_socket + c;
                let node = if numa_nodes <= sockets {
                    socket / (sockets / numa_nodes)
                } else {
                    let per_socket = numa_nodes / sockets;
                    let cores_per_node = cores_per_socket / per_socket;
                    socket * per_socket + c / cores_per_node
                };
                for thread in 0..threads_per_core {
                    cpus.push(CpuInfo {
                        socket,
                        core,
                        thread,
                        node,
                    });
                }
            }
        }
        debug_assert_eq!(cpus.len() as u32, total_cores * threads_per_core);
        Topology {
            sockets,
            cores_per_socket,
            threads_per_core,
            numa_nodes,
            cpus,
        }
    }

    /// Checks the shape; returns a message naming the offending key.
    pub fn check_shape(
        sockets: u32,
        cores: u32,
        threads: u32,
        nodes: u32,
    ) -> Result<(), (String, String)> {
        let err = |k: &str, m: String| Err((k.to_string(), m));
        if sockets == 0 {
            return err("sockets", "must be at least 1".into());
        }
        if cores == 0 {
            return err("cores_per_socket", "must be at least 1".into());
        }
        if threads == 0 {
            return err("threads_per_core", "must be at least 1".into());
        }
        if nodes == 0 {
            return err("numa_nodes", "must be at least 1".into());
        }
        if nodes <= sockets {
            if !sockets.is_multiple_of(nodes) {
                return err(
                    "numa_nodes",
                    format!("{nodes} NUMA nodes do not divide {sockets} sockets evenly"),
                );
            }
        } else if !nodes.is_multiple_of(sockets) || !cores.is_multiple_of(nodes / sockets) {
            return err(
                "numa_nodes",
                format!("{nodes} NUMA nodes cannot split {sockets} sockets of {cores} cores into equal groups"),
            );
        }
        Ok(())
    }

    #[inline]
    pub fn ncpus(&self) -> usize {
        self.cpus.len()
    }

    pub fn ncores(&self) -> usize {
        (self.sockets * self.cores_per_socket) as usize
    }

    /// The pCPUs of a core, in id order.
    pub fn core_cpus(&self, core: u32) -> std::ops::Range<usize> {
        let t = self.threads_per_core as usize;
        let first = core as usize * t;
        first..first + t
    }

    /// The pCPUs of a socket, in id order.
    pub fn socket_cpus(&self, socket: u32) -> std::ops::Range<usize> {
        let per_socket = (self.cores_per_socket * self.threads_per_core) as usize;
        let first = socket as usize * per_socket;
        first..first + per_socket
    }

    pub fn distance(&self, a: usize, b: usize) -> Distance {
        if a == b {
            return Distance::SameCpu;
        }
        let (x, y) = (&self.cpus[a], &self.cpus[b]);
        if x.core == y.core {
            Distance::SmtSibling
        } else if x.node != y.node {
            Distance::OtherNuma
        } else if x.socket != y.socket {
            Distance::OtherSocket
        } else {
            Distance::SameSocket
        }
    }
}

/// The (word index, bit mask) pairs that cover ids `r` in a set of `nwords` words (a
/// core's or a socket's pCPUs are a contiguous range of ids).
fn range_masks(nwords: usize, r: std::ops::Range<usize>) -> impl Iterator<Item = (usize, u64)> {
    let end = r.end.min(nwords * 64);
    let mut lo = r.start;
    std::iter::from_fn(move || {
        if lo >= end {
            return None;
        }
        let wi = lo / 64;
        let hi = end.min((wi + 1) * 64);
        let width = hi - lo;
        let mask = if width == 64 {
            u64::MAX
        } else {
            ((1u64 << width) - 1) << (lo % 64)
        };
        lo = hi;
        Some((wi, mask))
    })
}

/// A set of pCPU ids (bitset). Deterministic iteration in increasing id order.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct CpuSet {
    words: Words,
}

/// Inline words for hosts of up to this many x 64 pCPUs: schedulers build and intersect
/// sets on every placement and balance, and a heap allocation each time was a seventh of
/// an FLMS run at 64 pCPUs. Larger hosts spill to the heap.
const INLINE_WORDS: usize = 4;

/// The bitset's words: a small vector of u64 with inline storage (no dependency for it).
#[derive(Clone)]
enum Words {
    Inline { len: u8, w: [u64; INLINE_WORDS] },
    Heap(Vec<u64>),
}

impl Words {
    fn zeroed(n: usize) -> Words {
        if n <= INLINE_WORDS {
            Words::Inline {
                len: n as u8,
                w: [0; INLINE_WORDS],
            }
        } else {
            Words::Heap(vec![0; n])
        }
    }
    fn resize(&mut self, n: usize) {
        match self {
            Words::Inline { len, w } if n <= INLINE_WORDS => {
                for x in &mut w[n.min(*len as usize)..n.max(*len as usize)] {
                    *x = 0;
                }
                *len = n as u8;
            }
            Words::Inline { len, w } => {
                let mut v = w[..*len as usize].to_vec();
                v.resize(n, 0);
                *self = Words::Heap(v);
            }
            Words::Heap(v) => v.resize(n, 0),
        }
    }
}

impl std::ops::Deref for Words {
    type Target = [u64];
    #[inline]
    fn deref(&self) -> &[u64] {
        match self {
            Words::Inline { len, w } => &w[..*len as usize],
            Words::Heap(v) => v,
        }
    }
}

impl std::ops::DerefMut for Words {
    #[inline]
    fn deref_mut(&mut self) -> &mut [u64] {
        match self {
            Words::Inline { len, w } => &mut w[..*len as usize],
            Words::Heap(v) => v,
        }
    }
}

impl PartialEq for Words {
    fn eq(&self, o: &Words) -> bool {
        **self == **o
    }
}
impl Eq for Words {}
impl std::hash::Hash for Words {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        (**self).hash(h)
    }
}

impl CpuSet {
    pub fn empty(ncpus: usize) -> CpuSet {
        CpuSet {
            words: Words::zeroed(ncpus.div_ceil(64).max(1)),
        }
    }
    /// pCPUs 0..ncpus. Word by word: every task of a 1024-pCPU host starts from one, and
    /// a bit at a time was 8% of a run with 8,192 vCPUs.
    pub fn full(ncpus: usize) -> CpuSet {
        let mut s = CpuSet::empty(ncpus);
        for (i, w) in s.words.iter_mut().enumerate() {
            let bits = ncpus.saturating_sub(i * 64).min(64);
            *w = if bits == 64 {
                u64::MAX
            } else {
                (1u64 << bits) - 1
            };
        }
        s
    }
    #[inline]
    pub fn insert(&mut self, cpu: usize) {
        let w = cpu / 64;
        if w >= self.words.len() {
            self.words.resize(w + 1);
        }
        self.words[w] |= 1 << (cpu % 64);
    }
    #[inline]
    pub fn remove(&mut self, cpu: usize) {
        if let Some(w) = self.words.get_mut(cpu / 64) {
            *w &= !(1 << (cpu % 64));
        }
    }
    #[inline]
    pub fn contains(&self, cpu: usize) -> bool {
        self.words
            .get(cpu / 64)
            .is_some_and(|w| w & (1 << (cpu % 64)) != 0)
    }
    pub fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }
    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|w| *w == 0)
    }
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(i, w)| {
            let mut w = *w;
            std::iter::from_fn(move || {
                if w == 0 {
                    None
                } else {
                    let b = w.trailing_zeros() as usize;
                    w &= w - 1;
                    Some(i * 64 + b)
                }
            })
        })
    }
    pub fn first(&self) -> Option<usize> {
        self.iter().next()
    }
    /// The smallest member greater than `after`, by word masks (no walk over the members
    /// below it: placement asks this once per idle pCPU it examines).
    pub fn next_after(&self, after: usize) -> Option<usize> {
        let start = after.checked_add(1)?;
        let (mut wi, bit) = (start / 64, start % 64);
        if wi >= self.words.len() {
            return None;
        }
        let mut w = self.words[wi] & (u64::MAX << bit);
        loop {
            if w != 0 {
                return Some(wi * 64 + w.trailing_zeros() as usize);
            }
            wi += 1;
            if wi >= self.words.len() {
                return None;
            }
            w = self.words[wi];
        }
    }
    /// The `n`-th member in id order, wrapping around.
    pub fn nth_wrapping(&self, n: usize) -> Option<usize> {
        let len = self.len();
        if len == 0 {
            return None;
        }
        // Whole words by their counts, then bits within one: every task's home pCPU
        // comes from here at setup, and a walk over the members was 6% of a short run
        // with 8,192 vCPUs on 1,024 pCPUs.
        let mut left = n % len;
        for (i, &w) in self.words.iter().enumerate() {
            let ones = w.count_ones() as usize;
            if left < ones {
                let mut w = w;
                for _ in 0..left {
                    w &= w - 1;
                }
                return Some(i * 64 + w.trailing_zeros() as usize);
            }
            left -= ones;
        }
        unreachable!("n % len is below the member count")
    }
    pub fn intersect(&self, other: &CpuSet) -> CpuSet {
        // Inline words past `len` are zero, so a fixed-width AND is exact (the common
        // case, on every placement and balance).
        if let (Words::Inline { len: a, w: x }, Words::Inline { len: b, w: y }) =
            (&self.words, &other.words)
        {
            let mut w = [0u64; INLINE_WORDS];
            for i in 0..INLINE_WORDS {
                w[i] = x[i] & y[i];
            }
            return CpuSet {
                words: Words::Inline {
                    len: (*a).min(*b),
                    w,
                },
            };
        }
        let mut out = self.clone();
        let n = self.words.len().min(other.words.len());
        if n < self.words.len() {
            out.words.resize(n);
        }
        for (x, o) in out.words.iter_mut().zip(other.words.iter()) {
            *x &= *o;
        }
        out
    }
    pub fn subtract(&self, other: &CpuSet) -> CpuSet {
        let mut words = self.words.clone();
        for (i, x) in words.iter_mut().enumerate() {
            *x &= !other.words.get(i).copied().unwrap_or(0);
        }
        CpuSet { words }
    }
    pub fn max(&self) -> Option<usize> {
        self.iter().last()
    }

    /// Adds the members of `other`.
    pub fn union_with(&mut self, other: &CpuSet) {
        if other.words.len() > self.words.len() {
            self.words.resize(other.words.len());
        }
        for (x, o) in self.words.iter_mut().zip(other.words.iter()) {
            *x |= o;
        }
    }
    /// The members whose aligned pair {2k, 2k+1} (an SMT-2 core) is wholly in the set.
    pub fn whole_pairs(&self) -> CpuSet {
        const EVEN: u64 = 0x5555_5555_5555_5555;
        let mut out = self.clone();
        for w in out.words.iter_mut() {
            let both = *w & (*w >> 1) & EVEN;
            *w = both | (both << 1);
        }
        out
    }
    /// How many members lie in `r`.
    #[inline]
    pub fn count_in(&self, r: std::ops::Range<usize>) -> usize {
        range_masks(self.words.len(), r)
            .map(|(wi, m)| (self.words[wi] & m).count_ones() as usize)
            .sum()
    }
    /// The members that lie in `r`.
    #[inline]
    pub fn within(&self, r: std::ops::Range<usize>) -> CpuSet {
        let mut out = CpuSet {
            words: Words::zeroed(self.words.len()),
        };
        for (wi, m) in range_masks(self.words.len(), r) {
            out.words[wi] = self.words[wi] & m;
        }
        out
    }
    /// Removes the members that lie in `r`.
    #[inline]
    pub fn remove_range(&mut self, r: std::ops::Range<usize>) {
        for (wi, m) in range_masks(self.words.len(), r) {
            self.words[wi] &= !m;
        }
    }

    /// Parses a cpu-list as taskset and the kernel write it: `"0-3,6,8-9"`.
    /// The error names the offending token.
    pub fn parse(text: &str) -> Result<CpuSet, String> {
        let mut set = CpuSet::empty(64);
        if text.trim().is_empty() {
            return Err("empty cpu-list; write e.g. \"0-3,6\"".into());
        }
        for token in text.split(',') {
            let tok = token.trim();
            let parse_num = |s: &str| -> Result<usize, String> {
                let s = s.trim();
                if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(format!("bad token {:?} in cpu-list {:?}: expected a cpu number or a range like 0-3", tok, text));
                }
                let v: usize = s
                    .parse()
                    .map_err(|_| format!("cpu number {:?} in {:?} is too large", s, text))?;
                if v >= 1 << 20 {
                    return Err(format!("cpu number {v} in {:?} is too large", text));
                }
                Ok(v)
            };
            if let Some((a, b)) = tok.split_once('-') {
                let (lo, hi) = (parse_num(a)?, parse_num(b)?);
                if lo > hi {
                    return Err(format!(
                        "range {:?} in cpu-list {:?} runs backwards",
                        tok, text
                    ));
                }
                for c in lo..=hi {
                    set.insert(c);
                }
            } else {
                set.insert(parse_num(tok)?);
            }
        }
        Ok(set)
    }
}

impl fmt::Display for CpuSet {
    /// Formats as a compact cpu-list (`0-3,6`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        let mut it = self.iter().peekable();
        while let Some(start) = it.next() {
            let mut end = start;
            while it.peek() == Some(&(end + 1)) {
                end = it.next().unwrap();
            }
            parts.push(if start == end {
                start.to_string()
            } else {
                format!("{start}-{end}")
            });
        }
        write!(f, "{}", parts.join(","))
    }
}

impl fmt::Debug for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CpuSet({})", self)
    }
}

#[cfg(test)]
mod tests {
    /// `next_after` against its definition (the first member above `after`), on sets
    /// of one word, four (inline) and eight (heap), at every position.
    #[test]
    fn next_after_matches_a_walk_over_the_members() {
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        for ncpus in [8usize, 64, 200, 512] {
            for density in [1u64, 4, 32] {
                let mut s = CpuSet::empty(ncpus);
                for c in 0..ncpus {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    if state.is_multiple_of(density) {
                        s.insert(c);
                    }
                }
                for after in 0..ncpus + 70 {
                    let want = s.iter().find(|&c| c > after);
                    assert_eq!(s.next_after(after), want, "{ncpus} cpus, after {after}");
                }
            }
        }
        assert_eq!(CpuSet::empty(8).next_after(usize::MAX), None);
    }

    use super::*;

    #[test]
    fn full_holds_exactly_the_first_n_cpus() {
        for n in 0..=300usize {
            let s = CpuSet::full(n);
            assert_eq!(
                s.iter().collect::<Vec<_>>(),
                (0..n).collect::<Vec<_>>(),
                "{n}"
            );
            assert_eq!(s.len(), n);
            let mut bitwise = CpuSet::empty(n);
            for c in 0..n {
                bitwise.insert(c);
            }
            assert!(s == bitwise, "{n}");
        }
    }

    #[test]
    fn nth_wrapping_counts_members_in_id_order_across_words() {
        // Sparse sets spanning inline and heap words: every third pCPU, a few high ones.
        let mut sets = vec![CpuSet::empty(200), CpuSet::full(1), CpuSet::full(1024)];
        let mut sparse = CpuSet::empty(700);
        for c in (5..700).step_by(3) {
            sparse.insert(c);
        }
        sparse.insert(699);
        sets.push(sparse);
        sets.push(CpuSet::parse("63-64,127,128,511").unwrap());
        for s in &sets {
            let members: Vec<usize> = s.iter().collect();
            for n in 0..3 * members.len().max(1) {
                let walked = (!members.is_empty()).then(|| members[n % members.len()]);
                assert_eq!(s.nth_wrapping(n), walked, "{s} n={n}");
            }
        }
    }

    #[test]
    fn cpulist_roundtrip() {
        let s = CpuSet::parse("0-3,6,8-9").unwrap();
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0, 1, 2, 3, 6, 8, 9]);
        assert_eq!(s.to_string(), "0-3,6,8-9");
        assert_eq!(s.len(), 7);
    }

    #[test]
    fn cpulist_errors_name_the_bad_token() {
        let e = CpuSet::parse("0-3,x").unwrap_err();
        assert!(e.contains("\"x\""), "{e}");
        assert!(CpuSet::parse("3-1").unwrap_err().contains("backwards"));
        assert!(CpuSet::parse("").unwrap_err().contains("empty"));
        assert!(CpuSet::parse("1-").unwrap_err().contains("\"1-\""));
    }

    #[test]
    fn numbering_is_thread_fastest_and_distances_classify() {
        let t = Topology::new(2, 2, 2, 2);
        assert_eq!(t.ncpus(), 8);
        assert_eq!(t.cpus[1].core, 0);
        assert_eq!(t.cpus[2].core, 1);
        assert_eq!(t.cpus[4].socket, 1);
        assert_eq!(t.distance(0, 1), Distance::SmtSibling);
        assert_eq!(t.distance(0, 2), Distance::SameSocket);
        assert_eq!(t.distance(0, 4), Distance::OtherNuma);
        let flat = Topology::new(2, 2, 1, 1);
        assert_eq!(flat.distance(0, 2), Distance::OtherSocket);
        let snc = Topology::new(1, 4, 1, 2);
        assert_eq!(snc.distance(0, 1), Distance::SameSocket);
        assert_eq!(snc.distance(0, 2), Distance::OtherNuma);
    }

    #[test]
    fn shape_checks() {
        assert!(Topology::check_shape(2, 4, 2, 3).is_err());
        assert!(Topology::check_shape(1, 4, 1, 2).is_ok());
        assert!(Topology::check_shape(0, 4, 1, 1).is_err());
    }
}
