"""Write the thin experiment notebooks (``python notebooks/build_notebooks.py``).

Each notebook is a list of cells: prose, one ``parameters`` cell, calls into psnlib, the figure
or table, and a last cell writing the metrics JSON the tests check. The committed ``.ipynb`` files
are this script's output, stored without outputs; edit here and re-run (a test checks the two
agree).
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent

PARAMETERS = """\
# Parameters (papermill overrides these)
profile = "cpu"  # smoke | cpu | gpu | paper: the only change needed to run at another scale
seeds = None  # training seeds, e.g. (0, 1, 2); None: {which}
figures_dir = None  # where figures and tables go; None: figures/<profile>/
metrics_path = None  # the metrics JSON the tests check; None: <figures_dir>/{stem}.json"""

SETUP = """\
from psnlib import experiments, plots, summaries
from psnlib.io import atomic_write_json
from psnlib.profiles import get_profile
from psnlib.reproduce import notebook_outputs

P = get_profile(profile)
out = notebook_outputs(P.name, figures_dir)
metrics_path = metrics_path or out / "{stem}.json"
KS = (P.ks[0], P.ks[len(P.ks) // 2], P.ks[-1])  # pass@1, a middle k, pass@n
print(f"profile {{P.name}}: {{P.rl_steps}} RL steps, {{P.eval_problems}} problems x "
      f"{{P.eval_samples}} samples per benchmark")"""

SAVE_METRICS = """\
metrics = {{
    "profile": P.name,
    "pass_at_k": summaries.passk_metrics({summary}),{extra}
}}
atomic_write_json(metrics_path, metrics)
print("metrics written to", metrics_path)"""


