//! The book (`docs/`): the generated Reference is current (every CRD field, flag, reason and
//! metric has its entry), every internal link of the Markdown sources and of the README resolves
//! (file and heading), and — once `make docs` has built it — every link of the HTML resolves and
//! one page renders in headless Chromium (Debian's `chromium`) with its text and sidebar.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use capmox::packaging::reference;

/// The generated pages (made once per test binary: generating the CRDs is not free).
fn pages() -> &'static BTreeMap<String, String> {
    static PAGES: std::sync::OnceLock<BTreeMap<String, String>> = std::sync::OnceLock::new();
    PAGES.get_or_init(|| reference::generate(&repo()).unwrap())
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == ext) {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn reference_is_current() {
    let pages = pages();
    let dir = repo().join("docs/src/reference");
    for (name, text) in pages {
        let have = std::fs::read_to_string(dir.join(name)).unwrap_or_default();
        assert!(
            have == *text,
            "docs/src/reference/{name} is out of date: run `make docs`"
        );
    }
    for p in files(&dir, "md") {
        let text = std::fs::read_to_string(&p).unwrap();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            !text.starts_with(reference::GENERATED) || pages.contains_key(&name),
            "{name} is generated but no longer made: remove it"
        );
    }
}

#[test]
fn reference_covers_every_field_flag_reason_and_metric() {
    let pages = pages();
    let all: String = pages.values().cloned().collect();
    // Spot checks of each source, beyond the drift test above.
    for needle in [
        "| `spec.templateID` |",
        "| `spec.network.networkDevices[].bridge` |",
        "| `--watch-filter` | `CAPMOX_WATCH_FILTER` |",
        "| `--sync-period` |",
        "| `ProxmoxPermissionDenied` |",
        "| `controller_runtime_reconcile_total` | counter | `controller`, `result` |",
        "| `workqueue_depth` | gauge | `controller`, `name`, `priority` |",
    ] {
        assert!(all.contains(needle), "missing {needle:?}");
    }
    // Every flag of the command line is on the flags page.
    use clap::CommandFactory;
    for arg in capmox::cli::Cli::command().get_arguments() {
        if let Some(long) = arg.get_long().filter(|l| *l != "help" && *l != "version") {
            assert!(pages["flags.md"].contains(&format!("`--{long}`")), "--{long}");
        }
    }
    // Every reason of the code is on the reasons page.
    for r in reference::reasons(&repo()).unwrap().keys() {
        assert!(pages["reasons.md"].contains(&format!("| `{r}` |")), "{r}");
    }
}

/// mdbook's heading ids: lower case, spaces to `-`, only alphanumerics, `-` and `_` kept.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn headings(md: &str) -> BTreeSet<String> {
    let mut fence = false;
    md.lines()
        .filter(|l| {
            if l.starts_with("```") {
                fence = !fence;
            }
            !fence && l.starts_with('#')
        })
        .map(|l| slug(l.trim_start_matches('#')))
        .collect()
}

/// The relative link targets of Markdown text (outside code).
fn md_links(md: &str) -> Vec<String> {
    let re = regex::Regex::new(r"\]\(([^)\s]+)\)").unwrap();
    let code = regex::Regex::new(r"`[^`]*`").unwrap();
    let mut fence = false;
    let mut out = Vec::new();
    for line in md.lines() {
        if line.starts_with("```") {
            fence = !fence;
        }
        if fence {
            continue;
        }
        let line = code.replace_all(line, "");
        for c in re.captures_iter(&line) {
            let t = c[1].to_owned();
            if !t.contains("://") && !t.starts_with("mailto:") {
                out.push(t);
            }
        }
    }
    out
}

fn check_md_links(file: &Path, broken: &mut Vec<String>) {
    let text = std::fs::read_to_string(file).unwrap();
    for link in md_links(&text) {
        let (path, anchor) = link
            .split_once('#')
            .map_or((link.as_str(), None), |(p, a)| (p, Some(a)));
        let target = if path.is_empty() {
            file.to_owned()
        } else {
            file.parent().unwrap().join(path)
        };
        if !target.exists() {
            broken.push(format!("{}: {link} (no such file)", file.display()));
            continue;
        }
        if let Some(a) = anchor
            && target.extension().is_some_and(|e| e == "md")
            && !headings(&std::fs::read_to_string(&target).unwrap()).contains(a)
        {
            broken.push(format!("{}: {link} (no such heading)", file.display()));
        }
    }
}

