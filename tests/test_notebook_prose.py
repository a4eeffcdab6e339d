"""The notebooks' prose is written once (issue 49): a paragraph two notebooks share (the arms'
common starting point, the pass@k estimator, the paired differences, the claims table, the
closing paragraph, the training-path gap) lives in docs/protocol.md section 4, and each notebook
links to it with a short sentence, keeping beside its code the equation it computes.

Measured on the notebooks when this test was written: the repeated paragraphs shared runs of 17
to 96 words (the paired-differences paragraph 77 in nine notebooks, "Every arm starts ..." 41 in
thirteen); once written once, the longest run two notebooks share is 14 words (a citation of
the released code, a quoted sentence of the PSN paper, the one-line links to the protocol).
``MAX_SHARED_WORDS`` sits between the two."""

import re
from itertools import combinations
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
PROTOCOL = ROOT / "docs" / "protocol.md"
MAX_SHARED_WORDS = 15  # two notebooks' markdown may share a run of at most this many words

DISPLAY_MATH = re.compile(r"\$\$.*?\$\$", re.S)  # an equation: a notebook keeps what it computes
INLINE_MATH = re.compile(r"\$[^$\n]*\$")
LINK_TARGET = re.compile(r"\]\([^)]*\)")
WORD = re.compile(r"[a-z0-9@]+(?:['’-][a-z0-9]+)*")
PROTOCOL_LINK = re.compile(r"\]\(\.\./docs/protocol\.md#([^)\s]+)\)")


def _markdown(path: Path) -> list[str]:
    cells = nbformat.read(path, as_version=4).cells
    return [c.source for c in cells if c.cell_type == "markdown"]


def _runs(text: str, n: int) -> set[tuple[str, ...]]:
    """Every run of ``n`` consecutive words of ``text``'s prose: math and link targets left out,
    a run never crossing a blank line or an equation."""
    runs = set()
    for part in re.split(r"\n\s*\n", DISPLAY_MATH.sub("\n\n", text)):
        words = WORD.findall(LINK_TARGET.sub("]", INLINE_MATH.sub(" ", part)).lower())
        runs |= {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}
    return runs


def shared_runs(texts: dict[str, list[str]], n: int) -> list[tuple[str, str, str]]:
    """Each pair of documents in ``texts`` (name: its markdown cells) that share a run of ``n``
    words, with one such run."""
    runs = {name: set().union(*(_runs(t, n) for t in cells)) for name, cells in texts.items()}
    return [
        (a, b, " ".join(min(runs[a] & runs[b])))
        for a, b in combinations(sorted(runs), 2)
        if runs[a] & runs[b]
    ]


def test_the_measure_finds_a_shared_paragraph_and_ignores_equations():
    paragraph = " ".join(f"word{i}" for i in range(MAX_SHARED_WORDS + 1))
    equation = "$$" + " ".join(f"x_{i}" for i in range(40)) + "$$"
    assert shared_runs({"a": [paragraph], "b": ["Intro.\n\n" + paragraph]}, MAX_SHARED_WORDS + 1)
    assert not shared_runs({"a": [equation], "b": [equation]}, MAX_SHARED_WORDS + 1)
    short = paragraph.rsplit(" ", 1)[0]  # one word fewer: allowed
    assert not shared_runs({"a": [short], "b": [short]}, MAX_SHARED_WORDS + 1)


def test_no_two_notebooks_share_a_paragraph():
    assert len(NOTEBOOKS) > 1
    texts = {path.stem: _markdown(path) for path in NOTEBOOKS}
    shared = shared_runs(texts, MAX_SHARED_WORDS + 1)
    assert not shared, (
        f"{len(shared)} pair(s) of notebooks repeat prose (write it once in docs/protocol.md "
        "section 4 and link to it), e.g.\n"
        + "\n".join(f"{a} and {b}: {run!r}" for a, b, run in shared[:10])
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_links_to_the_protocol_name_its_anchors(path):
    anchors = set(re.findall(r'<a id="([^"]+)"></a>', PROTOCOL.read_text()))
    linked = set(PROTOCOL_LINK.findall("\n".join(_markdown(path))))
    assert linked <= anchors, f"{path.name} links to missing anchors {sorted(linked - anchors)}"
