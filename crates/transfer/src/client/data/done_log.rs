//! The `.done` log kept beside a part file: a header — the server's validators of the version
//! whose bytes the part file holds ([`Validator`]) — then 16-byte records (offset, length,
//! little-endian) of the ranges whose data was on disk before the record was written (see
//! `FileJob::sync_records`). A log written before validators were recorded has no header and
//! is read as records only.

use crate::client::net::validator::Validator;

/// First 8 bytes of a `.done` log with a header (`WTIODON2` in ASCII, read as little-endian):
/// an offset no file reaches, so an older log's first record never reads as it.
const LOG_MAGIC: u64 = u64::from_le_bytes(*b"WTIODON2");

/// Longest header a log may announce (a damaged log is read as having none).
const MAX_HEADER: u64 = 4096;

/// One 16-byte record.
pub(crate) fn record(offset: u64, len: u64) -> [u8; 16] {
    let mut rec = [0u8; 16];
    rec[..8].copy_from_slice(&offset.to_le_bytes());
    rec[8..].copy_from_slice(&len.to_le_bytes());
    rec
}

/// The header a new log starts with: the magic and the validator's length, then the
/// validator padded to whole records.
pub(crate) fn log_header(v: Option<&Validator>) -> Vec<u8> {
    let body = v.map(Validator::encode).unwrap_or_default();
    let mut out = record(LOG_MAGIC, body.len() as u64).to_vec();
    out.extend_from_slice(&body);
    out.resize(out.len().div_ceil(16) * 16, 0);
    out
}

/// What a `.done` log holds: the validators of the version the part file is of, and the
/// finished ranges (offset, length).
pub(crate) type DoneLog = (Option<Validator>, Vec<(u64, u64)>);

/// A log's validator and finished ranges.
pub(crate) fn parse_log(b: &[u8]) -> DoneLog {
    let mut validator = None;
    let mut recs = b;
    if b.len() >= 16 && b[..8] == LOG_MAGIC.to_le_bytes() {
        let n = u64::from_le_bytes(b[8..16].try_into().unwrap());
        if n > MAX_HEADER {
            return (None, Vec::new());
        }
        let padded = n.div_ceil(16) * 16;
        if (b.len() as u64) < 16 + padded {
            return (None, Vec::new());
        }
        validator = Validator::decode(&b[16..16 + n as usize]);
        recs = &b[16 + padded as usize..];
    }
    // records are 16 bytes; a torn last record (crash mid-append) is ignored
    let ranges = recs
        .chunks_exact(16)
        .map(|r| {
            (
                u64::from_le_bytes(r[..8].try_into().unwrap()),
                u64::from_le_bytes(r[8..].try_into().unwrap()),
            )
        })
        .collect();
    (validator, ranges)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs_with_and_without_a_header_read_back() {
        let v = Validator {
            origin: "http://h:80".into(),
            etag: Some("\"abc\"".into()),
            last_modified: None,
        };
        let mut log = log_header(Some(&v));
        assert_eq!(log.len() % 16, 0);
        log.extend_from_slice(&record(0, 5));
        log.extend_from_slice(&record(9, 1));
        log.extend_from_slice(&[1, 2, 3]); // torn
        assert_eq!(parse_log(&log), (Some(v), vec![(0, 5), (9, 1)]));
        let old: Vec<u8> = record(4, 4).to_vec();
        assert_eq!(parse_log(&old), (None, vec![(4, 4)]));
        let mut empty = log_header(None);
        empty.extend_from_slice(&record(1, 2));
        assert_eq!(parse_log(&empty), (None, vec![(1, 2)]));
        // a header that claims more than the log holds reads as nothing done
        for claim in [1 << 40, u64::MAX, 4000] {
            let mut lie = record(LOG_MAGIC, claim).to_vec();
            lie.extend_from_slice(&record(0, 9));
            assert_eq!(parse_log(&lie), (None, vec![]), "{claim}");
        }
    }
}
