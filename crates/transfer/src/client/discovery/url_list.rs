//! URL lists and their mirrors at the start. In aria2's input-file format several URLs on
//! one line, separated by TABs, are sources of the same file (aria2c(1), "Input File",
//! <https://aria2.github.io/manual/en/html/aria2c.html#input-file>). Every URL of every line
//! is sized with `HEAD` (pipelined per server on connections kept from round to round, a few
//! lines at a time in the background, each file joining the transfer once sized); a file
//! starts on the first of its URLs that answers `200`. A mirror that answers with another size
//! than that one is not the same file: the transfer is refused, naming it. What happens to
//! mirrors during the transfer is `data::mirrors`.

use super::found::{
    merge_accept_ranges, origin_index, same_origin, Batch, Expected, MirrorPlan, Place, Source,
    SourceFile, SourceKind,
};
use crate::client::net::conn::{Connector, Stream};
use crate::client::net::fetch::{
    get_following, head_many_kept, probe_origin, size_by_range_probe, HEAD_CONNECTIONS, HEAD_DEPTH,
};
use crate::client::net::url::{url_string, HttpUrl};
use crate::error::{fail, failure, EngineResult};
use crate::summary::{failed_lines_message, FailedLine, MirrorFallback};
use crate::urllist::{UrlEntry, UrlList};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::{channel, Sender};
use wattio_http::ResponseHead;

/// How long the start waits for a TCP connection to the first line's first URL before it
/// tries that line's next one.
const REACH_TIMEOUT: Duration = Duration::from_secs(10);

/// Servers tried for [`first_reachable`] before it gives up and returns the first URL.
const REACH_TRIES: usize = 8;

/// The URL a URL-list transfer measures its round-trip time to and connects ahead to: the
/// first URL, in the list's order (each line's mirrors after it), whose server accepts a TCP
/// connection, among the first [`REACH_TRIES`] servers (the first URL when none does, so
/// that the error names it). Without `measure` (the RTT is given) and without mirrors on the
/// first line, the first URL is taken untried: a test connection would cost the start a round
/// trip, and a server that cannot be reached fails its lines when they are sized. A dead
/// first server thus leaves the RTT to the next one that answers and fails only its own lines.
pub(crate) async fn first_reachable(list: &UrlList, measure: bool) -> EngineResult<HttpUrl> {
    let e = &list.entries[0];
    let first = HttpUrl::parse(&e.url)?;
    if !measure && e.mirrors.is_empty() {
        return Ok(first);
    }
    let mut tried: Vec<HttpUrl> = Vec::new();
    let urls = list
        .entries
        .iter()
        .flat_map(|e| std::iter::once(&e.url).chain(&e.mirrors));
    for raw in urls {
        let Ok(u) = HttpUrl::parse(raw) else { continue };
        if tried.iter().any(|t| same_origin(t, &u)) {
            continue;
        }
        if tried.len() == REACH_TRIES {
            break;
        }
        tried.push(u.clone());
        let connect = tokio::net::TcpStream::connect(u.connect_addr());
        if let Ok(Ok(_)) = tokio::time::timeout(REACH_TIMEOUT, connect).await {
            return Ok(u);
        }
    }
    Ok(first)
}

fn without_fragment(path: &str) -> String {
    path.split('#').next().unwrap_or("/").to_string()
}

/// Lines sized by the first `HEAD` round of a URL list: as many as its connections answer in
/// one pipelined round trip (their handshakes cost the same for 16 lines as for 128), so the
/// transfer starts with files to spread over its channels and a fair sample of the list's
/// sizes; later rounds double, up to [`MOST_LINES_AT_ONCE`].
const FIRST_LINES_AT_ONCE: usize = HEAD_CONNECTIONS * HEAD_DEPTH;
const MOST_LINES_AT_ONCE: usize = HEAD_CONNECTIONS * HEAD_DEPTH * 4;
/// Rounds of sized lines that wait for the transfer to take them in before the sizing waits
/// too (see [`Discovery`](super::found::Discovery)).
const LIST_BATCHES_AHEAD: usize = 64;

/// Every URL of a URL list: (origin, request target, as written).
type ListedUrl = (usize, String, String);

