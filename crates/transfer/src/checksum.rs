//! File checksums: XXH3 64-bit (seed 0), chosen because it hashes at memory speed, so
//! verifying a dataset costs far less CPU (and energy) than the transfer; it is an integrity
//! check against truncation and corruption, not a defence against a malicious server.
//! The hex form matches `xxhsum -H3`'s digest.

use std::fs::File;
use std::hash::Hasher;
use std::io::Read;
use std::path::Path;
use twox_hash::XxHash3_64;

/// Name of the checksum algorithm in listings.
pub const ALGORITHM: &str = "xxh3-64";

/// Streaming XXH3-64 (seed 0). twox-hash picks its AVX2 code at run time where the CPU has it;
/// a portable build of xxhash-rust gets SSE2 only.
struct Xxh3(XxHash3_64);

impl Xxh3 {
    fn new() -> Xxh3 {
        Xxh3(XxHash3_64::with_seed(0))
    }
    fn update(&mut self, data: &[u8]) {
        self.0.write(data);
    }
    fn digest(&self) -> u64 {
        self.0.finish()
    }
}

/// One-shot XXH3-64 (seed 0).
fn xxh3_64(data: &[u8]) -> u64 {
    XxHash3_64::oneshot(data)
}

/// Size of the blocks a listing also hashes one by one (see [`FileDigests`]): small enough that
/// a corrupt block costs little to fetch again, large enough that a listing stays small
/// (16 hex digits per MiB).
pub const BLOCK_SIZE: u64 = 1 << 20;

/// Checksums of one file: XXH3-64 of the whole file (what `xxhsum -H3` prints) and, for files
/// larger than one block, of each `block_size` block in order. Block digests let a client hash
/// the data while it is still in its receive buffer, in any order the ranges arrive, instead of
/// reading the whole file back from memory after it is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileDigests {
    pub whole: String,
    pub blocks: Option<Vec<String>>,
}

/// XXH3-64 of a file, as 16 lowercase hex digits.
pub fn file_xxh3(path: &Path) -> std::io::Result<String> {
    let f = File::open(path)?;
    let len = f.metadata()?.len();
    if let Some(d) = with_mapping(&f, len, bytes_xxh3) {
        return Ok(d);
    }
    read_xxh3(f)
}

/// The whole-file and per-block digests of a file, in one pass over it.
pub fn file_digests(path: &Path, block_size: u64) -> std::io::Result<FileDigests> {
    let f = File::open(path)?;
    let len = f.metadata()?.len();
    let bs = block_size.max(1);
    let mut acc = DigestsBuilder::default();
    let mapped = with_mapping(&f, len, |data| {
        data.chunks(bs as usize).for_each(|b| acc.add(b))
    });
    if mapped.is_none() {
        // not mappable (or empty): read it block by block
        let mut buf = vec![0u8; bs as usize];
        let mut f = f;
        loop {
            let n = read_full(&mut f, &mut buf)?;
            if n == 0 {
                break;
            }
            acc.add(&buf[..n]);
        }
    }
    Ok(FileDigests {
        whole: format!("{:016x}", acc.whole.digest()),
        blocks: (len > bs).then_some(acc.blocks),
    })
}

/// Digests of a file fed to it block by block.
struct DigestsBuilder {
    whole: Xxh3,
    blocks: Vec<String>,
}

impl Default for DigestsBuilder {
    fn default() -> Self {
        DigestsBuilder {
            whole: Xxh3::new(),
            blocks: Vec::new(),
        }
    }
}

impl DigestsBuilder {
    fn add(&mut self, block: &[u8]) {
        self.whole.update(block);
        self.blocks.push(format!("{:016x}", xxh3_64(block)));
    }
}

/// XXH3-64 of the given blocks (indexes) of an open file whose blocks are `block_size` long.
pub fn file_blocks_xxh3(f: &File, block_size: u64, which: &[u64]) -> std::io::Result<Vec<u64>> {
    use std::os::unix::fs::FileExt;
    let len = f.metadata()?.len();
    let bs = block_size.max(1);
    let range = |i: u64| (i * bs).min(len)..((i + 1) * bs).min(len);
    let hashed = with_mapping(f, len, |data| {
        which
            .iter()
            .map(|&i| {
                let r = range(i);
                xxh3_64(&data[r.start as usize..r.end as usize])
            })
            .collect::<Vec<_>>()
    });
    if let Some(v) = hashed {
        return Ok(v);
    }
    let mut buf = vec![0u8; bs as usize];
    which
        .iter()
        .map(|&i| {
            let r = range(i);
            let b = &mut buf[..(r.end - r.start) as usize];
            f.read_exact_at(b, r.start)?;
            Ok(xxh3_64(b))
        })
        .collect()
}

/// Hashes a file's blocks from its bytes as they stream past in order, starting at some offset:
/// each block that the stream covers from its first to its last byte gets its digest; a block
/// the stream enters midway (a resumed range) is skipped, to be hashed from the file later.
pub struct BlockHasher {
    block_size: u64,
    file_size: u64,
    pos: u64,
    current: Option<Xxh3>,
}

impl BlockHasher {
    pub fn new(block_size: u64, file_size: u64, offset: u64) -> BlockHasher {
        let block_size = block_size.max(1);
        BlockHasher {
            block_size,
            file_size,
            pos: offset,
            current: (offset % block_size == 0).then(Xxh3::new),
        }
    }

