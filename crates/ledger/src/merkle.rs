//! RFC 6962 / RFC 9162 Merkle tree over the event hashes.
//!
//! `leaf = SHA-256(0x00 || event_hash)`, `node = SHA-256(0x01 || left || right)`,
//! and the tree over `n` leaves splits at the largest power of two below `n`.
//! The ledger keeps a *frontier* (the roots of the perfect subtrees that make
//! up the current tree) so an append costs O(log n) hashes and the root is
//! always at hand.

use sha2::{Digest, Sha256};

use crate::event::HASH_LEN;

pub type Hash = [u8; HASH_LEN];

pub fn leaf_hash(event_hash: &[u8]) -> Hash {
    let mut h = Sha256::new();
    h.update([0u8]);
    h.update(event_hash);
    h.finalize().into()
}

pub fn node_hash(left: &[u8], right: &[u8]) -> Hash {
    let mut h = Sha256::new();
    h.update([1u8]);
    h.update(left);
    h.update(right);
    h.finalize().into()
}

/// Root of the empty tree (RFC 6962: the hash of the empty string).
pub fn empty_root() -> Hash {
    Sha256::digest([]).into()
}

/// Incremental tree: perfect-subtree roots, largest (leftmost) first.
#[derive(Debug, Clone, Default)]
pub struct Frontier {
    stack: Vec<(Hash, u32)>,
    size: u64,
}

impl Frontier {
    pub fn push_event(&mut self, event_hash: &[u8]) {
        let mut h = leaf_hash(event_hash);
        let mut height = 0u32;
        while let Some(&(left, lh)) = self.stack.last() {
            if lh != height {
                break;
            }
            self.stack.pop();
            h = node_hash(&left, &h);
            height += 1;
        }
        self.stack.push((h, height));
        self.size += 1;
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    pub fn root(&self) -> Hash {
        let mut iter = self.stack.iter().rev();
        let Some(&(mut r, _)) = iter.next() else { return empty_root() };
        for (left, _) in iter {
            r = node_hash(left, &r);
        }
        r
    }
}

fn split(n: usize) -> usize {
    // Largest power of two strictly below n (n >= 2).
    let mut k = 1usize;
    while k << 1 < n {
        k <<= 1;
    }
    k
}

/// MTH over already-hashed leaves.
fn mth(leaves: &[Hash]) -> Hash {
    match leaves.len() {
        0 => empty_root(),
        1 => leaves[0],
        n => {
            let k = split(n);
            node_hash(&mth(&leaves[..k]), &mth(&leaves[k..]))
        }
    }
}

/// RFC 6962 PATH(m, D[n]), siblings from the leaf up.
pub fn audit_path(leaves: &[Hash], m: usize) -> Vec<Hash> {
    let mut out = Vec::new();
    fn go(leaves: &[Hash], m: usize, out: &mut Vec<Hash>) {
        let n = leaves.len();
        if n <= 1 {
            return;
        }
        let k = split(n);
        if m < k {
            go(&leaves[..k], m, out);
            out.push(mth(&leaves[k..]));
        } else {
            go(&leaves[k..], m - k, out);
            out.push(mth(&leaves[..k]));
        }
    }
    go(leaves, m, &mut out);
    out
}

/// RFC 9162 §2.1.3.2: the root implied by a leaf, its index and its path.
pub fn root_from_path(leaf: Hash, index: u64, size: u64, path: &[Hash]) -> Option<Hash> {
    if index >= size {
        return None;
    }
    let (mut fnode, mut snode) = (index, size - 1);
    let mut r = leaf;
    for p in path {
        if snode == 0 {
            return None;
        }
        if fnode & 1 == 1 || fnode == snode {
            r = node_hash(p, &r);
            while fnode & 1 == 0 && fnode != 0 {
                fnode >>= 1;
                snode >>= 1;
            }
        } else {
            r = node_hash(&r, p);
        }
        fnode >>= 1;
        snode >>= 1;
    }
    (snode == 0).then_some(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frontier_matches_recursive_root_and_paths_check() {
        let events: Vec<Hash> = (0u8..37).map(|i| Sha256::digest([i]).into()).collect();
        let mut f = Frontier::default();
        for (n, e) in events.iter().enumerate() {
            f.push_event(e);
            let leaves: Vec<Hash> = events[..=n].iter().map(|e| leaf_hash(e)).collect();
            assert_eq!(f.root(), mth(&leaves));
            for m in 0..leaves.len() {
                let path = audit_path(&leaves, m);
                assert_eq!(root_from_path(leaves[m], m as u64, leaves.len() as u64, &path), Some(f.root()));
            }
        }
    }
}
