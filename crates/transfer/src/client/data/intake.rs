//! What the transfer learns from its sources as files arrive ([`Intake`]), and the files found
//! while it runs joining the transfer ([`add_found`]).

use super::claims::Claims;
use super::dest::{is_reserved, Dest, DONE_SUFFIX, PART_SUFFIX};
use super::queue::enqueue_found;
use super::resume::{prepare, worth_asking, Prepared};
use super::state::Shared;
use super::verify::finish_file;
use crate::client::discovery::found::{Batch, Source, SourceFile, SourceKind};
use crate::client::net::conn::Connector;
use crate::client::net::fetch::{head_many, probe_origin, HEAD_CONNECTIONS, HEAD_DEPTH};
use crate::client::net::url::url_string;
use crate::client::net::url::HttpUrl;
use crate::client::options::Notice;
use crate::error::{fail, failure, EngineResult, Kind};
use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc::UnboundedSender;
use wattio_progress::Sink;
use wattio_tuner::TransferPlan;

/// What the transfer learns from its sources besides the sized files it plans: which servers
/// ignore `Range`, how many files and planned bytes there are, and where files of unknown size
/// go (the streaming task, while discovery may still find some). Every file passes through it
/// once, whatever found it, so it is also where what a source may not do is refused: two files
/// for one output path, names wattio keeps for itself, sizes that overflow or do not fit DEST.
pub(crate) struct Intake {
    /// Per origin: it ignores Range, so each of its files comes as one whole-file stream.
    pub(crate) whole: Vec<bool>,
    /// Per origin: no answer has spoken for Range yet; its first file found later decides.
    pub(crate) undecided: Vec<bool>,
    /// The summary's lines on whole-file streams.
    pub(crate) whole_file_streams: Vec<String>,
    pub(crate) n_files: usize,
    pub(crate) planned_bytes: u64,
    pub(crate) unsized_tx: Option<UnboundedSender<SourceFile>>,
    pub(crate) dest: Arc<Dest>,
    /// Output paths taken so far, with the URL each comes from (one entry per file of the
    /// source, kept for the whole run).
    pub(crate) claimed: Claims,
    /// Directories the output paths so far need.
    pub(crate) dirs: HashSet<String>,
    /// The source is an index, whose pages may list a file twice (the same URL for the same
    /// path): the second listing is dropped, not refused (see `Source::absorb`).
    pub(crate) index: bool,
    /// Bytes still to fetch of the files prepared so far, and DEST's free space at the start.
    pub(crate) needed_bytes: u64,
    pub(crate) free_bytes: Option<u64>,
}

impl Intake {
    /// What `src` knows before the transfer starts; its files of unknown size go to
    /// `unsized_tx` now, and later ones too while `more_to_come`.
    pub(crate) fn start(
        src: &mut Source,
        unsized_tx: UnboundedSender<SourceFile>,
        more_to_come: bool,
        dest: &Arc<Dest>,
    ) -> EngineResult<Intake> {
        let whole: Vec<bool> = src.ranges.iter().map(|r| *r == Some(false)).collect();
        let whole_file_streams = (0..src.origins.len())
            .filter(|&o| whole[o])
            .map(|o| ignores_ranges(&src.origins[o]))
            .collect();
        let mut intake = Intake {
            undecided: src.ranges.iter().map(Option::is_none).collect(),
            whole,
            whole_file_streams,
            n_files: 0,
            planned_bytes: 0,
            unsized_tx: None,
            dest: dest.clone(),
            claimed: Claims::default(),
            dirs: HashSet::new(),
            index: matches!(src.kind, SourceKind::Index(_)),
            needed_bytes: 0,
            free_bytes: None,
        };
        intake.count(&mut src.files, &mut src.unsized_files, &src.origins)?;
        // the claims drop an index's repeats from here on
        src.seen = HashSet::new();
        for f in std::mem::take(&mut src.unsized_files) {
            let _ = unsized_tx.send(f);
        }
        intake.unsized_tx = more_to_come.then_some(unsized_tx);
        Ok(intake)
    }