/// A URL list: every URL of every line is parsed (a malformed one refuses the list before
/// anything is fetched), then sized by `HEAD` in the background, a few lines at a time
/// (pipelined per server; redirects followed one by one), each round's files joining the
/// transfer as a [`Batch`] as soon as they are sized; each file starts on the first of its
/// line's URLs that answers. Returns once a file with bytes is known.
pub(crate) async fn resolve_url_list(
    connector: &Arc<Connector>,
    list: UrlList,
    list_name: &str,
    first: &HttpUrl,
) -> EngineResult<Source> {
    let mut src = Source::new(SourceKind::UrlList, first);
    src.notes = list.notes.clone();
    src.files_expected = Some(list.entries.len());
    let mut urls: Vec<ListedUrl> = Vec::new();
    for e in &list.entries {
        for raw in std::iter::once(&e.url).chain(&e.mirrors) {
            let u = HttpUrl::parse(raw)
                .map_err(|err| failure!(Usage, "{list_name}:{}: {err:#}", e.line))?;
            let o = src.origin_index(&u);
            urls.push((o, without_fragment(&u.path), raw.clone()));
        }
    }
    // a list's rounds are small: many may wait (the sizing keeps its connections busy)
    let (tx, rx) = channel(LIST_BATCHES_AHEAD);
    let sizing = ListSizing {
        connector: connector.clone(),
        known_ranges: vec![None; src.origins.len()],
        announced: src.origins.len(),
        origins: src.origins.clone(),
        list_name: list_name.to_string(),
        unreachable: Vec::new(),
        answered: Vec::new(),
        idle: Vec::new(),
    };
    tokio::spawn(sizing.run(list.entries, urls, tx));
    src.until_first_bytes(rx).await?;
    let nothing_to_fetch = src.files.is_empty() && src.unsized_files.is_empty();
    if nothing_to_fetch && src.more.is_none() && !src.failed.is_empty() {
        fail!(
            InvalidSource,
            "no line of {list_name} could be fetched: {}; fix or remove those lines",
            failed_lines_message(&src.failed)
        );
    }
    Ok(src)
}

/// The background sizing of a URL list's lines.
struct ListSizing {
    connector: Arc<Connector>,
    /// The transfer's origins as this task knows them (redirects add to them).
    origins: Vec<HttpUrl>,
    /// Per origin: whether it honours `Range`, once an answer said so.
    known_ranges: Vec<Option<bool>>,
    /// Origins already sent in a batch (or known to the transfer from the start).
    announced: usize,
    list_name: String,
    /// Per origin: why it could not be reached, when it has not answered once in this
    /// transfer (a dead server, a certificate it is refused for); later rounds do not try it
    /// again. A server that answered before and then failed is tried again next round.
    unreachable: Vec<Option<String>>,
    /// Per origin: it answered a `HEAD`.
    answered: Vec<bool>,
    /// Per origin: the `HEAD` connections a round left open, for the next round.
    idle: Vec<Vec<Stream>>,
}

impl ListSizing {
    /// Sizes the lines round by round, sending each round's files and the lines that failed;
    /// ends with the first error, sent as an error.
    async fn run(
        mut self,
        entries: Vec<UrlEntry>,
        urls: Vec<ListedUrl>,
        out: Sender<EngineResult<Batch>>,
    ) {
        if let Err(e) = self.size_all(entries, urls, &out).await {
            let _ = out.send(Err(e)).await;
        }
    }

    async fn size_all(
        &mut self,
        entries: Vec<UrlEntry>,
        urls: Vec<ListedUrl>,
        out: &Sender<EngineResult<Batch>>,
    ) -> EngineResult<()> {
        let mut lines = entries.into_iter().peekable();
        let mut urls = urls.into_iter();
        let mut at_once = FIRST_LINES_AT_ONCE;
        while lines.peek().is_some() {
            let round: Vec<UrlEntry> = lines.by_ref().take(at_once).collect();
            at_once = (at_once * 2).min(MOST_LINES_AT_ONCE);
            let n: usize = round.iter().map(|e| 1 + e.mirrors.len()).sum();
            let round_urls: Vec<ListedUrl> = urls.by_ref().take(n).collect();
            let batch = self.size_round(round, round_urls).await?;
            if out.send(Ok(batch)).await.is_err() {
                // nobody listens any more: the transfer ended
                return Ok(());
            }
        }
        Ok(())
    }

