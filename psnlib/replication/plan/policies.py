"""A starting policy's identity: the hash of its spec (``spec_hash``), its name
(``policy_name``), where it is kept (``policy_dir``: the committed starting points under
``data/policies/``, ``committed_policy``, else the cache) and the fingerprint of its committed
weights (``starting_fingerprint``). Building one (SFT) is ``psnlib.replication.compute.pretrain``'s.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
from dataclasses import asdict
from pathlib import Path

from psnlib.cache import read_json
from psnlib.models import (
    META_FILE,
)
from psnlib.paths import ROOT, data_dir
from psnlib.replication.plan.profiles import PolicySpec
from psnlib.tasks.countdown import CHARSET

CACHE_VERSION = 1  # bump when the SFT recipe changes in a way the settings hash does not see


FINGERPRINTS = "fingerprints.json"  # beside the committed starting policies: name -> weights


def spec_hash(spec: PolicySpec) -> str:
    """Short stable hash of everything that determines a built policy.

    Fields added after policies were cached are left out at their defaults, so those policies
    keep their hashes (``sft_max_misses``). The torch thread count is not in it: SFT gives
    bit-identical weights at 1 and 2 threads (``tests/test_threads.py``), unlike RL (see
    ``psnlib.replication.plan.runs.run_dir``)."""
    settings = asdict(spec)
    if settings["sft_max_misses"] == 0:
        del settings["sft_max_misses"]
    blob = json.dumps({"spec": settings, "charset": CHARSET, "v": CACHE_VERSION}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def policy_name(spec: PolicySpec) -> str:
    """The directory name of the tiny policy ``spec``: ``<family>-<size>-<style>-<hash>``."""
    return f"{spec.family}-{spec.size}-{spec.sft_style}-{spec_hash(spec)}"


def committed_root() -> Path:
    """Where the committed starting policies are: the checkout's ``results/start/policies/``,
    wherever the run ledger's records go (``$PSNLIB_RESULTS``, ``--out``): every run starts from
    the starting points tracked with the code."""
    return ROOT / "results" / "start" / "policies"


def committed_policy(spec: PolicySpec) -> Path | None:
    """The committed starting point of ``spec`` (``committed_root``), or None if there is none.
    Something else in its place (a file, a symbolic link) is damage, a ValueError naming the
    ``git checkout`` that restores it: trained again here, the policy need not have the weights
    the records were made from, so that is never done silently."""
    path = committed_root() / policy_name(spec)
    if spec.name_or_path is not None or not os.path.lexists(path):
        return None
    if path.is_symlink() or not path.is_dir():
        there = "a symbolic link" if path.is_symlink() else "not a directory"
        command = f"git -C {shlex.quote(str(ROOT))} checkout -- {shlex.quote(str(path))}"
        raise ValueError(
            f"the committed starting policy {path} is {there}: restore it with `{command}` "
            "(trained again here, it need not match the records' weights)"
        )
    return path


def policy_dir(spec: PolicySpec, root: Path | None = None) -> Path:
    """Directory of the policy that ``spec`` describes: in ``root`` if given, else its committed
    starting point where there is one, else the cache."""
    if root is None and (committed := committed_policy(spec)) is not None:
        return committed
    root = Path(root) if root is not None else data_dir() / "cache" / "policies"
    return root / policy_name(spec)


def starting_fingerprint(spec: PolicySpec) -> str | None:
    """The weights fingerprint (``psnlib.replication.compute.store.weights_fingerprint``) of the
    policy every run of ``spec`` starts from: the committed one's, else the one built here (recorded
    when it was built), else None (not known on this machine)."""
    if committed_policy(spec) is not None:
        known = read_json(committed_root() / FINGERPRINTS, "fingerprints of the starting points")
        if isinstance(known, dict) and isinstance(known.get(policy_name(spec)), str):
            return known[policy_name(spec)]
        raise ValueError(
            f"the committed starting policy {committed_root() / policy_name(spec)} has no "
            f"fingerprint in {committed_root() / FINGERPRINTS}: restore that file from git"
        )
    if spec.name_or_path is not None:
        return None
    meta = read_json(policy_dir(spec) / META_FILE, "policy record")
    return meta.get("fingerprint") if isinstance(meta, dict) else None
