//! The output paths a transfer's files have taken ([`Claims`]), each with the origin and
//! request target of the file that took it, kept for the whole run so that a second file for
//! one path is refused and an index's file listed twice is dropped.
//!
//! A directory index may list a million files, so a claim is packed: its names go into large
//! shared blocks (a few bytes of header, then the bytes themselves), and the hash table holds
//! only a 4-byte position per path. A set of boxed strings cost about 100 bytes a path (a
//! 32-byte entry in a table kept at most 7/8 full, and an allocation for the names); this costs
//! the names' bytes plus about 10.

use hashbrown::HashTable;
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;

/// Bytes in a block of names: a record never spans two blocks.
const BLOCK: usize = 4 << 20;
/// Records start at multiples of this, so that a 32-bit position addresses 16 GiB of names.
const ALIGN: usize = 4;
/// Bits of a position that give the record's place in its block (in `ALIGN` units).
const OFFSET_BITS: u32 = (BLOCK / ALIGN).trailing_zeros();

/// A path taken, as [`Claims::get`] finds it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Claimed<'a> {
    pub(crate) origin: usize,
    pub(crate) url_path: &'a str,
    pub(crate) rel: &'a str,
}

/// Output paths taken so far. Hashed with a random key per run (std's `RandomState`), since
/// the paths come from a server that may choose them to collide.
pub(crate) struct Claims {
    table: HashTable<u32>,
    blocks: Vec<Vec<u8>>,
    hasher: RandomState,
}

impl Default for Claims {
    fn default() -> Claims {
        Claims {
            table: HashTable::new(),
            blocks: Vec::new(),
            hasher: RandomState::new(),
        }
    }
}

impl Claims {
    /// The claim on `rel`, if a file took it.
    pub(crate) fn get(&self, rel: &str) -> Option<Claimed<'_>> {
        let hash = self.hasher.hash_one(rel);
        let pos = self
            .table
            .find(hash, |&p| read(&self.blocks, p).rel == rel)?;
        Some(read(&self.blocks, *pos))
    }

    /// Records that the file at `url_path` on `origin` takes `rel`, which no file has taken
    /// (see [`Claims::get`]). Fails only for names longer than a block (4 MiB), which no server
    /// that means well sends.
    pub(crate) fn insert(&mut self, rel: &str, origin: usize, url_path: &str) -> Result<(), ()> {
        let pos = self.append(rel, origin, url_path)?;
        let Claims {
            table,
            blocks,
            hasher,
        } = self;
        let hash = hasher.hash_one(rel);
        table.insert_unique(hash, pos, |&p| hasher.hash_one(read(blocks, p).rel));
        Ok(())
    }

    /// Writes a record (origin, lengths, the request target, then the path unless it is the
    /// target's tail, as it is wherever an index needed no escaping) and returns its position.
    fn append(&mut self, rel: &str, origin: usize, url_path: &str) -> Result<u32, ()> {
        let rel_in_url = url_path.ends_with(rel);
        let mut head = Vec::with_capacity(16);
        for n in [origin, url_path.len(), rel.len(), usize::from(rel_in_url)] {
            put_varint(&mut head, n);
        }
        let len = head.len() + url_path.len() + if rel_in_url { 0 } else { rel.len() };
        if len > BLOCK {
            return Err(());
        }
        let room = |b: &Vec<u8>| BLOCK - b.len() >= len;
        if !self.blocks.last().is_some_and(room) {
            if self.blocks.len() >> (u32::BITS - OFFSET_BITS) != 0 {
                // 16 GiB of names: far beyond what the rest of the transfer keeps in memory
                return Err(());
            }
            self.blocks.push(Vec::with_capacity(BLOCK));
        }
        let block_no = self.blocks.len() - 1;
        let block = self.blocks.last_mut().expect("a block was pushed");
        let at = block.len();
        block.extend_from_slice(&head);
        block.extend_from_slice(url_path.as_bytes());
        if !rel_in_url {
            block.extend_from_slice(rel.as_bytes());
        }
        // the next record starts aligned (within the block: BLOCK is a multiple of ALIGN)
        block.resize(block.len().next_multiple_of(ALIGN), 0);
        Ok(((block_no as u32) << OFFSET_BITS) | (at / ALIGN) as u32)
    }
}

