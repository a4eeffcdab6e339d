"""``codeversion.SAME_RESULTS``: an old code version counts as current only where the change
provably alters no record the old code completed."""

import re

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
