"""The proofs behind version 1 of every kind (``codeversion.VERSIONS``): the ledger's first
records were made by the code of several commits, and the changes between them alter no record
the older code completed; and what keeps the versions' digests honest."""

import shutil

import pytest
from hypothesis import given
from hypothesis import strategies as st

from psnlib.replication.records import codeversion
from psnlib.response_metrics import distinct_forms
from psnlib.tasks.countdown import canonical_form, final_attempt


def _old_distinct_forms(correct: list[str]) -> int:
    """``distinct_forms`` as commit 246e8f5 computed it."""
    return len({canonical_form(c.strip()) for c in correct})


pieces = st.sampled_from(["7*3=21", "21+5=26", "26-4=22", "5-4=1", "3*7=21", " ", ",", "7", "x"])
texts = st.lists(pieces, max_size=8).map("".join)


@given(st.lists(texts, max_size=4))
def test_distinct_forms_is_unchanged_wherever_the_old_reading_did_not_raise(correct):
    try:
        old = _old_distinct_forms(correct)
    except ValueError:
        return  # the old code stopped here: no record was made from it
    assert distinct_forms(correct) == old


def test_a_correct_completion_with_an_earlier_attempt_is_read_at_its_last():
    found = "7 7*6=42,42-20=22"  # an earlier, broken attempt "7", then the judged one
    with pytest.raises(ValueError, match="malformed chain"):
        _old_distinct_forms([found])  # what stopped the round's task (issue 41)
    assert final_attempt(found) == "7*6=42,42-20=22"
    assert distinct_forms([found, "7*6=42,42-20=22"]) == 1


def test_the_digests_do_not_follow_their_own_bookkeeping():
    """``codeversion`` computes no result: pinning a digest in it must not move that digest."""
    for kind, roots in codeversion.ROOTS.items():
        assert "psnlib.replication.records.codeversion" not in codeversion.closure(roots), kind


def test_an_edit_of_the_task_moves_every_kinds_digest(tmp_path, monkeypatch):
    """How a task computes and stores its record (``jobs.run_task``) is code of every kind."""
    copy = tmp_path / "psnlib"
    shutil.copytree(codeversion.PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(codeversion, "PACKAGE", copy)
    before = {kind: codeversion.code_digest(kind) for kind in codeversion.VERSIONS}
    jobs = copy / "replication" / "compute" / "jobs.py"
    stored = "    ledger.write(record)\n"
    assert stored in jobs.read_text()
    jobs.write_text(jobs.read_text().replace(stored, '    record["extra"] = 1\n' + stored))
    after = {kind: codeversion.code_digest(kind) for kind in codeversion.VERSIONS}
    assert all(after[kind] != before[kind] for kind in before)