    /// Counts a batch's files and bytes, claiming their output paths; an index's file listed
    /// again is dropped from the batch.
    pub(crate) fn count(
        &mut self,
        files: &mut Vec<SourceFile>,
        unsized_files: &mut Vec<SourceFile>,
        origins: &[HttpUrl],
    ) -> EngineResult<()> {
        for list in [&mut *files, &mut *unsized_files] {
            let mut err = Ok(());
            list.retain(|f| {
                err.is_ok()
                    && match self.claim(&f.rel, f.origin, &f.url_path, origins) {
                        Ok(new) => new,
                        Err(e) => {
                            err = Err(e);
                            false
                        }
                    }
            });
            err?;
        }
        for f in files.iter() {
            self.planned_bytes = self.planned_bytes.checked_add(f.size).ok_or_else(|| {
                failure!(
                    InvalidSource,
                    "the source's sizes add up to more than 16 EiB ({} claims {} bytes): a broken or hostile server; refusing it",
                    f.rel,
                    f.size
                )
            })?;
        }
        self.n_files += files.len() + unsized_files.len();
        Ok(())
    }

    /// Takes `rel` as an output path for the file at `url_path` on `origin`: refused when
    /// another file of the source has it, when a file and a directory of the source would
    /// share a path, and for the names of wattio's own temporary files. False: an index
    /// listed this very file before (it is dropped).
    pub(crate) fn claim(
        &mut self,
        rel: &str,
        origin: usize,
        url_path: &str,
        origins: &[HttpUrl],
    ) -> EngineResult<bool> {
        let from = url_string(&origins[origin], url_path);
        if is_reserved(rel) {
            fail!(
                InvalidSource,
                "{from}: its name {rel} ends in {PART_SUFFIX} or {DONE_SUFFIX}, which wattio keeps for its temporary files; refusing the source (rename that file on the server, or give it another out= in a URL list)"
            );
        }
        if let Some(prev) = self.claimed.get(rel) {
            if self.index && prev.origin == origin && prev.url_path == url_path {
                return Ok(false);
            }
            fail!(
                InvalidSource,
                "two files of the source go to the same path {}: {} and {from}; wattio will not guess which to keep (fix the listing, or the out= of those URL-list lines)",
                self.dest.shown(rel),
                url_string(&origins[prev.origin], prev.url_path)
            );
        }
        if self.dirs.contains(rel) {
            fail!(
                InvalidSource,
                "{} would be both a file ({from}) and a directory of other files of the source; refusing the source",
                self.dest.shown(rel)
            );
        }
        let parents: Vec<&str> = rel.match_indices('/').map(|(i, _)| &rel[..i]).collect();
        if let Some(prev) = parents.iter().find_map(|p| self.claimed.get(p)) {
            fail!(
                InvalidSource,
                "{} would be both a file ({}) and the directory of {from}; refusing the source",
                self.dest.shown(prev.rel),
                url_string(&origins[prev.origin], prev.url_path)
            );
        }
        for p in parents {
            if !self.dirs.contains(p) {
                self.dirs.insert(p.to_string());
            }
        }
        if self.claimed.insert(rel, origin, url_path).is_err() {
            fail!(
                InvalidSource,
                "{from}: its name is longer than 4 MiB: a broken or hostile server; refusing the source"
            );
        }
        Ok(true)
    }

