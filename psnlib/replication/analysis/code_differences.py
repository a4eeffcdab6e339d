"""How the authors' released code differs from the paper's text, and which claims test each
difference: RESULTS.md's table "the paper vs the released code"
(``psnlib.replication.report.results_text.code_differences``). What this profile's arms do is read
from their run settings, not written here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from psnlib.replication.plan import arms
from psnlib.replication.plan.arms import Arm
from psnlib.replication.plan.experiments import released_replicas
from psnlib.replication.plan.profiles import Profile
from psnlib.replication.plan.variants import Variant, config_default


def _setting(profile: Profile, arm: Arm, name: str) -> Any:
    """The ``PSNGRPOConfig`` setting ``name`` of the profile's runs of ``arm``: its run settings
    (``psnlib.replication.plan.runs.Run.settings``), else the config's default."""
    settings = Variant(arm.name, arm).run(profile, 0).settings()
    return settings[name] if name in settings else config_default(name)


def _targets(profile: Profile, arm: Arm) -> str:
    return "+".join(_setting(profile, arm, "noise_targets"))


def _released_sigma_source(profile: Profile) -> str:
    arm = dict(dict(profile.arm_settings).get(arms.PSN_RELEASED, ()))
    return "the profile's setting for this arm" if "sigma" in arm else "the profile's psn_sigma"


# those named
PSN_ARMS = (
    arms.GRPO,
    arms.PSN,
    arms.PSN_KL,
    arms.PSN_DIV,
    arms.PSN_RELEASED,
    arms.PSN_RELEASED_FIXED,
)


def _recipe(profile: Profile, names: tuple[str, ...]) -> str:
    """``names``' settings in the runs of GRPO and every PSN arm: once if all arms share them,
    else arm by arm."""
    values = {
        arm.name: ", ".join(f"{n}={_setting(profile, arm, n):g}" for n in names) for arm in PSN_ARMS
    }
    if len(set(values.values())) == 1:
        return f"GRPO and every PSN arm: {values[arms.GRPO.name]}"
    return "; ".join(f"{arm}: {v}" for arm, v in values.items())


def _sigmas(profile: Profile) -> str:
    fixed = _setting(profile, arms.PSN_RELEASED_FIXED, "sigma")
    start = _setting(profile, arms.PSN_RELEASED, "sigma")
    return (
        f"the released code's fixed PSN holds sigma {fixed:g}; its adaptive PSN starts at "
        f"{start:g} ({_released_sigma_source(profile)}); a 1.01 step rule moves sigma at most "
        f"{1.01**profile.rl_steps:.3g}x in the profile's {profile.rl_steps} steps"
    )


def _replicas(profile: Profile) -> str:
    one = _setting(profile, arms.PSN_RELEASED_FIXED, "noise_replicas")
    many = released_replicas(profile).settings["noise_replicas"]
    return (
        f"the released code's PSNs: noise_replicas={one} (one draw per step); its replica "
        f"ablation: noise_replicas={many}, one draw per slice of the step's "
        f"{profile.rl_prompts_per_step} prompts"
    )


def _engines(profile: Profile) -> str:
    if _setting(profile, arms.PSN_RELEASED, "use_vllm"):
        return "the rollouts are sampled by vLLM (use_vllm=True), as in the released code"
    return (
        "one engine samples the rollouts and scores them for the loss (the profile's "
        "use_vllm=False): the proxy holds the noise's KL alone, with no engine mismatch"
    )


def _updates(profile: Profile) -> str:
    accumulation = _setting(profile, arms.PSN_RELEASED, "gradient_accumulation_steps")
    generation = _setting(profile, arms.PSN_RELEASED, "steps_per_generation") or accumulation
    return (
        f"{generation / accumulation:.3g} optimizer update(s) per rollout batch "
        f"(steps_per_generation={generation}, gradient_accumulation_steps={accumulation}), "
        "the same for GRPO and every PSN arm"
    )


@dataclass(frozen=True)
class CodeDifference:
    """One way the authors' released code (``baibizhe/psn_rlvr``, commit 6a27058; docs/protocol.md
    section 1.2) differs from the paper's text, and which claims' rows test it here."""

    what: str  # the difference, in a few words
    paper: str  # what the paper's text describes
    code: str  # what the released code does
    here: Callable[[Profile], str]  # what the profile's arms do, read from their run settings
    claims: tuple[str, ...] = ()  # names of the claims whose rows test it
    untested: str = ""  # why no row tests it, where none does


