//! The `Content-Type` of a served file, from its extension, as nginx's default `mime.types`
//! gives it (<https://github.com/nginx/nginx/blob/master/conf/mime.types>, the file Debian's
//! nginx 1.22 installs), plus a few types that dataset trees hold and that file lacks (CSV,
//! Markdown and the compressed archives: `bz2, csv, gz, md, tar, xz, zst`, with their IANA
//! types). Matched case-insensitively on the part after the last dot; anything else, and a name
//! without an extension, is `application/octet-stream`, nginx's `default_type`.

/// (extension, type), sorted by extension for a binary search.
const TYPES: &[(&str, &str)] = &[
    ("3gp", "video/3gpp"),
    ("3gpp", "video/3gpp"),
    ("7z", "application/x-7z-compressed"),
    ("ai", "application/postscript"),
    ("asf", "video/x-ms-asf"),
    ("asx", "video/x-ms-asf"),
    ("atom", "application/atom+xml"),
    ("avi", "video/x-msvideo"),
    ("avif", "image/avif"),
    ("bin", "application/octet-stream"),
    ("bmp", "image/x-ms-bmp"),
    ("bz2", "application/x-bzip2"),
    ("cco", "application/x-cocoa"),
    ("crt", "application/x-x509-ca-cert"),
    ("css", "text/css"),
    ("csv", "text/csv"),
    ("deb", "application/octet-stream"),
    ("der", "application/x-x509-ca-cert"),
    ("dll", "application/octet-stream"),
    ("dmg", "application/octet-stream"),
    ("doc", "application/msword"),
    (
        "docx",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ),
    ("ear", "application/java-archive"),
    ("eot", "application/vnd.ms-fontobject"),
    ("eps", "application/postscript"),
    ("exe", "application/octet-stream"),
    ("flv", "video/x-flv"),
    ("gif", "image/gif"),
    ("gz", "application/gzip"),
    ("hqx", "application/mac-binhex40"),
    ("htc", "text/x-component"),
    ("htm", "text/html"),
    ("html", "text/html"),
    ("ico", "image/x-icon"),
    ("img", "application/octet-stream"),
    ("iso", "application/octet-stream"),
    ("jad", "text/vnd.sun.j2me.app-descriptor"),
    ("jar", "application/java-archive"),
    ("jardiff", "application/x-java-archive-diff"),
    ("jng", "image/x-jng"),
    ("jnlp", "application/x-java-jnlp-file"),
    ("jpeg", "image/jpeg"),
    ("jpg", "image/jpeg"),
    ("js", "application/javascript"),
    ("json", "application/json"),
    ("kar", "audio/midi"),
    ("kml", "application/vnd.google-earth.kml+xml"),
    ("kmz", "application/vnd.google-earth.kmz"),
    ("m3u8", "application/vnd.apple.mpegurl"),
    ("m4a", "audio/x-m4a"),
    ("m4v", "video/x-m4v"),
    ("md", "text/markdown"),
    ("mid", "audio/midi"),
    ("midi", "audio/midi"),
    ("mml", "text/mathml"),
    ("mng", "video/x-mng"),
    ("mov", "video/quicktime"),
    ("mp3", "audio/mpeg"),
    ("mp4", "video/mp4"),
    ("mpeg", "video/mpeg"),
    ("mpg", "video/mpeg"),
    ("msi", "application/octet-stream"),
    ("msm", "application/octet-stream"),
    ("msp", "application/octet-stream"),
    ("odg", "application/vnd.oasis.opendocument.graphics"),
    ("odp", "application/vnd.oasis.opendocument.presentation"),
    ("ods", "application/vnd.oasis.opendocument.spreadsheet"),
    ("odt", "application/vnd.oasis.opendocument.text"),
    ("ogg", "audio/ogg"),
    ("pdb", "application/x-pilot"),
    ("pdf", "application/pdf"),
    ("pem", "application/x-x509-ca-cert"),
    ("pl", "application/x-perl"),
    ("pm", "application/x-perl"),
    ("png", "image/png"),
    ("ppt", "application/vnd.ms-powerpoint"),
    (
        "pptx",
        "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    ),
    ("prc", "application/x-pilot"),
    ("ps", "application/postscript"),
    ("ra", "audio/x-realaudio"),
    ("rar", "application/x-rar-compressed"),
    ("rpm", "application/x-redhat-package-manager"),
    ("rss", "application/rss+xml"),
    ("rtf", "application/rtf"),
    ("run", "application/x-makeself"),
    ("sea", "application/x-sea"),
    ("shtml", "text/html"),
    ("sit", "application/x-stuffit"),
    ("svg", "image/svg+xml"),
    ("svgz", "image/svg+xml"),
    ("swf", "application/x-shockwave-flash"),
    ("tar", "application/x-tar"),
    ("tcl", "application/x-tcl"),
    ("tif", "image/tiff"),
    ("tiff", "image/tiff"),
    ("tk", "application/x-tcl"),
    ("ts", "video/mp2t"),
    ("txt", "text/plain"),
    ("war", "application/java-archive"),
    ("wasm", "application/wasm"),
    ("wbmp", "image/vnd.wap.wbmp"),
    ("webm", "video/webm"),
    ("webp", "image/webp"),
    ("wml", "text/vnd.wap.wml"),
    ("wmlc", "application/vnd.wap.wmlc"),
    ("wmv", "video/x-ms-wmv"),
    ("woff", "font/woff"),
    ("woff2", "font/woff2"),
    ("xhtml", "application/xhtml+xml"),
    ("xls", "application/vnd.ms-excel"),
    (
        "xlsx",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ),
    ("xml", "text/xml"),
    ("xpi", "application/x-xpinstall"),
    ("xspf", "application/xspf+xml"),
    ("xz", "application/x-xz"),
    ("zip", "application/zip"),
    ("zst", "application/zstd"),
];

/// The media type of a file named `name`.
pub(crate) fn content_type(name: &str) -> &'static str {
    let Some((_, ext)) = name.rsplit_once('.') else {
        return DEFAULT;
    };
    // No extension is longer than 8 bytes: a longer tail needs no lowercase copy.
    if ext.is_empty() || ext.len() > 8 {
        return DEFAULT;
    }
    let ext = ext.to_ascii_lowercase();
    TYPES
        .binary_search_by(|(e, _)| e.cmp(&ext.as_str()))
        .map_or(DEFAULT, |i| TYPES[i].1)
}