#[test]
fn markdown_links_resolve() {
    let src = repo().join("docs/src");
    let mut broken = Vec::new();
    for f in files(&src, "md") {
        check_md_links(&f, &mut broken);
    }
    check_md_links(&repo().join("README.md"), &mut broken);
    check_md_links(&repo().join("charts/capmox-rs/README.md"), &mut broken);
    // Every page is in the table of contents, and every entry exists.
    let summary = std::fs::read_to_string(src.join("SUMMARY.md")).unwrap();
    for f in files(&src, "md") {
        let rel = f.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
        assert!(
            rel == "SUMMARY.md" || summary.contains(&format!("]({rel})")),
            "{rel} is not in SUMMARY.md"
        );
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The built book, or `None` with one line.
fn built_book() -> Option<PathBuf> {
    let book = repo().join("docs/book");
    if book.join("index.html").exists() {
        Some(book)
    } else {
        eprintln!("skipped: docs/book not built (make docs builds it, then runs this test)");
        None
    }
}

#[test]
fn html_links_resolve() {
    let Some(book) = built_book() else { return };
    let href = regex::Regex::new(r#"(?:href|src)="([^"]+)""#).unwrap();
    let id = regex::Regex::new(r#"\bid="([^"]+)""#).unwrap();
    let mut ids: BTreeMap<PathBuf, BTreeSet<String>> = BTreeMap::new();
    let pages = files(&book, "html");
    for p in &pages {
        let text = std::fs::read_to_string(p).unwrap();
        ids.insert(
            p.clone(),
            id.captures_iter(&text).map(|c| c[1].to_owned()).collect(),
        );
    }
    let mut broken = Vec::new();
    for p in &pages {
        let text = std::fs::read_to_string(p).unwrap();
        for c in href.captures_iter(&text) {
            let link = &c[1];
            // Site-absolute links (the 404 page's `/`) depend on where the book is served.
            if link.contains("://")
                || link.starts_with('/')
                || link.starts_with("mailto:")
                || link.starts_with("javascript:")
                || link.starts_with("data:")
            {
                continue;
            }
            let (path, anchor) = link.split_once('#').map_or((link, None), |(p, a)| (p, Some(a)));
            let path = path.split('?').next().unwrap_or("");
            let target = if path.is_empty() {
                p.clone()
            } else {
                p.parent().unwrap().join(path)
            };
            let target = if target.is_dir() {
                target.join("index.html")
            } else {
                target
            };
            if !target.exists() {
                broken.push(format!("{}: {link}", p.strip_prefix(&book).unwrap().display()));
            } else if let (Some(a), Some(set)) = (
                anchor.filter(|a| !a.is_empty()),
                ids.get(&std::fs::canonicalize(&target).unwrap_or(target.clone()))
                    .or_else(|| ids.get(&target)),
            ) && !set.contains(a)
            {
                broken.push(format!(
                    "{}: {link} (no such id)",
                    p.strip_prefix(&book).unwrap().display()
                ));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "broken links in the built book:\n{}",
        broken.join("\n")
    );
}

/// Debian's chromium, or `None` with one line.
fn chromium() -> Option<PathBuf> {
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .or_else(|| {
            eprintln!("skipped: chromium not found (.ci/run installs Debian's chromium)");
            None
        })
}

fn chromium_cmd(chromium: &Path, profile: &Path) -> Command {
    let mut c = Command::new(chromium);
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        "--virtual-time-budget=3000",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    c
}

#[test]
fn a_page_renders_in_chromium() {
    let Some(book) = built_book() else { return };
    let Some(chromium) = chromium() else { return };
    let page = book.join("getting-started.html");
    let url = format!("file://{}", page.display());
    let profile = tempfile::tempdir().unwrap();
    let dom = chromium_cmd(&chromium, profile.path())
        .arg("--dump-dom")
        .arg(&url)
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&dom.stdout);
    for text in [
        "Getting started on a real Proxmox",
        "pveum",
        "Troubleshooting",
        "Condition and event reasons",
    ] {
        assert!(dom.contains(text), "the rendered page lacks {text:?}");
    }
    let shot = std::env::var_os("CAPMOX_BOOK_SCREENSHOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| profile.path().join("page.png"));
    let out = chromium_cmd(&chromium, profile.path())
        .arg(format!("--screenshot={}", shot.display()))
        .arg("--window-size=1280,900")
        .arg(&url)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let png = std::fs::read(&shot).unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    // A blank page compresses to a few kilobytes; text, code blocks and the sidebar do not.
    assert!(
        png.len() > 40_000,
        "the screenshot looks empty ({} bytes)",
        png.len()
    );
    eprintln!("book page screenshot: {} ({} bytes)", shot.display(), png.len());
}
