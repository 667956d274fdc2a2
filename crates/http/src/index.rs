//! The HTML index of a served directory, for a browser (wattio clients read the JSON dataset
//! listing at `DIR/.wattio/listing.json` instead). Laid out as nginx's `autoindex` lays it out,
//! so that the tools that walk such pages (wget's recursion, rclone's http backend, wattio's
//! own directory-index source) read it: a `<pre>` of one link per entry, directories first and
//! each ending in `/`, then the modification time and the exact size in bytes. Names starting
//! with a dot are left out, as nginx leaves them out. Each name is percent-encoded in its link
//! and HTML-escaped in its text, so spaces, `%`, `#`, `&`, `;`, quotes and non-ASCII survive.

use crate::civil::civil_from_days;
use crate::protocol::percent_encode_path;
use std::fmt::Write;
use std::fs::{File, Metadata};
use std::os::unix::fs::MetadataExt;

/// The most entries one page lists (about 100 bytes each); past it the page says how many it
/// left out, so a directory of millions of files costs a bounded answer.
pub(crate) const MAX_ENTRIES: usize = 50_000;

/// One entry of a directory, as the page shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub name: String,
    pub is_dir: bool,
    pub size: u64,
    pub mtime: i64,
}

/// The entries of the open directory `dir`, directories first, each group by name, at most
/// [`MAX_ENTRIES`], and how many were left out (over the bound, or named in bytes that are not
/// UTF-8, which no request path can name). `follow` gives a symbolic link's target's metadata
/// when the link stays inside the served tree (`None`: left out, as the listing leaves it).
pub(crate) fn entries(
    dir: &File,
    follow: impl Fn(&str) -> Option<Metadata>,
) -> std::io::Result<(Vec<Entry>, usize)> {
    use rustix::fs::{statat, AtFlags, Dir, FileType};
    let mut out = Vec::new();
    let mut left_out = 0usize;
    for e in Dir::read_from(dir)? {
        let e = e?;
        let raw = e.file_name().to_bytes();
        if raw.first() == Some(&b'.') {
            continue;
        }
        let Ok(name) = std::str::from_utf8(raw) else {
            left_out += 1;
            continue;
        };
        if out.len() >= MAX_ENTRIES {
            left_out += 1;
            continue;
        }
        let st = match statat(dir, e.file_name(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            // Gone since the directory was read.
            Err(_) => continue,
        };
        let kind = FileType::from_raw_mode(st.st_mode);
        let entry = if kind == FileType::Symlink {
            match follow(name) {
                Some(md) if md.is_dir() || md.is_file() => Entry {
                    name: name.to_string(),
                    is_dir: md.is_dir(),
                    size: if md.is_dir() { 0 } else { md.len() },
                    mtime: md.mtime(),
                },
                _ => continue,
            }
        } else if kind == FileType::Directory || kind == FileType::RegularFile {
            Entry {
                name: name.to_string(),
                is_dir: kind == FileType::Directory,
                size: if kind == FileType::Directory {
                    0
                } else {
                    st.st_size as u64
                },
                mtime: st.st_mtime,
            }
        } else {
            // Devices, FIFOs and sockets are not served.
            continue;
        };
        out.push(entry);
    }
    out.sort_by(|a, b| b.is_dir.cmp(&a.is_dir).then_with(|| a.name.cmp(&b.name)));
    Ok((out, left_out))
}

/// `text` with `&`, `<`, `>`, `"` and `'` escaped for HTML text and attribute values.
fn escape(text: &str) -> String {
    let mut s = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => s.push_str("&amp;"),
            '<' => s.push_str("&lt;"),
            '>' => s.push_str("&gt;"),
            '"' => s.push_str("&quot;"),
            '\'' => s.push_str("&#39;"),
            c => s.push(c),
        }
    }
    s
}

/// `YYYY-MM-DD hh:mm` (UTC) of a Unix time.
fn date(t: i64) -> String {
    let (days, secs) = (t.div_euclid(86_400), t.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}",
        secs / 3600,
        secs % 3600 / 60
    )
}

