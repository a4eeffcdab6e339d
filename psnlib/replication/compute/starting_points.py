"""A profile's starting points: the policies every run starts from, and their prefix sets.

At ``cpu`` they are committed (``results/start/``: ``policies/<name>/`` with safetensors, tokenizer
and meta, ``policies/fingerprints.json`` with each one's weights fingerprint, and ``prefixes/``, the
weak-prefix training sets made from them), so a fresh clone trains no SFT and every machine starts
every run from the same weights; ``psnlib.replication.compute.pretrain`` loads them first. ``build``
makes whatever of them is not there (SFT into the cache); ``commit`` copies the built ones into
``results/start/``; ``rebuild`` re-runs SFT into the cache beside committed ones and says, per
policy, whether the fingerprints match (on another CPU they need not: the float sums run in another
order). Records are never pooled across starting points
(``psnlib.replication.records.ledger.one_start``).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd

from psnlib.cache import read_json
from psnlib.io import atomic_write_json
from psnlib.paths import data_dir
from psnlib.replication.compute.prefixes import prefix_source
from psnlib.replication.compute.pretrain import build_policy
from psnlib.replication.compute.store import weights_fingerprint
from psnlib.replication.plan.policies import (
    FINGERPRINTS,
    committed_policy,
    committed_root,
    policy_name,
)
from psnlib.replication.plan.profiles import PolicySpec, Profile
from psnlib.replication.plan.schedule import planned_work
from psnlib.replication.plan.variants import BASE
from psnlib.weak_prefix import fingerprint as prefix_fingerprint

PrefixKey = tuple[int, str, str]  # (seed, truncation, source) of a weak-prefix training set


def policies(profile: Profile) -> list[PolicySpec]:
    """Every tiny policy the plan starts from or takes prefixes from (hub models excluded),
    the longest SFT first."""
    work = planned_work(profile)
    specs = {profile.base, profile.weak, *(v.profile(profile).base for v, _, _ in work)}
    specs |= {prefix_source(profile, source) for _, _, source in prefix_sets(profile)}
    tiny = [spec for spec in specs if spec.name_or_path is None]
    return sorted(tiny, key=lambda spec: (-spec.sft_steps, policy_name(spec)))


def prefix_sets(profile: Profile) -> list[PrefixKey]:
    """The weak-prefix training sets the plan's runs train on."""
    keys: set[PrefixKey] = set()
    for v, seed, _ in planned_work(profile):
        settings = {} if v.arm == BASE else v.run(profile, seed).settings()
        if settings.get("prefix_prob", 0.0) > 0:
            keys.add((seed, settings["prefix_truncation"], settings["prefix_source"]))
    return sorted(keys)


def commit(profile: Profile) -> Path:
    """Copy the profile's built policies (``policies``) from the cache into ``results/start/``
    with their fingerprints, and the prefix sets made from them; returns that folder. A policy
    not built yet is a ValueError naming it."""
    root = committed_root()
    known = read_json(root / FINGERPRINTS, "fingerprints of the starting points") or {}
    made: dict[str, str] = {}
    for spec in policies(profile):
        model, tokenizer, path = build_policy(spec)  # cached (or committed) already: loaded
        name = policy_name(spec)
        if committed_policy(spec) is None:
            shutil.copytree(path, root / name, ignore=shutil.ignore_patterns("*.lock"))
        known[name] = weights_fingerprint(model)
        made[prefix_fingerprint(model, tokenizer)] = name
    atomic_write_json(root / FINGERPRINTS, dict(sorted(known.items())))
    cache, prefixes = data_dir() / "cache" / "weak_prefixes", root.parent / "prefixes"
    for file in sorted(cache.glob("*.json")):
        key = (read_json(file, "weak-prefix cache entry") or {}).get("key", {})
        if key.get("weak") in made and key.get("target", "") in {"", *made}:
            prefixes.mkdir(parents=True, exist_ok=True)
            shutil.copy2(file, prefixes / file.name)
    return root.parent


def rebuild(profile: Profile) -> pd.DataFrame:
    """Re-run the SFT of every committed starting policy of ``profile`` into the cache and set
    the fingerprints side by side: one row per policy, ``committed``, ``rebuilt``, ``same``."""
    known = read_json(committed_root() / FINGERPRINTS, "fingerprints of the starting points")
    rows = []
    for spec in policies(profile):
        if committed_policy(spec) is None:
            continue
        model, _, _ = build_policy(spec, root=data_dir() / "cache" / "policies", force=True)
        name, rebuilt = policy_name(spec), weights_fingerprint(model)
        committed = (known or {}).get(name)
        rows.append({"policy": name, "committed": committed, "rebuilt": rebuilt})
    table = pd.DataFrame(rows, columns=["policy", "committed", "rebuilt"])
    return table.assign(same=table["committed"] == table["rebuilt"])