    /// Feeds the next bytes of the stream; `done(block index, digest)` is called for each block
    /// they complete.
    pub fn update(&mut self, mut data: &[u8], mut done: impl FnMut(u64, u64)) {
        while !data.is_empty() && self.pos < self.file_size {
            let index = self.pos / self.block_size;
            let block_end = ((index + 1) * self.block_size).min(self.file_size);
            let take = data.len().min((block_end - self.pos) as usize);
            if let Some(h) = self.current.as_mut() {
                h.update(&data[..take]);
            }
            self.pos += take as u64;
            data = &data[take..];
            if self.pos == block_end {
                if let Some(h) = self.current.as_mut() {
                    done(index, h.digest());
                    *h = Xxh3::new();
                } else {
                    self.current = Some(Xxh3::new());
                }
            }
        }
    }
}

/// Runs `f` over a private read-only mapping of the first `len` bytes of `file`; None when the
/// file is empty or cannot be mapped.
///
/// Hashing a file in place saves copying every byte once more: a received file is still in the
/// page cache (a profile of a 1 GB download put that copy at an eighth of the client's CPU time).
fn with_mapping<T>(file: &File, len: u64, f: impl FnOnce(&[u8]) -> T) -> Option<T> {
    use rustix::mm::{madvise, mmap, munmap, Advice, MapFlags, ProtFlags};
    let len = usize::try_from(len).ok().filter(|&l| l > 0)?;
    // SAFETY: a fresh read-only private mapping of an open file, unmapped below; the slice
    // is only read while mapped. A concurrent truncation would fault (SIGBUS) — the files
    // hashed here are our own part files or the served tree, which nothing truncates.
    unsafe {
        let ptr = mmap(
            std::ptr::null_mut(),
            len,
            ProtFlags::READ,
            MapFlags::PRIVATE,
            file,
            0,
        )
        .ok()?;
        let _ = madvise(ptr, len, Advice::Sequential);
        let out = f(std::slice::from_raw_parts(ptr as *const u8, len));
        let _ = munmap(ptr, len);
        Some(out)
    }
}

fn read_full(f: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

fn read_xxh3(mut f: File) -> std::io::Result<String> {
    let mut h = Xxh3::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(format!("{:016x}", h.digest()))
}

/// Parses a digest written by [`bytes_xxh3`] (16 hex digits).
pub fn parse_digest(hex: &str) -> Option<u64> {
    (hex.len() == 16)
        .then(|| u64::from_str_radix(hex, 16).ok())
        .flatten()
}

/// XXH3-64 of a byte slice, as 16 lowercase hex digits.
pub fn bytes_xxh3(data: &[u8]) -> String {
    format!("{:016x}", xxh3_64(data))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_vector_and_streaming_agree() {
        // XXH3-64 of the empty input with seed 0 is 2d06800538d394c2 (xxHash reference).
        assert_eq!(bytes_xxh3(b""), "2d06800538d394c2");
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&p, &data).unwrap();
        assert_eq!(file_xxh3(&p).unwrap(), bytes_xxh3(&data));
        assert_eq!(
            read_xxh3(File::open(&p).unwrap()).unwrap(),
            bytes_xxh3(&data)
        );
        let empty = dir.path().join("empty");
        std::fs::write(&empty, b"").unwrap();
        assert_eq!(file_xxh3(&empty).unwrap(), "2d06800538d394c2");
    }

    #[test]
    fn digests_of_blocks_match_one_shot_hashes_of_each_block() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let data: Vec<u8> = (0..2_500_000u32).map(|i| (i * 13 % 253) as u8).collect();
        std::fs::write(&p, &data).unwrap();
        let d = file_digests(&p, 1 << 20).unwrap();
        assert_eq!(d.whole, bytes_xxh3(&data));
        let want: Vec<String> = data.chunks(1 << 20).map(bytes_xxh3).collect();
        assert_eq!(d.blocks.as_ref().unwrap(), &want);
        assert_eq!(want.len(), 3);
        let f = File::open(&p).unwrap();
        let got = file_blocks_xxh3(&f, 1 << 20, &[2, 0]).unwrap();
        assert_eq!(
            got,
            vec![xxh3_64(&data[2 << 20..]), xxh3_64(&data[..1 << 20])]
        );
        // a file of one block has no block list: its whole digest is that block's
        let small = dir.path().join("s");
        std::fs::write(&small, &data[..1000]).unwrap();
        assert_eq!(file_digests(&small, 1 << 20).unwrap().blocks, None);
        assert_eq!(parse_digest(&d.whole), Some(xxh3_64(&data)));
        assert_eq!(parse_digest("xyz"), None);
    }

    #[test]
    fn block_hasher_digests_whole_blocks_only_whatever_the_read_sizes() {
        let bs = 1000u64;
        let data: Vec<u8> = (0..4_321u32).map(|i| (i * 7 % 251) as u8).collect();
        let want = |i: u64| {
            let end = ((i + 1) * bs).min(data.len() as u64) as usize;
            xxh3_64(&data[(i * bs) as usize..end])
        };
        for (start, step) in [
            (0u64, 1usize),
            (0, 333),
            (0, 4096),
            (1000, 999),
            (1500, 700),
        ] {
            let mut h = BlockHasher::new(bs, data.len() as u64, start);
            let mut got = Vec::new();
            for piece in data[start as usize..].chunks(step) {
                h.update(piece, |i, d| got.push((i, d)));
            }
            // a stream entering block 1 midway skips it and hashes the blocks after it
            let first = start.div_ceil(bs);
            let expect: Vec<(u64, u64)> = (first..5).map(|i| (i, want(i))).collect();
            assert_eq!(got, expect, "start {start} step {step}");
        }
    }
}
