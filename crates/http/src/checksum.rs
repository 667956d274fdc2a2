//! File checksums: XXH3 64-bit (seed 0), chosen because it hashes at memory speed, so
//! verifying a dataset costs far less CPU (and energy) than the transfer; it is an integrity
//! check against truncation and corruption, not a defence against a malicious server.
//! The hex form matches `xxhsum -H3`'s digest.

use std::fs::File;
use std::hash::Hasher;
use twox_hash::XxHash3_64;

/// Name of the checksum algorithm in listings.
pub const ALGORITHM: &str = "xxh3-64";

/// The longest BLAKE2b digest, in bytes (`b2sum`'s default, 512 bits).
pub const BLAKE2B_MAX_BYTES: u8 = 64;

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

/// Reads an open file from its start to its end with positioned reads, handing each piece
/// to `f`; returns the bytes read. Reads, not a mapping: a file truncated while it is read
/// (a served file someone rewrites) ends the reading early instead of faulting the process
/// with `SIGBUS`.
fn read_through(file: &File, mut f: impl FnMut(&[u8])) -> std::io::Result<u64> {
    thread_local! {
        // one buffer per thread, not a fresh megabyte per file (small files are many)
        static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    BUF.with_borrow_mut(|buf| {
        if buf.len() < 1 << 20 {
            buf.resize(1 << 20, 0);
        }
        read_through_with(file, buf, &mut f)
    })
}

fn read_through_with(
    file: &File,
    buf: &mut [u8],
    f: &mut impl FnMut(&[u8]),
) -> std::io::Result<u64> {
    use std::os::unix::fs::FileExt;
    let mut at = 0u64;
    loop {
        // whole buffers (or the end), so that block-sized pieces stay block-aligned
        let mut n = 0;
        while n < buf.len() {
            match file.read_at(&mut buf[n..], at + n as u64) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if n == 0 {
            return Ok(at);
        }
        f(&buf[..n]);
        at += n as u64;
        if n < buf.len() {
            return Ok(at);
        }
    }
}

/// XXH3-64 of an open file, as 16 lowercase hex digits.
pub fn file_xxh3(file: &File) -> std::io::Result<String> {
    let mut h = Xxh3::new();
    read_through(file, |b| h.update(b))?;
    Ok(format!("{:016x}", h.digest()))
}

/// The whole-file and per-block digests of an open file, in one pass over it, and the bytes
/// they cover (fewer than its size when it was truncated meanwhile).
pub fn file_digests(file: &File, block_size: u64) -> std::io::Result<(FileDigests, u64)> {
    let bs = block_size.clamp(1, 1 << 20) as usize;
    let mut acc = DigestsBuilder::default();
    let len = read_through(file, |data| data.chunks(bs).for_each(|b| acc.add(b)))?;
    Ok((
        FileDigests {
            whole: format!("{:016x}", acc.whole.digest()),
            blocks: (len > bs as u64).then_some(acc.blocks),
        },
        len,
    ))
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

/// XXH3-64 of the given blocks (indexes) of an open file whose blocks are `block_size` long
/// (a block past the end hashes as empty).
pub fn file_blocks_xxh3(f: &File, block_size: u64, which: &[u64]) -> std::io::Result<Vec<u64>> {
    use std::os::unix::fs::FileExt;
    let len = f.metadata()?.len();
    let bs = block_size.max(1);
    let mut buf = vec![0u8; usize::try_from(bs).unwrap_or(usize::MAX).min(1 << 24)];
    which
        .iter()
        .map(|&i| {
            let start = i.saturating_mul(bs).min(len);
            let end = i.saturating_add(1).saturating_mul(bs).min(len);
            let mut h = Xxh3::new();
            let mut at = start;
            while at < end {
                let want = ((end - at) as usize).min(buf.len());
                f.read_exact_at(&mut buf[..want], at)?;
                h.update(&buf[..want]);
                at += want as u64;
            }
            Ok(h.digest())
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

/// A digest algorithm a publisher's checksum file (or an aria2 `checksum=` option) can name:
/// the coreutils tools (`md5sum`, `sha1sum`, `sha224sum` … `sha512sum`, `b2sum`) and
/// `xxhsum`'s four (`-H0` XXH32, `-H1` XXH64, `-H2` XXH128, `-H3` XXH3-64).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Algorithm {
    Md5,
    Sha1,
    Sha224,
    Sha256,
    Sha384,
    Sha512,
    Xxh32,
    Xxh64,
    Xxh3_64,
    Xxh128,
    /// BLAKE2b (RFC 7693) with a digest of this many bytes, 1 to 64: what `b2sum` writes
    /// (64 bytes by default, `b2sum -l BITS` for BITS/8). The length is a parameter of the
    /// hash, not a truncation: BLAKE2b-256 is not the first half of BLAKE2b-512.
    Blake2b(u8),
}

impl Algorithm {
    /// Every algorithm (BLAKE2b at `b2sum`'s default length), for messages and tests.
    pub const ALL: [Algorithm; 11] = [
        Algorithm::Md5,
        Algorithm::Sha1,
        Algorithm::Sha224,
        Algorithm::Sha256,
        Algorithm::Sha384,
        Algorithm::Sha512,
        Algorithm::Xxh32,
        Algorithm::Xxh64,
        Algorithm::Xxh3_64,
        Algorithm::Xxh128,
        Algorithm::Blake2b(BLAKE2B_MAX_BYTES),
    ];

    /// BLAKE2b with a digest of `bytes` bytes; `None` outside 1..=64.
    pub fn blake2b(bytes: usize) -> Option<Algorithm> {
        u8::try_from(bytes)
            .ok()
            .filter(|b| (1..=BLAKE2B_MAX_BYTES).contains(b))
            .map(Algorithm::Blake2b)
    }

    /// Lower-case name, as the summary reports it (`xxh3-64` is [`ALGORITHM`]; BLAKE2b as
    /// `b2sum --tag` names it, `blake2b` at 512 bits and `blake2b-256` at 256).
    pub fn name(self) -> std::borrow::Cow<'static, str> {
        std::borrow::Cow::Borrowed(match self {
            Algorithm::Md5 => "md5",
            Algorithm::Sha1 => "sha1",
            Algorithm::Sha224 => "sha224",
            Algorithm::Sha256 => "sha256",
            Algorithm::Sha384 => "sha384",
            Algorithm::Sha512 => "sha512",
            Algorithm::Xxh32 => "xxh32",
            Algorithm::Xxh64 => "xxh64",
            Algorithm::Xxh3_64 => ALGORITHM,
            Algorithm::Xxh128 => "xxh128",
            Algorithm::Blake2b(BLAKE2B_MAX_BYTES) => "blake2b",
            Algorithm::Blake2b(n) => return format!("blake2b-{}", n as u32 * 8).into(),
        })
    }

    /// Length of a digest in bytes.
    pub fn digest_len(self) -> usize {
        match self {
            Algorithm::Md5 | Algorithm::Xxh128 => 16,
            Algorithm::Sha1 => 20,
            Algorithm::Sha224 => 28,
            Algorithm::Sha256 => 32,
            Algorithm::Sha384 => 48,
            Algorithm::Sha512 => 64,
            Algorithm::Xxh32 => 4,
            Algorithm::Xxh64 | Algorithm::Xxh3_64 => 8,
            Algorithm::Blake2b(n) => n as usize,
        }
    }

    /// The algorithm of a BSD-style tag (`SHA256 (name) = …`, as `sha256sum --tag` and
    /// `xxhsum --tag` write it); the flag says the digest is little-endian (`xxhsum
    /// --little-endian` writes `XXH64_LE`). `b2sum --tag` writes `BLAKE2b` for its default
    /// 512 bits and `BLAKE2b-BITS` after `-l BITS` (a multiple of 8, at most 512).
    pub fn from_tag(tag: &str) -> Option<(Algorithm, bool)> {
        if let Some(bits) = tag.strip_prefix("BLAKE2b") {
            let bytes = match bits.strip_prefix('-') {
                None if bits.is_empty() => BLAKE2B_MAX_BYTES as usize,
                Some(b) if !b.starts_with('0') => {
                    let bits: usize = b.parse().ok().filter(|n| n % 8 == 0)?;
                    bits / 8
                }
                _ => return None,
            };
            return Algorithm::blake2b(bytes).map(|a| (a, false));
        }
        let (base, le) = match tag.strip_suffix("_LE") {
            Some(b) => (b, true),
            None => (tag, false),
        };
        let a = match base {
            "MD5" => Algorithm::Md5,
            "SHA1" => Algorithm::Sha1,
            "SHA224" => Algorithm::Sha224,
            "SHA256" => Algorithm::Sha256,
            "SHA384" => Algorithm::Sha384,
            "SHA512" => Algorithm::Sha512,
            "XXH32" => Algorithm::Xxh32,
            "XXH64" => Algorithm::Xxh64,
            "XXH3" => Algorithm::Xxh3_64,
            "XXH128" => Algorithm::Xxh128,
            _ => return None,
        };
        // only xxhsum writes little-endian digests
        (!le || a.is_xxhash()).then_some((a, le))
    }

    /// The algorithm of an aria2 `checksum=TYPE=DIGEST` option (`sha-256`, `md5`, …).
    pub fn from_aria2(name: &str) -> Option<Algorithm> {
        Some(match name.to_ascii_lowercase().as_str() {
            "md5" => Algorithm::Md5,
            "sha-1" | "sha1" => Algorithm::Sha1,
            "sha-224" | "sha224" => Algorithm::Sha224,
            "sha-256" | "sha256" => Algorithm::Sha256,
            "sha-384" | "sha384" => Algorithm::Sha384,
            "sha-512" | "sha512" => Algorithm::Sha512,
            _ => return None,
        })
    }

    /// Whether this is one of xxHash's non-cryptographic hashes.
    /// Whether a forger cannot make other content with this digest (SHA-2, BLAKE2b): what a
    /// file from a server one does not trust can be checked against. xxHash detects
    /// corruption only; MD5 and SHA-1 have practical collisions.
    pub fn collision_resistant(self) -> bool {
        matches!(
            self,
            Algorithm::Sha224
                | Algorithm::Sha256
                | Algorithm::Sha384
                | Algorithm::Sha512
                | Algorithm::Blake2b(_)
        )
    }

    pub fn is_xxhash(self) -> bool {
        matches!(
            self,
            Algorithm::Xxh32 | Algorithm::Xxh64 | Algorithm::Xxh3_64 | Algorithm::Xxh128
        )
    }

    /// A fresh streaming hasher.
    pub fn hasher(self) -> StreamHasher {
        StreamHasher(match self {
            Algorithm::Md5 => Inner::Md5(md5::Md5::default()),
            Algorithm::Sha1 => Inner::Sha1(sha1::Sha1::default()),
            Algorithm::Sha224 => Inner::Sha224(sha2::Sha224::default()),
            Algorithm::Sha256 => Inner::Sha256(sha2::Sha256::default()),
            Algorithm::Sha384 => Inner::Sha384(sha2::Sha384::default()),
            Algorithm::Sha512 => Inner::Sha512(sha2::Sha512::default()),
            Algorithm::Xxh32 => Inner::Xxh32(twox_hash::XxHash32::with_seed(0)),
            Algorithm::Xxh64 => Inner::Xxh64(twox_hash::XxHash64::with_seed(0)),
            Algorithm::Xxh3_64 => Inner::Xxh3(Xxh3::new()),
            Algorithm::Xxh128 => Inner::Xxh128(Box::new(twox_hash::XxHash3_128::with_seed(0))),
            Algorithm::Blake2b(n) => Inner::Blake2b(Box::new(
                <blake2::Blake2bVar as blake2::digest::VariableOutput>::new(n as usize)
                    .expect("Blake2b lengths are 1..=64"),
            )),
        })
    }
}

impl std::fmt::Display for Algorithm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

/// Streaming state of one [`Algorithm`].
pub struct StreamHasher(Inner);

enum Inner {
    Md5(md5::Md5),
    Sha1(sha1::Sha1),
    Sha224(sha2::Sha224),
    Sha256(sha2::Sha256),
    Sha384(sha2::Sha384),
    Sha512(sha2::Sha512),
    Xxh32(twox_hash::XxHash32),
    Xxh64(twox_hash::XxHash64),
    Xxh3(Xxh3),
    Xxh128(Box<twox_hash::XxHash3_128>),
    Blake2b(Box<blake2::Blake2bVar>),
}

impl StreamHasher {
    pub fn update(&mut self, data: &[u8]) {
        use sha2::Digest as _;
        match &mut self.0 {
            Inner::Md5(h) => h.update(data),
            Inner::Sha1(h) => h.update(data),
            Inner::Sha224(h) => h.update(data),
            Inner::Sha256(h) => h.update(data),
            Inner::Sha384(h) => h.update(data),
            Inner::Sha512(h) => h.update(data),
            Inner::Xxh32(h) => h.write(data),
            Inner::Xxh64(h) => h.write(data),
            Inner::Xxh3(h) => h.update(data),
            Inner::Xxh128(h) => h.write(data),
            Inner::Blake2b(h) => blake2::digest::Update::update(h.as_mut(), data),
        }
    }

    /// The digest, in the byte order its tools print it (xxHash values big-endian, as
    /// `xxhsum` prints them by default).
    pub fn finish(self) -> Vec<u8> {
        use sha2::Digest as _;
        match self.0 {
            Inner::Md5(h) => h.finalize().to_vec(),
            Inner::Sha1(h) => h.finalize().to_vec(),
            Inner::Sha224(h) => h.finalize().to_vec(),
            Inner::Sha256(h) => h.finalize().to_vec(),
            Inner::Sha384(h) => h.finalize().to_vec(),
            Inner::Sha512(h) => h.finalize().to_vec(),
            Inner::Xxh32(h) => (h.finish() as u32).to_be_bytes().to_vec(),
            Inner::Xxh64(h) => h.finish().to_be_bytes().to_vec(),
            Inner::Xxh3(h) => h.digest().to_be_bytes().to_vec(),
            Inner::Xxh128(h) => h.finish_128().to_be_bytes().to_vec(),
            Inner::Blake2b(h) => {
                use blake2::digest::VariableOutput as _;
                let mut out = vec![0u8; h.output_size()];
                h.finalize_variable(&mut out)
                    .expect("the buffer has the digest's length");
                out
            }
        }
    }
}

/// The digest of a byte slice.
#[cfg(test)]
pub(crate) fn bytes_digest(algo: Algorithm, data: &[u8]) -> Vec<u8> {
    let mut h = algo.hasher();
    h.update(data);
    h.finish()
}

/// The digest of a whole open file.
pub fn file_digest(algo: Algorithm, f: &File) -> std::io::Result<Vec<u8>> {
    let mut h = algo.hasher();
    read_through(f, |b| h.update(b))?;
    Ok(h.finish())
}

/// Lower-case hex of a digest.
pub fn to_hex(digest: &[u8]) -> String {
    use std::fmt::Write as _;
    digest.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Decodes hex digits (either case); `None` for an odd length or a non-hex character.
pub fn from_hex(hex: &str) -> Option<Vec<u8>> {
    let b = hex.as_bytes();
    if b.len() % 2 != 0 {
        return None;
    }
    let nib = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    b.chunks(2)
        .map(|p| Some(nib(p[0])? << 4 | nib(p[1])?))
        .collect()
}

/// Hashes a file with a sequential digest (SHA-256, MD5, …) from the bytes as they arrive,
/// whatever order the ranges come in: bytes at the digest's position are hashed at once; bytes
/// that arrive ahead of it are only noted, and read back from the file (still in the page
/// cache) when the position reaches them. A file that arrives in order, as one stream (a
/// server without Range, or a file small enough for one request), is never read back.
pub struct InOrderHasher {
    hasher: StreamHasher,
    size: u64,
    /// Bytes `[0, at)` are hashed.
    at: u64,
    /// Byte ranges written to the file beyond `at` and not hashed yet (start → end).
    ahead: std::collections::BTreeMap<u64, u64>,
}

impl InOrderHasher {
    /// A hasher for a file of `size` bytes; `present` are ranges already in the file (resumed
    /// from an earlier run).
    pub fn new(algo: Algorithm, size: u64, present: &[(u64, u64)]) -> InOrderHasher {
        let mut h = InOrderHasher {
            hasher: algo.hasher(),
            size,
            at: 0,
            ahead: Default::default(),
        };
        for &(o, l) in present {
            h.note(o, l);
        }
        h
    }

    fn note(&mut self, offset: u64, len: u64) {
        let (mut a, mut b) = (
            offset.max(self.at),
            offset.saturating_add(len).min(self.size),
        );
        if a >= b {
            return;
        }
        // merge with overlapping or touching neighbours
        let touching: Vec<(u64, u64)> = self
            .ahead
            .range(..=b)
            .filter(|&(_, &e)| e >= a)
            .map(|(&s, &e)| (s, e))
            .collect();
        for (s, e) in touching {
            self.ahead.remove(&s);
            a = a.min(s);
            b = b.max(e);
        }
        self.ahead.insert(a, b);
    }

    /// Bytes `data` were written at `offset`: hashes them when they continue the digest,
    /// otherwise notes them for later.
    pub fn on_data(&mut self, offset: u64, data: &[u8]) {
        let end = offset + data.len() as u64;
        if offset <= self.at && end > self.at {
            let skip = (self.at - offset) as usize;
            self.hasher.update(&data[skip..]);
            self.at = end.min(self.size);
            // what was noted ahead and is now behind the position was hashed just now
            while let Some((&s, &e)) = self.ahead.first_key_value() {
                if s >= self.at {
                    break;
                }
                self.ahead.remove(&s);
                if e > self.at {
                    self.ahead.insert(self.at, e);
                }
            }
        } else {
            self.note(offset, data.len() as u64);
        }
    }

    /// Hashes noted ranges that the position has reached, reading them with `read_at(offset,
    /// buf)` (a positioned read of the file).
    pub fn catch_up(
        &mut self,
        mut read_at: impl FnMut(u64, &mut [u8]) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        let mut buf = Vec::new();
        while let Some((&s, &e)) = self.ahead.first_key_value() {
            if s > self.at {
                break;
            }
            self.ahead.remove(&s);
            let mut o = self.at;
            while o < e {
                let n = (e - o).min(1 << 20) as usize;
                buf.resize(n, 0);
                read_at(o, &mut buf)?;
                self.hasher.update(&buf);
                o += n as u64;
            }
            self.at = e;
        }
        Ok(())
    }

    /// Whether every byte of the file is hashed.
    pub fn complete(&self) -> bool {
        self.at >= self.size
    }

    /// The digest, once [`complete`](Self::complete); reading what is still missing first.
    pub fn finish(
        mut self,
        read_at: impl FnMut(u64, &mut [u8]) -> std::io::Result<()>,
    ) -> std::io::Result<Vec<u8>> {
        if !self.complete() {
            // whatever was not noted (a range written by a run that did not record it) is read
            // too: the file is complete when this is called
            self.ahead.clear();
            self.ahead.insert(self.at, self.size);
            self.catch_up(read_at)?;
        }
        Ok(self.hasher.finish())
    }
}

/// Parses a digest written by [`bytes_xxh3`] (16 hex digits).
pub fn parse_digest(hex: &str) -> Option<u64> {
    (hex.len() == 16)
        .then(|| u64::from_str_radix(hex, 16).ok())
        .flatten()
}

/// XXH3-64 of a byte slice, as 16 lowercase hex digits.
#[cfg(test)]
pub(crate) fn bytes_xxh3(data: &[u8]) -> String {
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
        assert_eq!(
            file_xxh3(&File::open(&p).unwrap()).unwrap(),
            bytes_xxh3(&data)
        );
        let empty = dir.path().join("empty");
        std::fs::write(&empty, b"").unwrap();
        assert_eq!(
            file_xxh3(&File::open(&empty).unwrap()).unwrap(),
            "2d06800538d394c2"
        );
    }

    #[test]
    fn digests_of_blocks_match_one_shot_hashes_of_each_block() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let data: Vec<u8> = (0..2_500_000u32).map(|i| (i * 13 % 253) as u8).collect();
        std::fs::write(&p, &data).unwrap();
        let (d, len) = file_digests(&File::open(&p).unwrap(), 1 << 20).unwrap();
        assert_eq!(len, data.len() as u64);
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
        assert_eq!(
            file_digests(&File::open(&small).unwrap(), 1 << 20)
                .unwrap()
                .0
                .blocks,
            None
        );
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

    #[test]
    fn every_algorithm_matches_its_published_vector_for_abc() {
        // FIPS 180-2 appendix examples, RFC 1321 §A.5, and `xxhsum -H0/-H1/-H2/-H3` 0.8.1
        let want = [
            (Algorithm::Md5, "900150983cd24fb0d6963f7d28e17f72"),
            (Algorithm::Sha1, "a9993e364706816aba3e25717850c26c9cd0d89d"),
            (
                Algorithm::Sha224,
                "23097d223405d8228642a477bda255b32aadbce4bda0b3f7e36c9da7",
            ),
            (
                Algorithm::Sha256,
                "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            ),
            (
                Algorithm::Sha384,
                "cb00753f45a35e8bb5a03d699ac65007272c32ab0eded1631a8b605a43ff5bed8086072ba1e7cc2358baeca134c825a7",
            ),
            (
                Algorithm::Sha512,
                "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f",
            ),
            (Algorithm::Xxh32, "32d153ff"),
            (Algorithm::Xxh64, "44bc2cf5ad770999"),
            (Algorithm::Xxh3_64, "78af5f94892f3950"),
            (Algorithm::Xxh128, "06b05ab6733a618578af5f94892f3950"),
            // RFC 7693 appendix A
            (
                Algorithm::Blake2b(64),
                "ba80a53f981c4d0d6a2797b69f12f6e94c212f14685ac4b74b12bb6fdbffa2d17d87c5392aab792dc252d5de4533cc9518d38aa8dbf1925ab92386edd4009923",
            ),
        ];
        assert_eq!(want.len(), Algorithm::ALL.len());
        for (a, hex) in want {
            let d = bytes_digest(a, b"abc");
            assert_eq!(to_hex(&d), hex, "{a}");
            assert_eq!(d.len(), a.digest_len(), "{a}");
            assert_eq!(from_hex(hex).unwrap(), d);
            // streaming in pieces gives the same digest
            let mut h = a.hasher();
            h.update(b"a");
            h.update(b"bc");
            assert_eq!(h.finish(), d, "{a}");
        }
        assert_eq!(
            to_hex(&bytes_digest(Algorithm::Xxh3_64, b"")),
            bytes_xxh3(b"")
        );
        assert_eq!(from_hex("0g"), None);
        assert_eq!(from_hex("abc"), None);
        assert_eq!(
            Algorithm::from_tag("XXH64_LE"),
            Some((Algorithm::Xxh64, true))
        );
        assert_eq!(Algorithm::from_tag("SHA256_LE"), None);
        assert_eq!(
            Algorithm::from_tag("BLAKE2b"),
            Some((Algorithm::Blake2b(64), false))
        );
        assert_eq!(
            Algorithm::from_tag("BLAKE2b-256"),
            Some((Algorithm::Blake2b(32), false))
        );
        for bad in [
            "BLAKE2b-255",
            "BLAKE2b-520",
            "BLAKE2b-0",
            "BLAKE2b-08",
            "BLAKE2b_LE",
            "BLAKE2s",
        ] {
            assert_eq!(Algorithm::from_tag(bad), None, "{bad}");
        }
        assert_eq!(Algorithm::Blake2b(64).name(), "blake2b");
        assert_eq!(Algorithm::Blake2b(20).name(), "blake2b-160");
        assert_eq!(Algorithm::blake2b(65), None);
        assert_eq!(Algorithm::blake2b(0), None);
        assert_eq!(Algorithm::from_aria2("SHA-256"), Some(Algorithm::Sha256));
        assert_eq!(Algorithm::from_aria2("adler32"), None);
    }

    #[test]
    fn in_order_hasher_gives_the_file_digest_whatever_the_arrival_order() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 31 % 253) as u8).collect();
        std::fs::write(&p, &data).unwrap();
        let f = File::open(&p).unwrap();
        let reads = std::cell::Cell::new(0u64);
        let mut read_at = |o: u64, b: &mut [u8]| {
            use std::os::unix::fs::FileExt;
            reads.set(reads.get() + b.len() as u64);
            f.read_exact_at(b, o)
        };
        let want = bytes_digest(Algorithm::Sha256, &data);
        // 15 pieces of 7 000 bytes in the order 0, 4, 8, 12, 1, 5, … (4 is prime to 15)
        let pieces: Vec<(u64, &[u8])> = data
            .chunks(7_000)
            .enumerate()
            .map(|(i, c)| ((i * 7_000) as u64, c))
            .collect();
        let order: Vec<usize> = (0..pieces.len()).map(|i| (i * 4) % pieces.len()).collect();
        let mut h = InOrderHasher::new(Algorithm::Sha256, data.len() as u64, &[]);
        for &i in &order {
            h.on_data(pieces[i].0, pieces[i].1);
            h.catch_up(&mut read_at).unwrap();
        }
        assert!(h.complete());
        assert_eq!(h.finish(&mut read_at).unwrap(), want);
        let read_out_of_order = reads.get();
        assert!(read_out_of_order > 0 && read_out_of_order < data.len() as u64);

        // in order: nothing is read back
        reads.set(0);
        let mut h = InOrderHasher::new(Algorithm::Sha256, data.len() as u64, &[]);
        for (o, c) in &pieces {
            h.on_data(*o, c);
            h.catch_up(&mut read_at).unwrap();
        }
        assert_eq!(h.finish(&mut read_at).unwrap(), want);
        assert_eq!(reads.get(), 0);

        // resumed: the first 30 000 bytes were there already, a duplicate piece is ignored
        let mut h = InOrderHasher::new(Algorithm::Md5, data.len() as u64, &[(0, 30_000)]);
        h.on_data(30_000, &data[30_000..60_000]);
        h.on_data(10_000, &data[10_000..20_000]);
        h.catch_up(&mut read_at).unwrap();
        assert_eq!(h.at, 60_000);
        h.on_data(60_000, &data[60_000..]);
        assert_eq!(
            h.finish(&mut read_at).unwrap(),
            bytes_digest(Algorithm::Md5, &data)
        );

        // a file whose bytes were never seen is read whole at the end
        let h = InOrderHasher::new(Algorithm::Xxh128, data.len() as u64, &[]);
        assert_eq!(
            h.finish(&mut read_at).unwrap(),
            bytes_digest(Algorithm::Xxh128, &data)
        );
        assert_eq!(
            file_digest(Algorithm::Sha512, &File::open(&p).unwrap()).unwrap(),
            bytes_digest(Algorithm::Sha512, &data)
        );
    }
}
