"""``codeversion.SAME_RESULTS``: an old code version counts as current only where the change
provably alters no record the old code completed."""

import re
import shutil

import pytest
from hypothesis import given
from hypothesis import strategies as st

from psnlib.replication import codeversion
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


def test_only_the_listed_old_versions_count_as_current():
    for kind in codeversion.ROOTS:
        now = codeversion.code_version(kind)
        assert codeversion.current(kind, now)
        listed = codeversion.SAME_RESULTS[kind].get(now, frozenset())
        assert listed and all(codeversion.current(kind, v) for v in listed)
        assert now not in listed  # an entry names older versions
        assert not codeversion.current(kind, "0" * 12) and not codeversion.current(kind, None)
        for key, old in codeversion.SAME_RESULTS[kind].items():
            assert all(re.fullmatch(r"[0-9a-f]{12}", v) for v in {key, *old})


def test_an_entry_counts_only_while_the_code_is_at_its_version(monkeypatch):
    """The next change of the code makes the old versions' records stale with the current ones':
    an entry proven against one version does not vouch for the code after it."""
    old = {kind: next(iter(codeversion.SAME_RESULTS[kind].values())) for kind in codeversion.ROOTS}
    monkeypatch.setattr(codeversion, "code_version", lambda kind: "f" * 12)
    for kind, versions in old.items():
        assert not any(codeversion.current(kind, v) for v in versions)


def test_the_versions_do_not_follow_their_own_bookkeeping():
    """``codeversion`` computes no result: a ``SAME_RESULTS`` entry must not change the version
    it is keyed by (the premise and the probes reach this module through the ledger)."""
    for kind, roots in codeversion.ROOTS.items():
        assert "psnlib.replication.codeversion" not in codeversion.closure(roots), kind


# The task's glue (codeversion.GLUE) as commit 246e8f5, before the ledger's first record, defined
# it: codeversion.digest(codeversion.glue()) over `git archive 246e8f5 psnlib`.
GLUE_AT_246E8F5 = "df89b0abd7e9"
GLUE_ENTRY = {"base": "58df06360487", "run": "2e8c229c197a"}  # keys of the glue entry


def test_the_glue_entry_holds_while_it_is_current():
    """SAME_RESULTS lists every record's version under the versions that first counted the glue:
    that holds because the glue then was the glue that made every record (246e8f5's)."""
    for kind, key in GLUE_ENTRY.items():
        if codeversion.code_version(kind) == key:
            assert codeversion.digest(codeversion.glue()) == GLUE_AT_246E8F5


def _versions_of(package, monkeypatch) -> dict[str, str]:
    monkeypatch.setattr(codeversion, "PACKAGE", package)
    codeversion.code_version.cache_clear()
    try:
        return {kind: codeversion.code_version(kind) for kind in codeversion.ROOTS}
    finally:
        monkeypatch.undo()
        codeversion.code_version.cache_clear()


def test_an_edit_of_the_tasks_glue_changes_every_version_and_a_readers_none(tmp_path, monkeypatch):
    """How a task computes and stores its record (jobs.run_task) is code of every record; the
    ledger's readers in the same module (jobs.compute_by_machine) are not."""
    copy = tmp_path / "psnlib"
    shutil.copytree(codeversion.PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    before = _versions_of(copy, monkeypatch)
    jobs = copy / "replication" / "jobs.py"
    text = jobs.read_text()
    reader = 'table["cpu_hours"] = table["train_hours"] + table["eval_hours"]'
    assert reader in text
    jobs.write_text(text.replace(reader, reader + " * 1"))
    assert _versions_of(copy, monkeypatch) == before
    stored = "    ledger.write(record)\n"
    assert stored in text
    jobs.write_text(text.replace(stored, '    record["extra"] = 1\n' + stored))
    after = _versions_of(copy, monkeypatch)
    assert all(after[kind] != before[kind] for kind in before)


def test_a_glue_name_its_module_no_longer_defines_is_an_error(monkeypatch):
    monkeypatch.setitem(codeversion.GLUE, "psnlib.replication.jobs", ("run_task", "gone"))
    with pytest.raises(ValueError, match=r"GLUE names psnlib.replication.jobs.gone, which .*jobs"):
        codeversion.glue()