    /// `HEAD` of every URL of a round, pipelined per server: a server that cannot be reached
    /// fails only the lines with no other URL that answers.
    async fn heads(&mut self, urls: &[ListedUrl]) -> Vec<Option<Result<ResponseHead, String>>> {
        let mut answers: Vec<Option<Result<ResponseHead, String>>> = vec![None; urls.len()];
        self.idle.resize_with(self.origins.len(), Vec::new);
        self.unreachable.resize(self.origins.len(), None);
        self.answered.resize(self.origins.len(), false);
        for o in 0..self.origins.len() {
            let idx: Vec<usize> = (0..urls.len()).filter(|&i| urls[i].0 == o).collect();
            if idx.is_empty() {
                continue;
            }
            if let Some(why) = &self.unreachable[o] {
                for i in idx {
                    answers[i] = Some(Err(why.clone()));
                }
                continue;
            }
            let paths: Vec<String> = idx.iter().map(|&i| urls[i].1.clone()).collect();
            let heads = head_many_kept(
                &self.connector,
                &self.origins[o],
                &paths,
                HEAD_CONNECTIONS,
                HEAD_DEPTH,
                &mut self.idle[o],
            )
            .await;
            match heads {
                Ok(hs) => {
                    self.answered[o] = true;
                    for (i, h) in idx.into_iter().zip(hs) {
                        answers[i] = Some(Ok(h));
                    }
                }
                Err(e) => {
                    let why = format!("cannot be reached: {}", e.flat_line());
                    for i in idx {
                        answers[i] = Some(Err(why.clone()));
                    }
                    if !self.answered[o] {
                        self.unreachable[o] = Some(why);
                    }
                }
            }
        }
        answers
    }

    /// Sizes one round of lines (`urls`: their URLs, in order) into a batch.
    async fn size_round(
        &mut self,
        entries: Vec<UrlEntry>,
        urls: Vec<ListedUrl>,
    ) -> EngineResult<Batch> {
        let mut answers = self.heads(&urls).await;
        let mut b = Batch::default();
        let mut next_url = 0;
        for e in entries {
            let n = 1 + e.mirrors.len();
            let line_urls = next_url..next_url + n;
            next_url += n;
            self.size_line(e, &urls[line_urls.clone()], &mut answers[line_urls], &mut b)
                .await?;
        }
        b.new_origins = self.origins[self.announced..].to_vec();
        self.announced = self.origins.len();
        b.ranges = self
            .known_ranges
            .iter()
            .enumerate()
            .filter_map(|(o, r)| r.map(|r| (o, r)))
            .collect();
        Ok(b)
    }