/// nginx's `default_type` in Debian's configuration.
pub(crate) const DEFAULT: &str = "application/octet-stream";

#[cfg(test)]
mod tests {
    use super::*;

    /// The extensions wattio types that nginx's `mime.types` does not.
    const BEYOND_NGINX: &[&str] = &["bz2", "csv", "gz", "md", "tar", "xz", "zst"];

    #[test]
    fn the_table_is_sorted_and_extensions_fit_the_length_bound() {
        assert!(TYPES.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(TYPES
            .iter()
            .all(|(e, _)| e.len() <= 8 && *e == e.to_ascii_lowercase()));
    }

    #[test]
    fn every_type_of_nginx_s_mime_types_is_given_as_nginx_gives_it() {
        // Debian's nginx package (make deps installs it) ships the file.
        let text = std::fs::read_to_string("/etc/nginx/mime.types")
            .expect("/etc/nginx/mime.types (Debian's nginx-common; run make deps)");
        let mut seen = 0;
        for line in text.lines().map(str::trim).filter(|l| l.ends_with(';')) {
            let mut words = line.trim_end_matches(';').split_whitespace();
            let media = words.next().unwrap();
            for ext in words {
                assert_eq!(content_type(&format!("f.{ext}")), media, "{ext}");
                assert_eq!(
                    content_type(&format!("F.{}", ext.to_uppercase())),
                    media,
                    "{ext}"
                );
                seen += 1;
            }
        }
        assert_eq!(
            seen + BEYOND_NGINX.len(),
            TYPES.len(),
            "entries beyond nginx's and ours"
        );
        assert_eq!(content_type("README"), DEFAULT);
        assert_eq!(content_type("archive.tar.gz"), "application/gzip");
        assert_eq!(content_type("x.unknownext"), DEFAULT);
        assert_eq!(content_type("trailing."), DEFAULT);
    }
}
