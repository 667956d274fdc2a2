//! Publisher checksums (`--checksum-file URL|PATH`, and `checksum=` in a URL list): which
//! file each line is for, and hashing a file with a sequential digest as its bytes arrive.

use super::found::{Expected, Source, SourceFile};
use crate::client::net::conn::Connector;
use crate::client::net::fetch::get_following;
use crate::client::net::url::url_string;
use crate::client::net::url::HttpUrl;
use crate::dirindex::percent_decode_bytes;
use crate::error::{fail, failure, EngineResult};
use crate::summary::ChecksumFileReport;
use crate::sums::SumsFile;
use std::collections::HashMap;

/// Reads the checksum file `spec` (a URL, or a local path) and gives every file of `src` the
/// digest a line names it with. A line is for a file when its name is the file's URL relative
/// to the checksum file's own URL (as `sha256sum -c` run in that directory reads it), or, for
/// a local checksum file, the file's path under the destination (as `sha256sum -c` run there
/// reads it); else when its name is the longest run of path components that ends the file's
/// URL path, unless it ends two files' paths (an error). Also says whether the checksum file
/// came over plain HTTP (after redirects).
pub(crate) async fn attach(
    connector: &Connector,
    spec: &str,
    src: &mut Source,
) -> EngineResult<(ChecksumFileReport, bool)> {
    let (text, checksum_url, plain_http) = read_checksum_file(connector, spec).await?;
    let text = String::from_utf8(text).map_err(|_| {
        failure!(
            Usage,
            "--checksum-file {spec}: not UTF-8 text; is it a checksum file?"
        )
    })?;
    let sums = SumsFile::parse(&text, spec).map_err(|e| failure!(Usage, "--checksum-file {e}"))?;
    let checksum_dir = checksum_url
        .as_deref()
        .map(|u| &u[..u.rfind('/').map_or(0, |i| i + 1)]);
    let origins = &src.origins;
    let mut files: Vec<&mut SourceFile> = src
        .files
        .iter_mut()
        .chain(src.unsized_files.iter_mut())
        .collect();
    let mut m = LineMatch::by_name(&sums, checksum_dir, origins, &files);
    m.by_suffix(spec, &sums, &files)?;
    let mut matched = 0;
    for (k, f) in files.iter_mut().enumerate() {
        let Some(i) = m.line_of[k] else {
            continue;
        };
        let e = &sums.entries[i];
        matched += 1;
        // a URL list's own checksum= comes first
        if f.expect.is_none() {
            f.expect = Some(Expected {
                algo: e.algo,
                digest: e.digest.clone(),
                from: format!("{spec} line {}", e.line),
            });
        }
    }
    if matched == 0 {
        let names: Vec<&str> = sums
            .entries
            .iter()
            .take(3)
            .map(|e| e.name.as_str())
            .collect();
        let files: Vec<&str> = src.files.iter().take(3).map(|f| f.rel.as_str()).collect();
        fail!(
            Usage,
            "--checksum-file {spec}: none of its {} names ({}, …) is a file of this transfer ({}, …); give the checksum file that belongs to this source",
            sums.entries.len(),
            names.join(", "),
            files.join(", ")
        );
    }
    let report = ChecksumFileReport {
        source: spec.to_string(),
        algorithms: sums
            .algorithms()
            .iter()
            .map(|a| a.name().to_string())
            .collect(),
        entries: sums.entries.len(),
        matched,
        malformed_lines: sums.malformed,
    };
    Ok((report, plain_http))
}

/// The checksum file `spec`'s bytes, fetched (a URL, redirects followed) or read (a local
/// path); for one fetched, its final URL and whether it came over plain HTTP.
async fn read_checksum_file(
    connector: &Connector,
    spec: &str,
) -> EngineResult<(Vec<u8>, Option<String>, bool)> {
    let lower = spec.to_ascii_lowercase();
    if !(lower.starts_with("http://") || lower.starts_with("https://")) {
        let b = std::fs::read(spec)
            .map_err(|e| failure!(Usage, "--checksum-file {spec}: cannot read it ({e})"))?;
        return Ok((b, None, false));
    }
    let u = HttpUrl::parse(spec)?;
    let (fu, f) = get_following(connector, &u, "GET").await?;
    if f.head.status != 200 {
        fail!(
            Usage,
            "--checksum-file {spec}: HTTP {}; check the URL",
            f.head.status
        );
    }
    // where it came from in the end (a redirect may have left TLS behind)
    let plain_http = !fu.tls;
    // one spelling of the path, as the index walk writes file paths
    let path = fu.path.split('?').next().unwrap_or("/");
    let path = crate::dirindex::canonical_path(path).unwrap_or_else(|| path.to_string());
    Ok((f.body, Some(url_string(&fu, &path)), plain_http))
}