/// The record at `pos`.
fn read(blocks: &[Vec<u8>], pos: u32) -> Claimed<'_> {
    let block = &blocks[(pos >> OFFSET_BITS) as usize];
    let mut at = (pos & ((1 << OFFSET_BITS) - 1)) as usize * ALIGN;
    let mut next = || take_varint(block, &mut at);
    let (origin, url_len, rel_len, rel_in_url) = (next(), next(), next(), next());
    let url_path = text(&block[at..at + url_len]);
    let rel = if rel_in_url == 1 {
        &url_path[url_len - rel_len..]
    } else {
        text(&block[at + url_len..at + url_len + rel_len])
    };
    Claimed {
        origin,
        url_path,
        rel,
    }
}

/// Bytes this module wrote from a `&str`, at its boundaries.
fn text(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).expect("a claim's names are written from strs")
}

/// LEB128: the small numbers of a record (origin 0, names of tens of bytes) take a byte each.
fn put_varint(out: &mut Vec<u8>, mut n: usize) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn take_varint(block: &[u8], at: &mut usize) -> usize {
    let mut n = 0usize;
    let mut shift = 0;
    loop {
        let b = block[*at];
        *at += 1;
        n |= usize::from(b & 0x7f) << shift;
        if b < 0x80 {
            return n;
        }
        shift += 7;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_are_found_by_path_with_their_origin_and_target() {
        let mut c = Claims::default();
        c.insert("d/a b", 0, "/d/a%20b").unwrap();
        c.insert("d/x", 3, "/d/x").unwrap();
        c.insert("é/%", 300, "/%C3%A9/%25").unwrap();
        assert_eq!(
            c.get("d/a b"),
            Some(Claimed {
                origin: 0,
                url_path: "/d/a%20b",
                rel: "d/a b"
            })
        );
        assert_eq!(
            c.get("d/x"),
            Some(Claimed {
                origin: 3,
                url_path: "/d/x",
                rel: "d/x"
            })
        );
        assert_eq!(c.get("é/%").unwrap().origin, 300);
        assert_eq!(c.get("é/%").unwrap().url_path, "/%C3%A9/%25");
        assert!(c.get("d").is_none() && c.get("x").is_none());
        assert_eq!(c.table.len(), 3);
    }

    /// Enough claims to fill several blocks and grow the table many times: each is still
    /// found with its own names, and paths never claimed are not.
    #[test]
    fn many_claims_across_blocks_are_all_found() {
        let mut c = Claims::default();
        let long = "n".repeat(3000);
        let n = 5_000;
        for i in 0..n {
            let rel = format!("d{}/{long}{i}", i % 7);
            let url = if i % 2 == 0 {
                format!("/{rel}")
            } else {
                format!("/other/{i}")
            };
            c.insert(&rel, i % 5, &url).unwrap();
        }
        assert!(c.blocks.len() > 2, "{} blocks", c.blocks.len());
        for i in 0..n {
            let rel = format!("d{}/{long}{i}", i % 7);
            let got = c.get(&rel).unwrap();
            assert_eq!((got.rel, got.origin), (rel.as_str(), i % 5));
            if i % 2 == 1 {
                assert_eq!(got.url_path, format!("/other/{i}"));
            }
        }
        assert!(c.get(&format!("d0/{long}{n}")).is_none());
    }

    #[test]
    fn a_name_longer_than_a_block_is_refused() {
        let mut c = Claims::default();
        let huge = "x".repeat(BLOCK + 1);
        assert!(c.insert(&huge, 0, "/y").is_err());
        assert!(c.get(&huge).is_none() && c.table.is_empty());
    }
}
