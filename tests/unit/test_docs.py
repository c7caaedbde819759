"""The manual holds together: README.md (the front page) and docs/**/*.md.

Every relative Markdown link points to an existing file (and, into a Markdown
file, to one of its headings), every ``docs/...`` path named exists, the front
page stays short and keeps CI's test command, and the code paths the manual
names exist."""

import glob
import re
from pathlib import Path
from typing import Dict, Iterator, List, Set

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MAX_README_LINES = 300
CI_COMMAND = "bash scripts/test.sh"  # CI runs the front page's test command

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.S | re.M)
INLINE_CODE = re.compile(r"`(?:[^`\n]|\n(?![ \t]*\n))+`")  # may wrap, not across a blank line
# [text](target) and ![alt](target), with an optional "title"; the text may hold brackets.
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
DOCS_PATH = re.compile(r"(?<![\w./-])docs/[\w./*-]*")
CODE_PATH = re.compile(r"(?<![\w./-])((?:fairseq_local|fairseq_local_data|scripts|tests)/[\w./*{},-]*)")
MODULE = re.compile(r"(?<![\w./-])(fairseq_local(?:_data)?(?:\.\w+)+)")  # python -m fairseq_local_data.wmt
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)  # http:, https:, mailto:, ...


def manual_files() -> List[Path]:
    """README.md and every Markdown file under docs/."""
    return [README] + sorted((ROOT / "docs").rglob("*.md"))


def rel(path: Path, root: Path = ROOT) -> str:
    return path.relative_to(root).as_posix()


def prose(text: str) -> str:
    """``text`` without fenced code blocks and inline code (links there are not links)."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def links(text: str) -> Iterator[str]:
    """The targets of the Markdown links and images of ``text``."""
    for match in LINK.finditer(prose(text)):
        yield match.group(1)


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped,
    spaces as hyphens (markup characters such as backticks are dropped too)."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> Set[str]:
    """The heading anchors of a Markdown file (a repeated heading gets -1, -2, ...)."""
    seen: Dict[str, int] = {}
    out = set()
    for line in FENCE.sub("", path.read_text(encoding="utf-8")).splitlines():
        match = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        base = slug(match.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def exists(pattern: str, root: Path = ROOT) -> bool:
    """Whether a path, a glob or a one-level ``{a,b}`` alternative names existing files."""
    brace = re.search(r"\{([^{}]*)\}", pattern)
    if brace:
        return all(exists(pattern[:brace.start()] + part + pattern[brace.end():], root)
                   for part in brace.group(1).split(","))
    if any(c in pattern for c in "*?["):
        return bool(glob.glob(str(root / pattern), recursive=True))
    return (root / pattern).exists()


def module_exists(dotted: str, root: Path = ROOT) -> bool:
    """Whether a dotted name is a module or package of the checkout, or an
    attribute of one (``fairseq_local.attention.config.AttentionConfig``)."""
    path = root
    for part in dotted.split("."):
        if (path / f"{part}.py").is_file():
            return True  # the rest names attributes of that module
        if not (path / part).is_dir():
            init = path / "__init__.py"  # an attribute a package exports
            return init.is_file() and re.search(rf"\b{part}\b", init.read_text(encoding="utf-8")) is not None
        path = path / part
    return True


def clean(path: str) -> str:
    """A path as named in text, without the sentence's closing punctuation."""
    return path.rstrip(".,:;)")


def broken_links(path: Path, root: Path = ROOT) -> List[str]:
    """The relative links of one Markdown file that point nowhere, as 'FILE: TARGET (why)'."""
    broken = []
    for target in links(path.read_text(encoding="utf-8")):
        if EXTERNAL.match(target):
            continue
        where, _, anchor = target.partition("#")
        dest = (path.parent / where).resolve() if where else path
        if not dest.exists():
            broken.append(f"{rel(path, root)}: {target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{rel(path, root)}: {target} (no heading #{anchor} in {rel(dest, root)})")
    return broken


def named_paths(pattern: re.Pattern, text: str) -> List[str]:
    return [clean(m.group(0)) for m in pattern.finditer(text)]


def backticked(text: str) -> List[str]:
    """The code spans of ``text`` (inline and fenced), where the manual names code."""
    spans = [m.group(0)[1:-1] for m in INLINE_CODE.finditer(FENCE.sub("", text))]
    return spans + [m.group(0) for m in FENCE.finditer(text)]


# The link checks on a small hand-made manual: they must fail on what is broken.
def test_link_check_finds_broken_links_and_anchors(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# Title\n\n## The `--x` option: a|b\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](docs/a.md) [ok](docs/a.md#the---x-option-ab) ![img](docs/a.md) [web](https://example.org)\n"
        "[bad](docs/missing.md) [bad anchor](docs/a.md#nope) `[code](docs/nothing.md)`\n"
        "```\n[fenced](docs/nothing.md)\n```\n", encoding="utf-8")
    assert broken_links(page, tmp_path) == ["page.md: docs/missing.md (no such file)",
                     "page.md: docs/a.md#nope (no heading #nope in docs/a.md)"]


def test_module_check():
    assert module_exists("fairseq_local.attention.config.AttentionConfig")
    assert module_exists("fairseq_local_cli")
    assert not module_exists("fairseq_local.attention.nowhere")


def test_slug_follows_github():
    assert slug("Attention implementations: `--attn-impl auto|dense|window|flex`") == \
        "attention-implementations---attn-impl-autodensewindowflex"
    assert slug("Architectures (Pande et al., Fig. 4, Tables 1–3)") == "architectures-pande-et-al-fig-4-tables-13"
    assert slug("WMT'14 data preparation") == "wmt14-data-preparation"


def test_the_manual_exists():
    names = {rel(p) for p in manual_files()}
    for topic in ("README", "model", "methods", "nmt", "bert", "analysis", "pipelines", "benchmark", "testing",
                  "architecture"):
        assert f"docs/{topic}.md" in names


@pytest.mark.parametrize("path", manual_files(), ids=rel)
def test_relative_links_point_to_files(path):
    assert broken_links(path) == []


@pytest.mark.parametrize("path", manual_files(), ids=rel)
def test_docs_paths_exist(path):
    missing = [p for p in named_paths(DOCS_PATH, path.read_text(encoding="utf-8")) if not exists(p)]
    assert missing == []


def test_readme_is_a_front_page():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES
    assert any(line.strip() == CI_COMMAND or line.startswith(CI_COMMAND + " ") for line in lines)
    # It opens with the two commands: the first code block is the demo, then the tests.
    first_block = FENCE.search("\n".join(lines)).group(0).splitlines()[1:-1]
    commands = [line.split("#")[0].strip() for line in first_block]
    assert commands == ["bash scripts/demo.sh", CI_COMMAND]


@pytest.mark.parametrize("path", manual_files(), ids=rel)
def test_code_paths_exist(path):
    spans = backticked(path.read_text(encoding="utf-8"))
    named = {clean(p) for span in spans for p in named_paths(CODE_PATH, span)}
    modules = {m.group(1) for span in spans for m in MODULE.finditer(span)}
    missing = sorted(p for p in named if not exists(p)) + sorted(m for m in modules if not module_exists(m))
    assert missing == []