/// Which line of a checksum file is for which file of the source.
struct LineMatch {
    /// Per file: its line.
    line_of: Vec<Option<usize>>,
    /// Per line: a file's exact name took it.
    taken: Vec<bool>,
    /// Per file: its URL path's components, decoded.
    url_paths: Vec<Vec<String>>,
}

impl LineMatch {
    /// 1: a line names the file exactly: its URL relative to the checksum file's (a checksum
    /// file fetched by URL, in `checksum_dir`), or its path under DEST (a local one).
    fn by_name(
        sums: &SumsFile,
        checksum_dir: Option<&str>,
        origins: &[HttpUrl],
        files: &[&mut SourceFile],
    ) -> LineMatch {
        let mut m = LineMatch {
            line_of: vec![None; files.len()],
            taken: vec![false; sums.entries.len()],
            url_paths: Vec::with_capacity(files.len()),
        };
        for (k, f) in files.iter().enumerate() {
            let file_url = url_string(&origins[f.origin], &f.url_path);
            let mut names: Vec<String> = Vec::new();
            if let Some(rest) = checksum_dir.and_then(|d| file_url.strip_prefix(d)) {
                let rest = rest.split('?').next().unwrap_or(rest);
                if let Ok(n) = String::from_utf8(percent_decode_bytes(rest)) {
                    names.push(n);
                }
            }
            if checksum_dir.is_none() {
                // a local checksum file names files as `sha256sum -c` run in DEST reads them
                names.push(f.rel.clone());
            }
            if let Some(i) = sums.lookup(names.iter().map(String::as_str)) {
                m.line_of[k] = Some(i);
                m.taken[i] = true;
            }
            // the file's URL path, decoded, for the suffix match below
            let path = f.url_path.split(['?', '#']).next().unwrap_or("");
            let decoded = String::from_utf8(percent_decode_bytes(path)).unwrap_or_default();
            m.url_paths.push(components(&decoded));
        }
        m
    }

    /// 2: else the line whose name is the longest run of whole path components that ends the
    /// file's URL path (`with space/a b.dat` for `…/with%20space/a%20b.dat`, or just the file
    /// name for a URL list's `a b.dat`); a line that ends two such paths is an error, not a
    /// guess.
    fn by_suffix(
        &mut self,
        spec: &str,
        sums: &SumsFile,
        files: &[&mut SourceFile],
    ) -> EngineResult<()> {
        let entry_comps: Vec<Vec<String>> =
            sums.entries.iter().map(|e| components(&e.name)).collect();
        let mut suffix_of: HashMap<usize, Vec<usize>> = HashMap::new();
        for k in 0..files.len() {
            if self.line_of[k].is_some() {
                continue;
            }
            let best = (0..sums.entries.len())
                .filter(|&i| {
                    !self.taken[i]
                        && !entry_comps[i].is_empty()
                        && self.url_paths[k].ends_with(&entry_comps[i])
                })
                .max_by_key(|&i| entry_comps[i].len());
            if let Some(i) = best {
                suffix_of.entry(i).or_default().push(k);
            }
        }
        for (i, ks) in &suffix_of {
            if let [k] = ks.as_slice() {
                self.line_of[*k] = Some(*i);
            } else {
                let e = &sums.entries[*i];
                let names: Vec<&str> = ks.iter().take(3).map(|&k| files[k].rel.as_str()).collect();
                fail!(
                    Usage,
                    "--checksum-file {spec}: line {} ({}) ends the paths of {} files ({}); it cannot tell them apart, so none is taken as verified by it: give the checksum file by its URL beside the files, or one whose names are the files' paths",
                    e.line,
                    e.name,
                    ks.len(),
                    names.join(", ")
                );
            }
        }
        Ok(())
    }
}

/// The non-empty `/`-separated components of a path.
fn components(p: &str) -> Vec<String> {
    p.split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .map(str::to_string)
        .collect()
}
