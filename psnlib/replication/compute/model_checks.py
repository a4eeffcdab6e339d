"""Checks of a policy or a data set named on the command line, before anything is loaded: a
model directory must hold what transformers needs, its weights whole (``check_model_dir``), a
hub id must be in the local hub cache or on a hub that answers (``check_hub_id``), and so must a
real data set (``check_data_set``), at once rather than after a minute of retries. Each failure
is a ValueError naming the value and what is allowed."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path

import datasets
import huggingface_hub
from datasets.load import CachedDatasetModuleFactory
from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError
from transformers import AutoConfig, PretrainedConfig

from psnlib.models import HUB_ID, safetensors_extent
from psnlib.tasks import REAL_BENCHMARKS

HUB_TIMEOUT = 10.0  # seconds to wait for the hub to say whether a model id exists


def check_model_dir(path: str | os.PathLike, what: str = "--model") -> PretrainedConfig:
    """The model config of a policy directory: it must hold a config.json that transformers
    reads, weights (``*.safetensors``, each as long as its header says: a copy or download that
    stopped short is named here, not by safetensors in a traceback) and a tokenizer; else a
    ValueError naming it."""
    path = Path(path)
    needs = "pass a model directory (config.json, *.safetensors and a tokenizer)"
    config = path / "config.json"
    if not config.is_file():
        raise ValueError(f"{what} {str(path)!r} is a directory without config.json; {needs}")
    try:
        settings = json.loads(config.read_text())
    except (ValueError, OSError) as err:
        raise ValueError(f"{what} {str(path)!r}: {config.name} is not valid JSON ({err})") from err
    if not isinstance(settings, dict) or "model_type" not in settings:
        raise ValueError(f"{what} {str(path)!r}: {config.name} names no model_type; {needs}")
    if not [*path.glob("*.safetensors"), *path.glob("*.bin")]:
        raise ValueError(f"{what} {str(path)!r} holds no weights (*.safetensors); {needs}")
    if not any((path / name).is_file() for name in ("tokenizer.json", "tokenizer_config.json")):
        raise ValueError(f"{what} {str(path)!r} holds no tokenizer (tokenizer.json); {needs}")
    _check_weights(path, what)
    try:
        return AutoConfig.from_pretrained(path)
    except (ValueError, OSError, KeyError) as err:
        first = (str(err).strip() or type(err).__name__).splitlines()[0]
        raise ValueError(
            f"{what} {str(path)!r}: transformers cannot read its config ({first})"
        ) from err


def _check_weights(path: Path, what: str) -> None:
    """Each ``*.safetensors`` file in ``path`` must be whole (``safetensors_extent``); else a
    ValueError naming it and its size."""
    again = "copy or download it again, or pass another model directory"
    for file in sorted(path.glob("*.safetensors")):
        try:
            size, expected = safetensors_extent(file)
        except (ValueError, OSError) as err:
            raise ValueError(
                f"{what} {str(path)!r}: {file.name} is not a safetensors file ({err}); {again}"
            ) from err
        if expected is None or size < expected:
            says = "shorter than its header" if expected is None else f"its header says {expected}"
            raise ValueError(
                f"{what} {str(path)!r}: {file.name} is truncated ({size} bytes, {says}); {again}"
            )
        if size > expected:  # safetensors refuses bytes its header does not cover
            raise ValueError(
                f"{what} {str(path)!r}: {file.name} is damaged ({size} bytes, its header says "
                f"{expected}); {again}"
            )


def _offline() -> bool:
    """Whether the hub is off (``HF_HUB_OFFLINE`` or ``TRANSFORMERS_OFFLINE``, now or at import)."""
    flags = (os.environ.get("HF_HUB_OFFLINE"), os.environ.get("TRANSFORMERS_OFFLINE"))
    return huggingface_hub.constants.is_offline_mode() or any(
        str(flag).upper() in ("1", "ON", "YES", "TRUE") for flag in flags
    )


def ask_hub(name: str) -> None:
    """Raise if the hub does not answer that model ``name`` exists (``HfApi.model_info``, one
    request with a timeout, no retries)."""
    huggingface_hub.HfApi().model_info(name, timeout=HUB_TIMEOUT)


def ask_hub_data_set(hub_id: str) -> None:
    """Raise if the hub does not answer that the data set ``hub_id`` exists
    (``HfApi.dataset_info``, one request with a timeout, no retries)."""
    huggingface_hub.HfApi().dataset_info(hub_id, timeout=HUB_TIMEOUT)


def _go_offline() -> None:
    """Offline mode for the hub and ``datasets``: cached copies load without a minute of
    retries."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    huggingface_hub.constants.HF_HUB_OFFLINE = True
    datasets.config.HF_HUB_OFFLINE = True


