"""Checks of a policy named on the command line, before anything is loaded: a model directory
must hold what transformers needs (``check_model_dir``), and a hub id must be in the local hub
cache or on a hub that answers (``check_hub_id``), at once rather than after transformers'
minute of retries. Each failure is a ValueError naming the value and what is allowed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import huggingface_hub
from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError
from transformers import AutoConfig, PretrainedConfig

from psnlib.models import HUB_ID

HUB_TIMEOUT = 10.0  # seconds to wait for the hub to say whether a model id exists


def check_model_dir(path: str | os.PathLike, what: str = "--model") -> PretrainedConfig:
    """The model config of a policy directory: it must hold a config.json that transformers
    reads, weights (``*.safetensors``) and a tokenizer; else a ValueError naming it."""
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
    try:
        return AutoConfig.from_pretrained(path)
    except (ValueError, OSError, KeyError) as err:
        first = (str(err).strip() or type(err).__name__).splitlines()[0]
        raise ValueError(
            f"{what} {str(path)!r}: transformers cannot read its config ({first})"
        ) from err


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
    try:
        ask_hub(name)
    except GatedRepoError:
        return  # it exists; loading it needs a token, which the load will ask for
    except RepositoryNotFoundError as err:
        raise ValueError(f"{what} {name!r}: no such model on the hub, {local}") from err
    except Exception as err:  # DNS, connection, timeout or server errors: the hub is not there
        if not cached:
            raise ValueError(
                f"{what} {name!r} is not in the hub cache and the hub cannot be reached "
                f"({type(err).__name__}); connect, {local}"
            ) from err
        os.environ["HF_HUB_OFFLINE"] = "1"  # the cached copy, without a minute of retries
        huggingface_hub.constants.HF_HUB_OFFLINE = True


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
    local = Path(path.parts[0]).is_dir() if "/" in name else False
    if name.startswith((".", "/", "~")) or path.exists() or local or not HUB_ID.fullmatch(name):
        why = f" ({path.parts[0]}/ is a local directory)" if local else ""
        raise ValueError(
            f"{what} {name!r}: no such model directory{why}; pass a directory holding "
            "config.json and *.safetensors, or a hub id 'org/name'"
        )
    check_hub_id(name, what)
    return name