CODE_DIFFERENCES = (
    CodeDifference(
        "when the noise is drawn",
        "once per trajectory ('a temporary parameter brain')",
        "once per training step, while the weights are synced into vLLM: every rollout of a "
        "step shares one draw",
        lambda p: (
            f"PSN fixed: noise_scope={_setting(p, arms.PSN, 'noise_scope')}; per-step MLP "
            f"noise and the released code's PSN: {_setting(p, arms.PSN_RELEASED, 'noise_scope')}"
            f" (fixed: {_setting(p, arms.PSN_RELEASED_FIXED, 'noise_scope')})"
        ),
        ("Per-step noise beats per-rollout noise", "Per-step MLP noise raises pass@256"),
    ),
    CodeDifference(
        "which weights",
        "the MLP blocks, the ablation's best site",
        "every tensor (the MLP filter only feeds a log counter): embeddings, attention, norms "
        "and lm_head too",
        lambda p: (
            f"PSN fixed: {_targets(p, arms.PSN)}; the released code's PSN: "
            f"{_targets(p, arms.PSN_RELEASED)} (fixed: {_targets(p, arms.PSN_RELEASED_FIXED)})"
        ),
        (
            "Every parameter adds to per-step noise",
            "Every parameter and Variant I add to per-step noise",
            "MLP noise beats noise on all weights",
        ),
    ),
    CodeDifference(
        "the sigma scheduler",
        "Variant II (similarity and self-certainty of clean pairs); the adaptive numbers are "
        "reported for it",
        "Variant I only (KL proxy of noisy vs clean log-probs, sigma x or / 1.01); Variant II "
        "is a README to-do",
        lambda p: (
            f"PSN adaptive II: {_setting(p, arms.PSN_DIV, 'sigma_scheduler')}; PSN adaptive "
            f"I and the released code's PSN: {_setting(p, arms.PSN_RELEASED, 'sigma_scheduler')}"
        ),
        (
            "Variant II beats Variant I",
            "Adaptive PSN raises pass@256",
            "The released code's adaptive PSN raises pass@256",
            "The released code's Variant I beats its fixed sigma",
        ),
    ),
    CodeDifference(
        "Variant I's KL target",
        "0.003-0.005",
        "0.003 in the launcher and README, 0.005 the config default",
        lambda p: (
            f"the released code's PSN: {_setting(p, arms.PSN_RELEASED, 'kl_target'):g}; PSN "
            f"adaptive I: {_setting(p, arms.PSN_KL, 'kl_target'):g}"
        ),
        untested="no arm changes the target alone: it moves with the released code's other "
        "changes (its row tests them together)",
    ),
    CodeDifference(
        "the sigma",
        "sigma0 0.001, the default",
        "the launcher's default: sigma 0.001 held fixed, scheduler off (Variant I's sigma0 is "
        "0.001 too); the README's examples use 0.004: its adaptive example starts there, as "
        "does its fixed-noise one",
        _sigmas,
        untested="no arm varies the released code's sigma: each profile sets it by a rule stated "
        "before the runs (cpu: the KL its README targets, so that its fixed and adaptive arms "
        "start alike; gpu, paper: the launcher's fixed 0.001; psnlib.replication.plan.profiles)",
    ),
    CodeDifference(
        "entropy bonus and KL loss",
        "not stated",
        "entropy coefficient 0.001, KL loss 0.001 (low_var_kl)",
        lambda p: _recipe(p, ("entropy_coef", "beta")),
        untested="no arm changes them between GRPO and PSN, so that the released code's PSN "
        "differs from GRPO by its noise alone; an entropy bonus on GRPO alone is an exploration "
        "baseline (its rows compare PSN with it)",
    ),
    CodeDifference(
        "validation weights",
        "evaluation on the clean weights",
        "in-training validation (greedy) on the noisy weights in async mode",
        lambda p: "every evaluation on the clean weights (sigma 0)",
        untested="no number here comes from in-training validation; every evaluation is clean",
    ),
    CodeDifference(
        "which draw",
        "one draw per trajectory",
        "the per-parameter seed's base is left unset, so each rollout process draws its own: "
        "with tensor parallel 1 on 8 GPUs one step sees up to 8 perturbed policies, each "
        "writing a slice of the batch",
        _replicas,
        ("Per-replica draws add to the released fixed noise",),
    ),
    CodeDifference(
        "the KL proxy's log-probs",
        "the noisy policy's log-probs against the clean policy's",
        "vLLM's sampling log-probs (noisy) against the trainer's (clean): part of the 'KL' "
        "Variant I steers is the vLLM-vs-trainer mismatch, not noise",
        _engines,
        untested="the testbed cannot copy it: sampling and training in one engine, it has no "
        "mismatch to add to the noise's KL (its Variant I steers the noise's KL alone)",
    ),
    CodeDifference(
        "PPO updates per rollout batch",
        "not stated",
        "about 21: verl mini-batches of 12 prompts from the 256 of a rollout batch",
        _updates,
        untested="no arm changes it: GRPO and every PSN arm share the profile's updates per "
        "rollout batch (the paper profile copies the released ~21; the cpu testbed makes one)",
    ),
)