    /// Prepares sized files (see [`prepare`]) after asking their servers, for the files an
    /// earlier run finished without a checksum to check them by, whether they are still the
    /// version it fetched (pipelined `HEAD`s, see [`worth_asking`]); refuses a batch whose
    /// missing bytes do not fit in DEST's free space.
    pub(crate) async fn prepare(
        &mut self,
        mut files: Vec<SourceFile>,
        src: &Source,
        connector: &Arc<Connector>,
    ) -> EngineResult<Prepared> {
        // the files an earlier run finished, with validators and no checksum
        let dest = self.dest.clone();
        let whole = self.whole.clone();
        let (files_back, ask) = tokio::task::spawn_blocking(move || {
            let ask: Vec<usize> = (0..files.len())
                .filter(|&i| {
                    !whole.get(files[i].origin).copied().unwrap_or(false)
                        && worth_asking(&dest, &files[i])
                })
                .collect();
            (files, ask)
        })
        .await?;
        files = files_back;
        for o in 0..src.origins.len() {
            let idx: Vec<usize> = ask
                .iter()
                .copied()
                .filter(|&i| files[i].origin == o)
                .collect();
            if idx.is_empty() {
                continue;
            }
            let paths: Vec<String> = idx.iter().map(|&i| files[i].url_path.clone()).collect();
            let heads = head_many(
                connector,
                &src.origins[o],
                &paths,
                HEAD_CONNECTIONS,
                HEAD_DEPTH,
            )
            .await?;
            for (i, h) in idx.into_iter().zip(heads) {
                if h.status == 200 {
                    let f = std::mem::replace(
                        &mut files[i],
                        SourceFile::at(String::new(), 0, String::new()),
                    );
                    files[i] = f.with_validator(&h, &src.origins[o]);
                }
            }
        }
        let dest = self.dest.clone();
        let whole = self.whole.clone();
        let origins: Vec<String> = src.origins.iter().map(HttpUrl::origin).collect();
        let p =
            tokio::task::spawn_blocking(move || prepare(&dest, files, &whole, &origins)).await??;
        let needed: u64 = p
            .jobs
            .iter()
            .map(|j| j.remaining.load(Ordering::SeqCst))
            .fold(0u64, u64::saturating_add);
        self.needed_bytes = self.needed_bytes.saturating_add(needed);
        if self.free_bytes.is_none() {
            let dest = self.dest.clone();
            self.free_bytes = tokio::task::spawn_blocking(move || dest.free_bytes().ok()).await?;
        }
        if let Some(free) = self.free_bytes.filter(|&f| self.needed_bytes > f) {
            let no_space = Kind::NoSpace {
                needed_bytes: self.needed_bytes,
                free_bytes: free,
            };
            return Err(no_space
                .msg(format!(
                    "the files to fetch need {} bytes, but {} has {free} bytes free; free some space or give another DEST",
                    self.needed_bytes,
                    self.dest.shown("")
                ))
                .into());
        }
        Ok(p)
    }

    /// Takes in a batch discovery found: tells its notes, adds its servers (to `origins` too,
    /// the channels' list, once the transfer runs), records what they said of Range (asking
    /// one that has not said once a file of it needs ranges: see `needs_ranges` in the
    /// start-up) and passes its files of unknown size on; returns its sized files prepared.
    pub(crate) async fn take(
        &mut self,
        mut batch: Batch,
        src: &mut Source,
        origins: Option<&Mutex<Vec<HttpUrl>>>,
        connector: &Arc<Connector>,
        needs_ranges: &dyn Fn(&SourceFile) -> bool,
        notices: &Sink<Notice>,
    ) -> EngineResult<Prepared> {
        for note in &batch.notes {
            notices.tell(&Notice::Note(note.to_string()));
        }
        src.notes.extend(batch.notes);
        src.failed.extend(batch.failed);
        for u in batch.new_origins {
            if let Some(o) = origins {
                o.lock().unwrap().push(u.clone());
            }
            src.origins.push(u);
            self.whole.push(false);
            self.undecided.push(true);
        }
        for (o, ranges) in batch.ranges {
            if std::mem::take(&mut self.undecided[o]) && !ranges {
                self.mark_whole(o, &src.origins[o]);
            }
        }
        // until a file needs ranges its server's answer does not matter: a file requested
        // whole comes whole either way
        for f in &batch.files {
            let o = f.origin;
            if self.undecided[o] && f.size > 0 && needs_ranges(f) {
                self.undecided[o] = false;
                if !probe_origin(connector, &src.origins[o], &f.url_path).await? {
                    self.mark_whole(o, &src.origins[o]);
                }
            }
        }
        self.count(&mut batch.files, &mut batch.unsized_files, &src.origins)?;
        if let Some(tx) = &self.unsized_tx {
            for f in batch.unsized_files {
                let _ = tx.send(f);
            }
        }
        self.prepare(batch.files, src, connector).await
    }