def md(text: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_markdown_cell(text.strip())


def code(text: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_code_cell(text.strip())


def header(stem: str, title: str, claim: str, which: str = "P.seeds") -> list:
    """Title and claim, the parameters cell and the setup cell."""
    params = code(PARAMETERS.format(which=which, stem=stem))
    params.metadata["tags"] = ["parameters"]
    return [md(f"# {title}\n\n{claim.strip()}"), params, code(SETUP.format(stem=stem))]


def metrics_cell(summary: str = "r['summary']", extra: str = "") -> nbformat.NotebookNode:
    return code(SAVE_METRICS.format(summary=summary, extra=extra))


ABLATION = "P.ablation_seeds"

NOTEBOOKS: dict[str, list] = {}

NOTEBOOKS["00_quickstart"] = [
    *header(
        "00_quickstart",
        "00 — Quickstart: perturb a policy, run PSN-GRPO",
        """
PSN-GRPO explores in *parameter* space: before a rollout it adds Gaussian noise
`W~ = W + sigma * eps` to the policy's MLP weights, samples with the noisy policy, and learns on
the clean one with truncated importance sampling. This notebook shows the three moving parts on
the profile's base policy: a perturbed forward pass, what noise does to pass@k at sampling time,
and one cached PSN-GRPO run (the same run the later notebooks compare).
""",
    ),
    md("## A perturbed policy writes different chains\n\nThe clean weights come back exactly."),
    code("""
import torch

import psnlib

model, tokenizer, _ = psnlib.base_policy(P)
prompt = psnlib.load_benchmark(P.ablation_benchmarks[0], 1)["prompt"][0]
before = [p.clone() for p in model.parameters()]
draw = dict(max_new_tokens=P.max_completion_length, progress=False)
clean = psnlib.generate_samples(model, tokenizer, [prompt], 4, **draw)[0]
with psnlib.perturbed(model, psnlib.NoiseConfig(sigma=P.psn_sigma, targets="mlp")):
    noisy = psnlib.generate_samples(model, tokenizer, [prompt], 4, **draw)[0]
assert all(torch.equal(p, q) for p, q in zip(model.parameters(), before))
print(prompt)
{"clean": clean, f"sigma={P.psn_sigma:g}": noisy}
"""),
    md("""
## Noise as exploration at sampling time

pass@k of the base policy with its MLP weights perturbed once at each sigma of the profile's
sweep: noise trades pass@1 against coverage at large k.
"""),
    code("""
frontier = experiments.noise_frontier(P)
grid = plots.plot_pass_at_k(frontier, col=None, title="base policy under MLP noise")
plots.save_figure(grid, out / "00_quickstart_noise_passk.png")
plots.save_table(frontier, out / "00_quickstart_noise_passk.csv")
frontier.pivot(index="k", columns="policy", values="pass_at_k").mul(100).round(1)
"""),
    md("""
## One PSN-GRPO run

`train_policy` trains (or loads from the cache) a run of the profile's PSN arm: noise per
rollout index, TIS with the profile's cap. The log holds TRL's metrics and PSN's.
"""),
    code("""
seed = (seeds or P.seeds)[0]
_, _, log = psnlib.train_policy(P, "psn", seed)
metrics_logged = ["reward", "entropy", "psn/kl_proxy", "tis/mean", "tis/frac_capped"]
grid = plots.plot_training(log.assign(policy="PSN fixed", seed=seed), metrics_logged)
plots.save_figure(grid, out / "00_quickstart_training.png")
"""),
    md("""
## What `make reproduce` trains

Every policy the notebooks train and evaluate, once each: runs with the same arm, seed and
settings are shared, so this is the compute budget at this profile (an evaluation is one policy
on one benchmark).
"""),
    code("""
plan = experiments.planned_runs(P)
print((plan.arm != "base").sum(), "RL runs and", plan.benchmarks.sum(), "evaluations at", P.name)
plan[["arm", "seed", "policy", "benchmarks", "used_by"]]
"""),
    metrics_cell(
        "summaries.summarize(frontier.assign(seed=0))",
        '\n    "planned_runs": int((plan.arm != "base").sum()),'
        '\n    "final_reward": float(log["reward"].iloc[-1]),',
    ),
]

NOTEBOOKS["01_testbed"] = [
    *header(
        "01_testbed",
        "01 — The Countdown testbed: a base policy with broad coverage, and a weak one",
        """
**Claim under test.** Both papers start from a base model that solves *many* problems when allowed
many samples (high pass@k at large k) but few on the first try (low pass@1), and the weak-guidance
paper needs a weaker model of another family whose solutions look unfamiliar to the base model.
Our CPU stand-in: Countdown arithmetic (reach a target with every number once, e.g.
`7 3 5 4->22:` answered by `7*3=21,21+5=26,26-4=22`), a ~1M-parameter Qwen2 *base* policy trained
by SFT on correct chains drawn uniformly from all chains of each problem, and a smaller Llama
*weak* policy trained only on "linear" chains (each step extends the previous result).
""",
        which="unused here",
    ),
    md("""
## The task is exactly verifiable and has many solution paths

Every chain is checked step by step; the enumerator lists *all* correct chains, which later lets us
count distinct solutions exactly instead of asking a judge.
"""),
    code("""
import pandas as pd

from psnlib.tasks import BENCHMARKS
from psnlib.tasks.countdown import Problem, distinct_solutions, enumerate_solutions, verify

problem = Problem((7, 3, 5, 4), 22)
chains = enumerate_solutions(problem)
print(problem.prompt, "has", len(chains), "correct chains,", distinct_solutions(problem),
      "distinct up to commutativity and step order")
print("e.g.", chains[:3])
print(verify(problem, "7*3=21,21+5=26,26-4=22"))
print(verify(problem, "7*3=21,21+5=27,27-4=23"))
"""),
    md("""
## Benchmarks: five graded in-distribution splits and two out-of-distribution families

Each split plays the role of one of the papers' benchmarks. Splits never share a problem.
"""),
    code("""
pd.DataFrame([{"benchmark": s.name, "role": s.role, "kind": s.kind, "level": s.level,
               "what": s.description} for s in BENCHMARKS.values()])
"""),
    md("""
## Build (or load from cache) both policies, then pass@k on the main benchmark

pass@k is the unbiased estimator from n samples per problem (`psnlib.metrics.pass_at_k`).
"""),
    code("""
results = experiments.testbed(P)
results["policies"]
"""),
    code("""
curves = results["curves"]
grid = plots.plot_pass_at_k(curves, hue="policy", col="benchmark")
plots.save_figure(grid, out / "01_testbed_passk.png")
plots.save_table(curves, out / "01_testbed_passk.csv")
curves.pivot(index="k", columns="policy", values="pass_at_k").mul(100).round(1)
"""),
    md("""
## What we measured

The papers' starting point needs the base policy's pass@k to rise steeply with k, and the weak
policy to be clearly worse; the lines below are computed from the run above.
"""),
    code("""
summary = summaries.summarize(curves.assign(seed=0))
print(summaries.headline(summary, P.ablation_benchmarks[0], KS))
"""),
    metrics_cell(
        "summary",
        '\n    "build_seconds": dict(zip(results["policies"].policy, '
        'results["policies"].build_seconds)),',
    ),
]

NOTEBOOKS["02_rl_narrows_coverage"] = [
    *header(
        "02_rl_narrows_coverage",
        "02 — RL narrows coverage: base vs GRPO pass@k",
        """
**Claim (the motivation of both papers; Yue et al. 2025).** RLVR raises pass@1, but at large k
the *base* model solves more distinct problems than the RL-trained one: the pass@k curves cross.
Here GRPO is trained from the testbed's base policy at several seeds and both are evaluated on the
in-distribution benchmarks, with the same problems and the same number of samples.
""",
    ),
    code("""
r = experiments.rl_narrows_coverage(P, seeds)
curves = summaries.with_average(r["curves"])
grid = plots.plot_pass_at_k(curves, title="base vs GRPO (mean ± s.e. over seeds)")
plots.save_figure(grid, out / "02_rl_narrows_coverage_passk.png")
plots.save_table(r["summary"], out / "02_rl_narrows_coverage_summary.csv")
summaries.pass_table(r["summary"], KS)
"""),
    md("""
## Where do the curves cross?

Per benchmark and GRPO seed: the smallest k at which the base policy reaches GRPO's pass@k (empty
when it does not within n samples).
"""),
    code("""
plots.save_table(r["crossover"], out / "02_rl_narrows_coverage_crossover.csv")
r["crossover"]
"""),
    md("## What we measured (average over the in-distribution benchmarks)"),
    code("""
print(summaries.headline(r["summary"], summaries.AVERAGE, KS))
crossed = r["crossover"]["crossover_k"].notna()
print(f"the base policy caught up within n samples in {crossed.sum()} of {len(crossed)} "
      "benchmark x seed pairs")
"""),
    metrics_cell(
        extra='\n    "crossover_k": [None if k != k else k for k in r["crossover"]["crossover_k"]],'
    ),
]

NOTEBOOKS["03_main_results"] = [
    *header(
        "03_main_results",
        "03 — Main results: GRPO vs PSN fixed vs PSN adaptive",
        """
**Claim (PSN paper, main table and Figure 1 left).** On Qwen2.5-Math-7B, PSN with a fixed sigma
and TIS lifts the average pass@256 over five math benchmarks above GRPO (74.7 -> 76.94), and the
adaptive scheduler (Variant II) further (79.5), with pass@1 about unchanged; the gains hold for
Qwen3-4B-Base and Llama-3.1-8B. Here: the same three arms from the testbed's base policy at
several seeds, pass@k per in-distribution benchmark and averaged, means ± standard errors over
seeds; then the comparison from other base policies (the profile's `other_policies`).
""",
    ),
    code("""
r = experiments.main_results(P, seeds)
curves = summaries.with_average(r["curves"])
grid = plots.plot_pass_at_k(curves, title="pass@k (mean ± s.e. over seeds)")
plots.save_figure(grid, out / "03_main_results_passk.png")
plots.save_table(r["summary"], out / "03_main_results_summary.csv")
summaries.pass_table(r["summary"][r["summary"].benchmark == summaries.AVERAGE], P.ks)
"""),
    md("## Per benchmark"),
    code("summaries.pass_table(r['summary'], KS)"),
    md("""
## Across models

The same comparison (one seed per policy: the profile's ablation seeds) from each base policy;
the average over the in-distribution benchmarks.
"""),
    code("""
across = experiments.across_models(P)
avg = across["summary"][across["summary"].benchmark == summaries.AVERAGE]
grid = plots.plot_pass_bars(summaries.with_average(across["curves"]), (KS[0], KS[-1]),
                            summaries.AVERAGE, title="across models (average)")
plots.save_figure(grid, out / "03_main_results_across_models.png")
plots.save_table(across["summary"], out / "03_main_results_across_models.csv")
summaries.pass_table(avg, (KS[0], KS[-1]))
"""),
    md("## What we measured (average over the in-distribution benchmarks)"),
    code("""
print(summaries.headline(r["summary"], summaries.AVERAGE, KS))
print(summaries.headline(across["summary"], summaries.AVERAGE, (KS[0], KS[-1])))
"""),
    metrics_cell(extra='\n    "across_models": summaries.passk_metrics(across["summary"]),'),
]


def _ablation(
    stem: str, title: str, claim: str, experiment: str, logged: list[str], which: str = ABLATION
) -> list:
    """An ablation notebook: pass@k bars and table, the training logs that explain them."""
    return [
        *header(stem, title, claim, which=which),
        code(f"""
r = experiments.{experiment}(P, seeds)
curves = summaries.with_average(r["curves"])
grid = plots.plot_pass_bars(curves, (KS[0], KS[-1]), summaries.AVERAGE)
plots.save_figure(grid, out / "{stem}_passk.png")
plots.save_table(r["summary"], out / "{stem}_summary.csv")
summaries.pass_table(r["summary"][r["summary"].benchmark == summaries.AVERAGE], KS)
"""),
        md("## During training"),
        code(f"""
grid = plots.plot_training(r["logs"], {logged!r})
plots.save_figure(grid, out / "{stem}_training.png")
"""),
        md("## What we measured (mean over the ablation benchmarks)"),
        code('print(summaries.headline(r["summary"], summaries.AVERAGE, KS))'),
        metrics_cell(),
    ]


NOTEBOOKS["04_tis_ablation"] = _ablation(
    "04_tis_ablation",
    "04 — Truncated importance sampling: with, without, token vs sequence, caps",
    """
**Claim (PSN paper).** Rollouts come from the noisy policy but gradients update the clean one, so
the off-policy gap must be corrected: without TIS, PSN does *worse* than GRPO (average pass@256
74.33 vs 74.7), with token-level TIS (cap C = 10) better (76.94). Here: PSN with token-level TIS
at the profile's cap, without TIS, with one sequence-level ratio, and with a tighter cap, against
GRPO; the TIS diagnostics show how often weights hit the cap.
""",
    "tis_ablation",
    ["reward", "tis/mean", "tis/frac_capped", "tis/ess", "psn/kl_proxy"],
)

NOTEBOOKS["05_noise_site"] = _ablation(
    "05_noise_site",
    "05 — Where to put the noise: MLP vs attention vs all weights",
    """
**Claim (PSN paper, ablation).** Perturbing the MLP (feed-forward) blocks works best; noise on
attention or on every layer is worse. Here: the same sigma on each site, against GRPO.
""",
    "noise_site",
    ["reward", "entropy", "psn/kl_proxy", "tis/frac_capped"],
)

NOTEBOOKS["06_sigma_sweep"] = [
    *header(
        "06_sigma_sweep",
        "06 — How much noise, and how often: sigma sweep and noise scope",
        """
**Claim (PSN paper).** A moderate sigma helps (0.001-0.005 for 7B models); too little does
nothing, too much hurts. The released code draws one noise sample per training *step*, the
write-up one per *trajectory*. Here: a sweep of absolute sigmas, sigmas relative to each weight's
RMS, and the noise scope (one draw per step, per prompt group, or per rollout index).
""",
        which=ABLATION,
    ),
    code("""
r = experiments.sigma_sweep(P, seeds)
curves = summaries.with_average(r["curves"])
grid = plots.plot_pass_bars(curves, (KS[0], KS[-1]), summaries.AVERAGE)
plots.save_figure(grid, out / "06_sigma_sweep_passk.png")
plots.save_table(r["summary"], out / "06_sigma_sweep_summary.csv")
summaries.pass_table(r["summary"][r["summary"].benchmark == summaries.AVERAGE], KS)
"""),
    md("""
## The exploration frontier

pass@1 against pass@n: moving up is more coverage, moving right is better first answers.
"""),
    code("""
fig = plots.plot_frontier(curves, KS[-1], summaries.AVERAGE)
plots.save_figure(fig, out / "06_sigma_sweep_frontier.png")
"""),
    md("## What we measured (mean over the ablation benchmarks)"),
    code('print(summaries.headline(r["summary"], summaries.AVERAGE, KS))'),
    metrics_cell(),
]

NOTEBOOKS["07_adaptive_scheduler"] = _ablation(
    "07_adaptive_scheduler",
    "07 — Adaptive sigma: fixed vs Variant I (KL target) vs Variant II (diversity)",
    """
**Claim (PSN paper).** A fixed sigma is a compromise; adapting it helps. Variant I (the released
code) steers a KL proxy between noisy and clean policy to a target; Variant II (the paper's
proposal) raises sigma when the clean policy's answers grow alike and certain (semantic similarity
and self-certainty above their running mean), and gives the best results (average pass@256 79.5
vs 76.94 fixed). Here: sigma and the schedulers' signals over training, and pass@k of each.
""",
    "adaptive_scheduler",
    ["psn/sigma", "psn/kl_proxy", "psn/ind", "psn/d_sem", "psn/sc_norm", "reward"],
)

NOTEBOOKS["08_passk_training"] = _ablation(
    "08_passk_training",
    "08 — Pass@k training, with and without PSN",
    """
**Claim (PSN paper, with Chen et al. 2025).** Pass@k training (group advantages that reward a
group for solving a problem in any of k tries) and PSN are complementary: average pass@256
76.37 -> 79.12 when PSN is added. Here: GRPO and PSN, each with the usual and with Pass@k
advantages (k = the profile's `passk_k`).
""",
    "passk_training",
    ["reward", "entropy", "psn/kl_proxy"],
    which="P.seeds",
)

NOTEBOOKS["09_weak_prefix"] = [
    *header(
        "09_weak_prefix",
        "09 — Weak-model guidance: GRPO rollouts that continue a weak model's prefix",
        """
**Claim (weak-guidance paper, main table).** Letting the target complete partial solutions of a
smaller model of another family breaks its over-confidence: with p = 0.2 of the prompt groups
prefixed (entropy-based truncation), Qwen2.5-7B's average pass@128 rises from 67.76 (GRPO) to
70.71 (Gemma-2-2B prefixes), pass@1 about unchanged. Ablations: random truncation is worse; p =
0.2 beats 0.5 and 1.0; prefixes from the same family give no gain. Here: the testbed's base
policy (Qwen2) guided by its weak policy (a smaller Llama trained only on linear chains).
""",
    ),
    md("""
## The prefixes, measured exactly

Before training, the weak policy writes one solution per training problem and the base policy's
step entropies choose the cut. On the testbed we can check every prefix exactly: can it still be
completed to a correct chain, or is it a dead end?
"""),
    code("""
quality = experiments.prefix_quality_table(P)
plots.save_table(quality, out / "09_weak_prefix_quality.csv")
quality
"""),
    code("""
r = experiments.weak_prefix(P, seeds)
curves = summaries.with_average(r["curves"])
grid = plots.plot_pass_at_k(curves, title="pass@k (mean ± s.e. over seeds)")
plots.save_figure(grid, out / "09_weak_prefix_passk.png")
plots.save_table(r["summary"], out / "09_weak_prefix_summary.csv")
summaries.pass_table(r["summary"], KS)
"""),
    md("## During training: prefixed and plain groups"),
    code("""
logged = ["reward", "entropy", "prefix/reward_prefixed", "prefix/reward_plain"]
grid = plots.plot_training(r["logs"], logged)
plots.save_figure(grid, out / "09_weak_prefix_training.png")
"""),
    md("## Ablations: truncation, p, prefix source (the ablation seeds and benchmarks)"),
    code("""
ab = experiments.weak_prefix_ablation(P)
grid = plots.plot_pass_bars(summaries.with_average(ab["curves"]), (KS[0], KS[-1]),
                            summaries.AVERAGE)
plots.save_figure(grid, out / "09_weak_prefix_ablation.png")
plots.save_table(ab["summary"], out / "09_weak_prefix_ablation.csv")
summaries.pass_table(ab["summary"][ab["summary"].benchmark == summaries.AVERAGE], KS)
"""),
    md("## What we measured"),
    code("""
print(summaries.headline(r["summary"], summaries.AVERAGE, KS))
print(summaries.headline(ab["summary"], summaries.AVERAGE, KS))
print(quality.round(3).to_string(index=False))
"""),
    metrics_cell(
        extra='\n    "ablation": summaries.passk_metrics(ab["summary"]),'
        '\n    "prefix_quality": quality.to_dict(orient="records"),'
    ),
]

NOTEBOOKS["10_entropy_dynamics"] = [
    *header(
        "10_entropy_dynamics",
        "10 — Entropy and reward over training",
        """
**Claim (both papers).** RLVR collapses the policy's entropy as it learns: it grows confident and
stops exploring. Parameter noise (and, in the weak-guidance paper, unfamiliar prefixes) is meant
to counter that collapse. Here: the token entropy and reward of GRPO and PSN logged during
training, over seeds, and their pass@k afterwards.
""",
    ),
    code("""
r = experiments.entropy_dynamics(P, seeds)
grid = plots.plot_training(r["logs"], ["entropy", "reward", "completions/mean_length"])
plots.save_figure(grid, out / "10_entropy_dynamics_training.png")
final = summaries.last_steps(r["logs"], ["entropy", "reward"])
plots.save_table(final, out / "10_entropy_dynamics_final.csv")
final.groupby(["policy", "metric"])["value"].agg(["mean", "std", "count"])
"""),
    code("""
grid = plots.plot_pass_at_k(r["curves"], title="after training (mean ± s.e. over seeds)")
plots.save_figure(grid, out / "10_entropy_dynamics_passk.png")
summaries.pass_table(r["summary"], KS)
"""),
    md("## What we measured"),
    code("""
print(final.groupby(["metric", "policy"])["value"].mean().round(3).to_string())
print(summaries.headline(r["summary"], summaries.AVERAGE, KS))
"""),
    metrics_cell(
        extra='\n    "final_entropy": final[final.metric == "entropy"]'
        '.groupby("policy")["value"].mean().to_dict(),'
    ),
]

NOTEBOOKS["11_coverage_diversity"] = [
    *header(
        "11_coverage_diversity",
        "11 — Coverage and diversity: what PSN solves that GRPO never does",
        """
**Claim (PSN paper, Figure 1 right and the octagon example).** PSN solves problems the baseline
never solves in hundreds of samples, and its responses are more diverse. Here, exactly (no
judge): per policy, problems solved by it and never by GRPO at the same seed (and the reverse),
distinct correct solutions per problem, pairwise diversity of samples, and one such problem's
responses side by side.
""",
    ),
    code("""
r = experiments.coverage(P, seeds)
only = summaries.solved_only(r["problems"], experiments.GRPO.label)
plots.save_table(only, out / "11_coverage_diversity_solved_only.csv")
only.groupby("policy")[["only_policy", "only_reference", "problems"]].sum()
"""),
    code("""
columns = ["solved", "distinct_correct", "diversity"]
per_seed = summaries.per_seed_means(r["problems"], columns, by_benchmark=False)
grid = plots.plot_bars(per_seed, "policy", "value", col="metric")
plots.save_figure(grid, out / "11_coverage_diversity_bars.png")
table = summaries.response_summary(r["problems"], columns)
plots.save_table(table, out / "11_coverage_diversity_summary.csv")
table.pivot_table(index=["benchmark", "policy"], columns="metric", values="mean").round(3)
"""),
    md("""
## One problem PSN solves and GRPO never does

Fresh samples of both policies on it (as many as an evaluation draws), correct ones first.
"""),
    code("""
from psnlib.tasks.countdown import Problem

seed = (seeds or P.seeds)[0]
row = summaries.solved_only_example(r["problems"], experiments.PSN.label,
                                    experiments.GRPO.label, seed)
if row is None:
    print("no problem was solved by PSN and never by GRPO at seed", seed)
else:
    problem = Problem(tuple(row["numbers"]), int(row["target"]))
    print(row["benchmark"], problem.prompt, f"PSN {row['correct']}/{row['n']} correct,",
          f"GRPO 0/{row['n']} in the evaluation")
    shown = experiments.side_by_side(P, [experiments.GRPO, experiments.PSN], problem, seed)
    display(shown)
"""),
    md("## What we measured"),
    code("""
totals = only.groupby("policy")[["only_policy", "only_reference"]].sum()
for policy, t in totals.iterrows():
    print(f"{policy}: solves {t.only_policy} problems GRPO never does; GRPO solves "
          f"{t.only_reference} it never does (summed over benchmarks and seeds)")
"""),
    metrics_cell(
        extra='\n    "solved_only_vs_grpo": {p: int(v) for p, v in totals.only_policy.items()},'
    ),
]

NOTEBOOKS["12_self_consistency"] = [
    *header(
        "12_self_consistency",
        "12 — Step-level self-consistency of responses",
        """
**Claim (PSN paper, ReCEval analysis).** Noise in parameter space explores *coherently*: the
responses stay self-consistent step by step, unlike token-level randomness. On the testbed every
step is checked exactly: the share of a response's steps that are valid, the index of the first
invalid step, and informativeness (how much each step raises the log-probability of the final
answer, ReCEval-style).
""",
    ),
    code("""
r = experiments.coverage(P, seeds)
columns = ["step_validity", "first_error", "informativeness"]
per_seed = summaries.per_seed_means(r["problems"], columns, by_benchmark=False)
grid = plots.plot_bars(per_seed, "policy", "value", col="metric")
plots.save_figure(grid, out / "12_self_consistency_bars.png")
table = summaries.response_summary(r["problems"], columns)
plots.save_table(table, out / "12_self_consistency_summary.csv")
table.pivot_table(index=["benchmark", "policy"], columns="metric", values="mean").round(3)
"""),
    md("## What we measured (all in-distribution problems pooled, mean over seeds)"),
    code("""
pooled = per_seed.groupby(["metric", "policy"])["value"].mean()
print(pooled.round(3).to_string())
"""),
    metrics_cell(
        extra='\n    "self_consistency": {m: t.droplevel(0).to_dict() '
        "for m, t in pooled.groupby(level=0)},"
    ),
]

NOTEBOOKS["13_ood"] = [
    *header(
        "13_ood",
        "13 — Out-of-distribution transfer",
        """
**Claim (PSN paper).** Trained on math only, PSN also improves pass@k on GPQA-Diamond and
LiveCodeBench. Our stand-ins, never used in RL training: Countdown targets that need division (an
operation absent from training) and five-number problems (longer chains than any training
problem).
""",
    ),
    code("""
r = experiments.ood(P, seeds)
grid = plots.plot_pass_at_k(r["curves"], title="out of distribution (mean ± s.e. over seeds)")
plots.save_figure(grid, out / "13_ood_passk.png")
plots.save_table(r["summary"], out / "13_ood_summary.csv")
summaries.pass_table(r["summary"], KS)
"""),
    md("## What we measured"),
    code("""
for benchmark in r["summary"].benchmark.unique():
    print(benchmark)
    print(summaries.headline(r["summary"], benchmark, KS))
"""),
    metrics_cell(),
]


NOTEBOOKS["14_psn_with_weak_prefix"] = _ablation(
    "14_psn_with_weak_prefix",
    "14 — Both explorations at once: parameter noise and weak prefixes",
    """
**Question (in neither paper).** The two papers explore in different places: PSN perturbs the
policy's weights for whole trajectories, weak guidance perturbs the start of the trajectory. Do
they add up? Here: GRPO, PSN (fixed sigma, TIS), GRPO with weak prefixes (p = 0.2) and PSN with
weak prefixes, at the ablation seeds and benchmarks.
""",
    "psn_with_weak_prefix",
    ["reward", "entropy", "prefix/reward_prefixed", "psn/kl_proxy"],
)


NOTEBOOKS["15_results"] = [
    *header(
        "15_results",
        "15 — Results: every claim, the papers' number beside ours",
        """
The notebooks above each test one claim. This one collects them: for each claim of the two
papers, the paper's number, ours (from the same cached runs, nothing is retrained), the
difference with a 95% interval over seeds (or over problems, for one-seed ablations) and a
verdict that follows from the interval. It writes `RESULTS.md` beside the figures.
""",
    ),
    code("""
from psnlib import results

claims = results.evaluate_claims(P)
claims[["claim", "statistic", "seeds", "value_ours", "value_theirs", "diff", "lo", "hi", "verdict"]]
"""),
    md("""
## The headline: pass@k of base, GRPO, PSN and weak prefixes

Averaged over the in-distribution benchmarks; the band is the standard error over seeds.
"""),
    code("""
curves = results.headline_curves(P)
grid = plots.plot_pass_at_k(curves, col=None, title="pass@k, in-distribution average")
plots.save_figure(grid, out / "15_results_headline.png")
plots.save_table(claims, out / "15_results_claims.csv")
"""),
    md("## RESULTS.md"),
    code("""
from psnlib.reproduce import measured_compute

compute = measured_compute(P.name)  # what each run cost, from its own records
plots.save_table(compute, out / "15_results_compute.csv")
path = results.write_results(claims, out / "RESULTS.md", P, out / "reproduce_timing.json",
                             compute=compute, figure="15_results_headline.png")
print(path.read_text())
"""),
    metrics_cell(
        "summaries.summarize(curves)",
        extra='\n    "verdicts": dict(zip(claims["claim"], claims["verdict"])),',
    ),
]


def build(stem: str) -> nbformat.NotebookNode:
    """The notebook ``stem`` as written to disk: cells with stable ids, no outputs."""
    nb = nbformat.v4.new_notebook()
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    nb.cells = [cell.copy() for cell in NOTEBOOKS[stem]]
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"{stem.split('_')[0]}-{i:02d}"
    return nb


def main(out: Path = HERE) -> None:
    for stem in NOTEBOOKS:
        nbformat.write(build(stem), out / f"{stem}.ipynb")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