def _reach(ask: Callable[[], None], cached: bool, absent: str, unreachable: str) -> None:
    """Ask the hub whether a model or data set exists (``ask``, one request): a gated one
    passes (loading it asks for a token); one the hub says does not exist is the ValueError
    ``absent``; an unreachable hub (DNS, connection, timeout, server errors) is the ValueError
    ``unreachable`` (its ``{error}``: the error's type) unless a copy is ``cached``, which then
    loads in offline mode, without a minute of retries."""
    try:
        ask()
    except GatedRepoError:
        return
    except RepositoryNotFoundError as err:
        raise ValueError(absent) from err
    except Exception as err:
        if not cached:
            raise ValueError(unreachable.replace("{error}", type(err).__name__)) from err
        _go_offline()


def check_hub_id(name: str, what: str = "--model") -> None:
    """A hub id that is neither in the local hub cache nor on a reachable hub is a ValueError
    naming it, at once: transformers would retry for about a minute. An id in the cache while
    the hub is unreachable is loaded from the cache (offline mode is turned on)."""
    cached = isinstance(huggingface_hub.try_to_load_from_cache(name, "config.json"), str)
    local = "or pass a local model directory"
    if _offline():
        if not cached:
            raise ValueError(
                f"{what} {name!r} is not a local directory and not in the hub cache, and "
                f"HF_HUB_OFFLINE is set; download it first (hf download {name}) {local}"
            )
        return
    _reach(
        lambda: ask_hub(name),
        cached,
        f"{what} {name!r}: no such model on the hub, {local}",
        f"{what} {name!r} is not in the hub cache and the hub cannot be reached ({{error}}); "
        f"connect, {local}",
    )


def check_model(name: str | None, what: str = "--model") -> str | None:
    """``name`` if it is None, a model directory (``check_model_dir``) or a hub id that exists
    (``check_hub_id``); a path that does not exist (``./x``, ``/x``, ``x/y/z``, or ``runs/x``
    where ``runs/`` is a local directory), an empty name or one that is no hub id is an error
    naming it."""
    if name is None:
        return name
    if not name.strip():
        raise ValueError(f"{what} is empty; pass a model directory or a hub id 'org/name'")
    path = Path(name).expanduser()
    if path.is_dir():
        check_model_dir(path, what)
        return name
    local = "/" in name and not path.is_absolute() and Path(path.parts[0]).is_dir()
    if name.startswith((".", "/", "~")) or path.exists() or local or not HUB_ID.fullmatch(name):
        why = f" ({path.parts[0]}/ is a local directory)" if local else ""
        raise ValueError(
            f"{what} {name!r}: no such model directory{why}; pass a directory holding "
            "config.json and *.safetensors, or a hub id 'org/name'"
        )
    check_hub_id(name, what)
    return name


def data_set_cached(hub_id: str) -> bool:
    """Whether ``datasets``' cache holds a copy of the hub data set ``hub_id`` (what
    ``load_dataset`` falls back to when the hub cannot be reached)."""
    logger = logging.getLogger("datasets.load")  # quiet: "using the latest cached version"
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        CachedDatasetModuleFactory(hub_id).get_module()
    except Exception:  # FileNotFoundError where none is cached; anything else: no usable copy
        return False
    finally:
        logger.setLevel(level)
    return True


def check_data_set(name: str, what: str = "--dataset") -> None:
    """A real data set (``psnlib.tasks.REAL_BENCHMARKS``; others are built locally and pass)
    that is neither in ``datasets``' cache nor on a reachable hub is a ValueError naming it, at
    once: ``load_dataset`` would retry for about a minute, after the policy is loaded. One in
    the cache while the hub is unreachable is loaded from the cache (offline mode is turned
    on)."""
    spec = REAL_BENCHMARKS.get(name)
    if spec is None:
        return
    if spec.unsupported:
        raise ValueError(f"{what} {name!r} cannot be used: {spec.unsupported.split('. ')[0]}")
    cached = data_set_cached(spec.hub_id)
    local = "load it once where the hub can be reached: datasets caches it"
    if _offline() or datasets.config.HF_HUB_OFFLINE:
        if not cached:
            raise ValueError(
                f"{what} {name!r} ({spec.hub_id}) is not in the datasets cache, and "
                f"HF_HUB_OFFLINE (or HF_DATASETS_OFFLINE) is set; {local}"
            )
        return
    _reach(
        lambda: ask_hub_data_set(spec.hub_id),
        cached,
        f"{what} {name!r}: no such data set on the hub ({spec.hub_id})",
        f"{what} {name!r} ({spec.hub_id}) is not in the datasets cache and the hub cannot be "
        f"reached ({{error}}); connect, or {local}",
    )
