//! The documentation holds together: README.md is a map of at most 300 lines, every page in
//! docs/ is linked from it, and every relative link in README.md and docs/*.md points at a file
//! that exists (and, into a Markdown page, at a heading it has).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const README_MAX_LINES: usize = 300;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace root").to_path_buf()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// The lines outside fenced code blocks.
fn prose(text: &str) -> Vec<&str> {
    let mut fenced = false;
    text.lines()
        .filter(|line| {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .collect()
}

/// Inline code spans blanked out (a `[x](y)` inside one is no link), keeping link texts whole.
fn without_code(line: &str) -> String {
    let mut out = String::new();
    let mut in_code = false;
    for c in line.chars() {
        if c == '`' {
            in_code = !in_code;
            out.push('x');
        } else if !in_code {
            out.push(c);
        }
    }
    out
}

/// The targets of the `[text](target)` links of a page.
fn links(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for line in prose(text) {
        let line = without_code(line);
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            match after.find(')') {
                Some(end) => {
                    found.push(after[..end].trim().to_string());
                    rest = &after[end..];
                }
                None => break,
            }
        }
    }
    found
}

/// GitHub's anchors for a page's headings: lowercase, punctuation dropped, spaces to dashes,
/// a repeated heading numbered.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    for line in prose(text) {
        let Some(title) = line.strip_prefix('#').map(|t| t.trim_start_matches('#')) else { continue };
        if !title.starts_with(' ') {
            continue;
        }
        let slug: String = title
            .trim()
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let mut unique = slug.clone();
        let mut n = 0;
        while seen.contains(&unique) {
            n += 1;
            unique = format!("{slug}-{n}");
        }
        seen.insert(unique);
    }
    seen
}

fn pages() -> Vec<PathBuf> {
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/ exists")
        .map(|e| e.expect("a docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    pages
}

#[test]
fn readme_is_a_map_of_at_most_300_lines() {
    let lines = read(&root().join("README.md")).lines().count();
    assert!(lines <= README_MAX_LINES, "README.md has {lines} lines, over {README_MAX_LINES}: move the detail to a page in docs/ and link it");
}

#[test]
fn every_docs_page_is_linked_from_the_readme() {
    let readme = read(&root().join("README.md"));
    let linked: BTreeSet<String> = links(&readme).iter().map(|l| l.split('#').next().unwrap_or("").to_string()).collect();
    let pages = pages();
    assert!(!pages.is_empty(), "docs/ holds no page");
    let missing: Vec<String> = pages
        .iter()
        .map(|p| format!("docs/{}", p.file_name().unwrap().to_string_lossy()))
        .filter(|p| !linked.contains(p))
        .collect();
    assert!(missing.is_empty(), "pages in docs/ that README.md does not link: {missing:?}");
}

#[test]
fn every_relative_link_points_at_a_file_and_heading_that_exist() {
    let mut broken = Vec::new();
    for page in std::iter::once(root().join("README.md")).chain(pages()) {
        let text = read(&page);
        let dir = page.parent().unwrap();
        for link in links(&text) {
            if link.contains("://") || link.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = match link.split_once('#') {
                Some((file, anchor)) => (file, Some(anchor)),
                None => (link.as_str(), None),
            };
            let target = if file.is_empty() { page.clone() } else { dir.join(file) };
            let name = page.strip_prefix(root()).unwrap().display().to_string();
            if !target.exists() {
                broken.push(format!("{name}: ({link}): no file {}", target.display()));
                continue;
            }
            if let Some(anchor) = anchor
                && target.extension().is_some_and(|e| e == "md")
                && !anchors(&read(&target)).contains(anchor)
            {
                broken.push(format!("{name}: ({link}): no heading #{anchor} in {}", target.strip_prefix(root()).unwrap_or(&target).display()));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_link_reader_reads_links_and_anchors_as_github_does() {
    assert_eq!(links("see [the `x`](a.md#b) and `[no](link)`, [c](d)\n```\n[e](f)\n```"), ["a.md#b", "d"]);
    let a = anchors("# Rule sets: `ZundokoRules`\n## CPU per word and latency, measured\n## A\n## A\n```\n# not a heading\n```");
    assert!(a.contains("rule-sets-zundokorules") && a.contains("cpu-per-word-and-latency-measured") && a.contains("a-1"), "{a:?}");
    assert!(!a.contains("not-a-heading"));
}