    /// One line of a round, from its URLs' answers: its file (sized or not) joins `b`, on the
    /// first of its URLs that answered, with its mirrors and the fallbacks the start made; or
    /// the line joins `b`'s failed lines when none answered.
    async fn size_line(
        &mut self,
        e: UrlEntry,
        urls: &[ListedUrl],
        answers: &mut [Option<Result<ResponseHead, String>>],
        b: &mut Batch,
    ) -> EngineResult<()> {
        let line = format!("{}:{}", self.list_name, e.line);
        let LineAnswers {
            places,
            chosen,
            validator,
            failed,
        } = self.line_answers(&line, urls, answers).await?;
        let Some((cur, size)) = chosen else {
            b.failed.push(failed_line(line, &places, &failed));
            return Ok(());
        };
        let fallbacks: Vec<MirrorFallback> = failed
            .iter()
            .filter(|(p, _)| *p < cur)
            .map(|(p, why)| MirrorFallback {
                from: places[*p].url.clone(),
                to: places[cur].url.clone(),
                reason: why.clone(),
                during: "start".into(),
            })
            .collect();
        if !fallbacks.is_empty() {
            b.notes.push(format!(
                "{line}: {} from its mirror {} ({} failed: {})",
                e.rel,
                places[cur].url,
                fallbacks[0].from,
                fallbacks
                    .iter()
                    .map(|f| f.reason.as_str())
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
        }
        let mut f = SourceFile::at(e.rel, places[cur].origin, places[cur].url_path.clone());
        if let Some(h) = &validator {
            f = f.with_validator(h, &self.origins[places[cur].origin]);
        }
        f.expect = e.checksum.map(|(algo, digest)| Expected {
            algo,
            digest,
            from: line.clone(),
        });
        if places.len() > 1 {
            f.mirrors = Some(Box::new(MirrorPlan {
                places,
                current: cur,
                fallbacks,
                line,
            }));
        }
        match size {
            Some(n) => b.files.push(SourceFile { size: n, ..f }),
            None => b.unsized_files.push(f),
        }
        Ok(())
    }

    /// A line's URLs (`urls`, with their `HEAD` `answers`), redirects followed: the first that
    /// answers `200` is the file's start, sized; a later one that answers another size is not
    /// the same file, which refuses the transfer.
    async fn line_answers(
        &mut self,
        line: &str,
        urls: &[ListedUrl],
        answers: &mut [Option<Result<ResponseHead, String>>],
    ) -> EngineResult<LineAnswers> {
        let mut a = LineAnswers {
            places: Vec::with_capacity(urls.len()),
            chosen: None,
            validator: None,
            failed: Vec::new(),
        };
        for (listed, answer) in urls.iter().zip(answers.iter_mut()) {
            let answer = answer.take().expect("every URL has an answer");
            let (o, path, answer) = self.follow(listed.clone(), answer).await?;
            let url = url_string(&self.origins[o], &path);
            let p = a.places.len();
            match answer {
                Ok(h) if h.status == 200 => {
                    merge_accept_ranges(&mut self.known_ranges[o], &h);
                    match a.chosen {
                        None => {
                            let size = self.size_of(o, &path, &h).await?;
                            a.chosen = Some((p, size));
                            a.validator = Some(h.clone());
                        }
                        Some((c, Some(size))) => {
                            if let Some(other) = h.content_length.filter(|&m| m != size) {
                                fail!(
                                    InvalidSource,
                                    "{line}: mirror {url} has {other} bytes but {} has {size}: not the same file; remove that mirror from the line",
                                    a.places[c].url
                                );
                            }
                        }
                        Some((_, None)) => {}
                    }
                }
                Ok(h) => a.failed.push((p, format!("HTTP {}", h.status))),
                Err(why) => a.failed.push((p, why)),
            }
            a.places.push(Place {
                origin: o,
                url_path: path,
                url,
            });
        }
        Ok(a)
    }

    /// A listed URL and its `HEAD` answer, with a redirect followed (its server joins the
    /// origins when new): the origin, the request target and the final answer.
    async fn follow(
        &mut self,
        listed: ListedUrl,
        mut answer: Result<ResponseHead, String>,
    ) -> EngineResult<(usize, String, Result<ResponseHead, String>)> {
        let (mut o, mut path, raw) = listed;
        if let Ok(h) = &answer {
            if matches!(h.status, 301 | 302 | 303 | 307 | 308) {
                let u = HttpUrl::parse(&raw)?;
                answer = match get_following(&self.connector, &u, "HEAD").await {
                    Ok((fu, f)) => {
                        o = origin_index(&mut self.origins, &mut self.known_ranges, &fu);
                        path = without_fragment(&fu.path);
                        Ok(f.head)
                    }
                    Err(err) => Err(format!("cannot be reached: {}", err.flat_line())),
                };
            }
        }
        Ok((o, path, answer))
    }

    /// The size of the file at `path` on origin `o` that answered `h`: its `Content-Length`,
    /// else a one-byte range probe's; a file with bytes on an origin that has not said
    /// whether it honours `Range` has it asked.
    async fn size_of(
        &mut self,
        o: usize,
        path: &str,
        h: &ResponseHead,
    ) -> EngineResult<Option<u64>> {
        let size = match h.content_length {
            Some(n) => Some(n),
            None => size_by_range_probe(&self.connector, &self.origins[o], path).await?,
        };
        if size.is_some_and(|n| n > 0) && self.known_ranges[o].is_none() {
            self.probe_ranges(o, path).await?;
        }
        Ok(size)
    }

    /// Whether origin `o`, whose answers did not say, honours `Range`: a request for the first
    /// byte of its file at `path` (`206`: yes; `200`: it sends whole files only).
    async fn probe_ranges(&mut self, o: usize, path: &str) -> EngineResult<()> {
        self.known_ranges[o] = Some(probe_origin(&self.connector, &self.origins[o], path).await?);
        Ok(())
    }
}

/// A line's URLs as their answers left them.
struct LineAnswers {
    places: Vec<Place>,
    /// The place the file starts on (the first that answered `200`), and its size.
    chosen: Option<(usize, Option<u64>)>,
    /// That answer, whose validators the file takes.
    validator: Option<ResponseHead>,
    /// The places that failed, and why.
    failed: Vec<(usize, String)>,
}

/// A line none of whose URLs answered: why each failed, in the order written.
fn failed_line(line: String, places: &[Place], failed: &[(usize, String)]) -> FailedLine {
    let answered = |why: &str| match why.strip_prefix("HTTP ") {
        Some(_) => format!("answers {why}"),
        None => why.to_string(),
    };
    let mut why = answered(&failed[0].1);
    let mirrors: Vec<String> = failed[1..]
        .iter()
        .map(|(p, w)| format!("{} {}", places[*p].url, answered(w)))
        .collect();
    if !mirrors.is_empty() {
        let s = if mirrors.len() == 1 { "" } else { "s" };
        why = format!("{why}, and its mirror{s} {}", mirrors.join(", "));
    }
    FailedLine {
        line,
        url: places[0].url.clone(),
        why,
    }
}
