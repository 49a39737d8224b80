//! The hashed event header and its canonical encoding.
//!
//! `hash = SHA-256(canonical header)`, where the header carries the payload's
//! hash rather than the payload, so a payload can be erased later and the
//! chain still verifies.

use sha2::{Digest, Sha256};

pub const HASH_LEN: usize = 32;
const DOMAIN: &[u8] = b"ledgermind/event/v1\0";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventHeader {
    pub seq: i64,
    pub id: String,
    /// RFC 3339 UTC with milliseconds.
    pub ts: String,
    pub entity_id: String,
    pub kind: String,
    /// Entity whose key signed the event.
    pub signer: String,
    pub payload_hash: [u8; HASH_LEN],
    pub prev_hash: [u8; HASH_LEN],
}

fn put_str(buf: &mut Vec<u8>, s: &str) {
    // Length-prefixed so no two different headers share an encoding.
    buf.extend_from_slice(&(s.len() as u32).to_be_bytes());
    buf.extend_from_slice(s.as_bytes());
}

impl EventHeader {
    pub fn canonical_bytes(&self) -> Vec<u8> {
        let mut buf = Vec::with_capacity(160 + self.id.len() + self.kind.len());
        buf.extend_from_slice(DOMAIN);
        buf.extend_from_slice(&self.seq.to_be_bytes());
        put_str(&mut buf, &self.id);
        put_str(&mut buf, &self.ts);
        put_str(&mut buf, &self.entity_id);
        put_str(&mut buf, &self.kind);
        put_str(&mut buf, &self.signer);
        buf.extend_from_slice(&self.payload_hash);
        buf.extend_from_slice(&self.prev_hash);
        buf
    }

    pub fn hash(&self) -> [u8; HASH_LEN] {
        Sha256::digest(self.canonical_bytes()).into()
    }
}

pub fn payload_hash(body: &[u8]) -> [u8; HASH_LEN] {
    Sha256::digest(body).into()
}

pub(crate) fn to_hash(bytes: &[u8]) -> Option<[u8; HASH_LEN]> {
    bytes.try_into().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> EventHeader {
        EventHeader {
            seq: 7,
            id: "e".into(),
            ts: "2026-01-01T00:00:00.000Z".into(),
            entity_id: "human".into(),
            kind: "message_added".into(),
            signer: "human".into(),
            payload_hash: [1; 32],
            prev_hash: [2; 32],
        }
    }

    #[test]
    fn every_header_field_changes_the_hash() {
        let base = header().hash();
        let mut h = header();
        h.seq = 8;
        assert_ne!(h.hash(), base);
        let mut h = header();
        h.kind = "message_addee".into();
        assert_ne!(h.hash(), base);
        let mut h = header();
        h.payload_hash[31] ^= 1;
        assert_ne!(h.hash(), base);
        let mut h = header();
        h.prev_hash[0] ^= 0x80;
        assert_ne!(h.hash(), base);
    }

    #[test]
    fn length_prefixes_keep_field_boundaries_apart() {
        let mut a = header();
        a.entity_id = "ab".into();
        a.kind = "c".into();
        let mut b = header();
        b.entity_id = "a".into();
        b.kind = "bc".into();
        assert_ne!(a.hash(), b.hash());
    }
}