    /// Origin `o` ignores Range: each of its files comes as one whole-file stream.
    pub(crate) fn mark_whole(&mut self, o: usize, origin: &HttpUrl) {
        self.whole[o] = true;
        self.whole_file_streams.push(ignores_ranges(origin));
    }
}

/// Adds files found while the transfer runs: each joins the file list, then its missing
/// ranges join a queue (so a channel never sees a chunk of a file it cannot look up); a file
/// with nothing missing is finished at once.
pub(crate) async fn add_found(
    sh: &Arc<Shared>,
    plan: &TransferPlan,
    p: Prepared,
) -> EngineResult<()> {
    sh.verified.fetch_add(p.earlier.verified, Ordering::SeqCst);
    for (job, missing) in p.jobs.into_iter().zip(p.missing) {
        let complete = job.remaining.load(Ordering::SeqCst) == 0;
        let i = sh.files.push(job);
        if complete {
            let sh = sh.clone();
            tokio::task::spawn_blocking(move || finish_file(&sh, i)).await?;
        } else {
            enqueue_found(&sh.parts, plan, i, &sh.files[i], &missing);
        }
    }
    Ok(())
}

/// The summary's line for a server that ignores `Range`.
pub(crate) fn ignores_ranges(origin: &crate::client::net::url::HttpUrl) -> String {
    format!(
        "{} ignores Range requests: each of its files came as one whole-file stream (no parallel ranges within a file; a file cut short restarts)",
        origin.origin()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dirindex::IndexKind;
    use tokio::sync::mpsc::unbounded_channel;

    fn file(rel: &str, path: &str) -> SourceFile {
        SourceFile {
            size: 1,
            ..SourceFile::at(rel.into(), 0, path.into())
        }
    }

    fn rels(files: &[SourceFile]) -> Vec<&str> {
        files.iter().map(|f| f.rel.as_str()).collect()
    }

    /// An index's file listed on two pages is taken once (the walk keeps no set of every path
    /// for it); two URLs for one path are refused, and so is a URL list's line repeated.
    #[test]
    fn a_file_an_index_lists_again_is_dropped_and_a_clash_refused() {
        let d = tempfile::tempdir().unwrap();
        let dest = Arc::new(Dest::open(d.path(), true).unwrap());
        let origin = HttpUrl::parse("http://h:80/").unwrap();
        let mut src = Source::new(SourceKind::Index(IndexKind::NginxHtml), &origin);
        let (tx, _rx) = unbounded_channel();
        let mut intake = Intake::start(&mut src, tx, true, &dest).unwrap();
        let mut first = vec![file("a", "/a"), file("d/b", "/d/b")];
        intake
            .count(&mut first, &mut Vec::new(), &src.origins)
            .unwrap();
        assert_eq!(rels(&first), ["a", "d/b"]);
        let mut again = vec![file("d/b", "/d/b"), file("c", "/c")];
        intake
            .count(&mut again, &mut Vec::new(), &src.origins)
            .unwrap();
        assert_eq!(rels(&again), ["c"]);
        assert_eq!(intake.n_files, 3);
        let clash = intake.count(&mut vec![file("a", "/%61")], &mut Vec::new(), &src.origins);
        assert!(format!("{:#}", clash.unwrap_err()).contains("same path"));

        let mut list = Source::new(SourceKind::UrlList, &origin);
        let (tx, _rx) = unbounded_channel();
        let mut intake = Intake::start(&mut list, tx, true, &dest).unwrap();
        let twice = intake.count(
            &mut vec![file("a", "/a"), file("a", "/a")],
            &mut Vec::new(),
            &list.origins,
        );
        assert!(format!("{:#}", twice.unwrap_err()).contains("same path"));
    }
}
