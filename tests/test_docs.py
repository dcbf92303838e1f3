"""The docs an operator starts from (issue 27, item 8): the generated reference pages are current
(`scripts/gen_docs.py --check`), and every relative link of README.md and docs/*.md points to a
file that exists."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def test_generated_pages_are_current():
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_docs.py"), "--check"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, f"stale generated docs: {proc.stderr.strip()}"


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def relative_links(page: Path) -> list[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))  # code blocks hold examples, not links
    text = re.sub(r"`[^`\n]*`", "", text)
    return [t for t in LINK.findall(text) if not re.match(r"^[a-z][a-z0-9+.-]*:|^#", t)]


def test_every_relative_link_points_to_a_file():
    broken = []
    for page in pages():
        for target in relative_links(page):
            path = (page.parent / target.split("#", 1)[0]).resolve()
            if not path.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_docs_pages_are_linked_from_the_readme():
    linked = {(ROOT / t.split("#", 1)[0]).resolve() for t in relative_links(ROOT / "README.md")}
    unlinked = [p.name for p in sorted((ROOT / "docs").glob("*.md")) if p.resolve() not in linked]
    assert not unlinked, f"docs pages the README does not link: {unlinked}"


def test_check_notices_a_stale_page(tmp_path, monkeypatch):
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import gen_docs
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    monkeypatch.setattr(gen_docs, "ROOT", tmp_path)
    (tmp_path / "docs").mkdir()
    assert gen_docs.main(["--check"]) == 1  # missing pages are stale
    assert gen_docs.main([]) == 0
    assert gen_docs.main(["--check"]) == 0
    (tmp_path / "docs" / "lint.md").write_text("hand-edited\n", encoding="utf-8")
    assert gen_docs.main(["--check"]) == 1