/// The page for the directory at URL path `dir` (decoded, starting and ending with `/`).
pub(crate) fn page(dir: &str, entries: &[Entry], left_out: usize) -> String {
    let title = format!("Index of {}", escape(dir));
    let mut s = String::with_capacity(256 + entries.len() * 100);
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html>\n<head><meta charset=\"utf-8\"><title>{title}</title></head>\n<body>\n<h1>{title}</h1><hr><pre>"
    );
    if dir != "/" {
        s.push_str("<a href=\"../\">../</a>\n");
    }
    for e in entries {
        let slash = if e.is_dir { "/" } else { "" };
        let href = percent_encode_path(&e.name);
        let shown = format!("{}{slash}", e.name);
        // The name column is 50 characters wide, as nginx's; longer names push the rest along.
        let pad = 51usize.saturating_sub(shown.chars().count());
        let size = if e.is_dir {
            "-".to_string()
        } else {
            e.size.to_string()
        };
        let _ = writeln!(
            s,
            "<a href=\"{href}{slash}\">{}</a>{:pad$}{} {size:>19}",
            escape(&shown),
            "",
            date(e.mtime)
        );
    }
    s.push_str("</pre><hr>");
    if left_out > 0 {
        let _ = write!(
            s,
            "<p>{left_out} more entries are not shown (over {MAX_ENTRIES}, or named in bytes that are not UTF-8); the dataset listing has every file.</p>"
        );
    }
    // Named, not linked: a link would be one more entry to the tools that walk the page.
    let _ = write!(
        s,
        "<p>wattio clients read this directory's dataset listing (JSON, with sizes and checksums) at {}.wattio/listing.json</p>\n</body>\n</html>\n",
        escape(dir)
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_escaped_in_text_and_encoded_in_links() {
        let entries = vec![
            Entry {
                name: "a dir".into(),
                is_dir: true,
                size: 0,
                mtime: 0,
            },
            Entry {
                name: "50% & <more> \"q\" 'x' #1;é.txt".into(),
                is_dir: false,
                size: 1234,
                mtime: 1_796_622_830,
            },
        ];
        let p = page("/sub dir/", &entries, 2);
        assert!(p.contains("<title>Index of /sub dir/</title>"), "{p}");
        assert!(p.contains("<a href=\"../\">../</a>\n"), "{p}");
        assert!(p.contains("<a href=\"a%20dir/\">a dir/</a>"), "{p}");
        assert!(
            p.contains("<a href=\"50%25%20%26%20%3Cmore%3E%20%22q%22%20%27x%27%20%231%3B%C3%A9.txt\">50% &amp; &lt;more&gt; &quot;q&quot; &#39;x&#39; #1;é.txt</a>"),
            "{p}"
        );
        assert!(p.contains("2026-12-07 05:53                1234\n"), "{p}");
        assert!(p.contains("2 more entries are not shown"), "{p}");
        assert!(p.contains("at /sub dir/.wattio/listing.json</p>"), "{p}");
        assert_eq!(p.matches("<a href=").count(), 3, "{p}");
        assert!(!page("/", &entries, 0).contains("../"));
    }

    #[test]
    fn entries_list_directories_first_and_leave_out_dot_files_and_devices() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("z-dir")).unwrap();
        std::fs::write(d.path().join("b.txt"), "hello").unwrap();
        std::fs::write(d.path().join("a.txt"), "").unwrap();
        std::fs::write(d.path().join(".hidden"), "x").unwrap();
        std::os::unix::fs::symlink("b.txt", d.path().join("link")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", d.path().join("outside")).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            d.path().join("fifo"),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let dir = File::open(d.path()).unwrap();
        let root = std::fs::canonicalize(d.path()).unwrap();
        let (e, left_out) = entries(&dir, |name| {
            let target = std::fs::canonicalize(root.join(name)).ok()?;
            target.starts_with(&root).then(|| target.metadata().ok())?
        })
        .unwrap();
        let names: Vec<(&str, bool, u64)> = e
            .iter()
            .map(|e| (e.name.as_str(), e.is_dir, e.size))
            .collect();
        assert_eq!(
            names,
            vec![
                ("z-dir", true, 0),
                ("a.txt", false, 0),
                ("b.txt", false, 5),
                ("link", false, 5)
            ]
        );
        assert_eq!(left_out, 0);
    }
}
