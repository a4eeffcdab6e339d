"""Real benchmarks from the Hugging Face Hub, normalised to ``prompt``, ``answer``, ``id``.

The testbed's Countdown benchmarks (``psnlib.tasks.splits.BENCHMARKS``) play the roles of the
papers' benchmarks on a CPU; with the hub reachable (the ``gpu`` and ``paper`` profiles), the same
evaluation and training code runs on the real data sets registered here. Every loader reads the
hub data set through ``datasets.load_dataset`` and maps its fields to three columns:

- ``prompt``: the question text followed by an instruction to put the final answer in ``\\boxed{}``
  (for GPQA-Diamond, the question with its four options lettered A-D in a seeded shuffle);
- ``answer``: the gold answer as a string (for GPQA-Diamond, the letter of the correct option);
- ``id``: a stable identifier (the data set's own where it has one, else ``<name>-<row>``);

plus ``answer_type`` (``"math"`` or ``"choice"``), which ``psnlib.tasks.math_reward.math_reward``
reads to choose between math-verify and a letter comparison.

The field mapping of each data set lives in one place, its ``RealBenchmark`` entry in
``REAL_BENCHMARKS`` below; a field that is missing or renamed upstream raises a ``ValueError``
that names the data set, the field and the fields found, so fixing it is a one-line edit there.
A data set published in several layouts lists the others (``layouts``): a field may be a path
into a struct column (``reward_model.ground_truth``), and a question field holding a chat (a list
of ``role`` / ``content`` messages, verl's format) gives its last user message.

Offline (tests, mirrors, pre-downloaded files) pass ``data_files``: a file or list of files in
the hub data set's own format (parquet, json/jsonl or csv; the same field names), or a local
directory holding them; the rows then go through the same mapping.

LiveCodeBench is registered but out of scope: judging generated programs needs a sandboxed code
runner (untrusted code, per-problem time and memory limits), which psnlib does not ship. Loading
it raises ``NotImplementedError`` with that reason.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from datasets import Dataset, load_dataset

BOXED_INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."
CHOICE_INSTRUCTION = (
    "Please reason step by step, and put the letter of the correct option "
    "(A, B, C or D) within \\boxed{}."
)
CHOICE_LETTERS = "ABCD"
OUT_COLUMNS = ("prompt", "answer", "id", "answer_type")


@dataclass(frozen=True)
class RealBenchmark:
    """One hub data set and how its fields map to ``prompt``, ``answer`` and ``id``.

    ``question_field`` and ``answer_field`` name the hub fields of the question and the gold
    answer; ``id_field`` the row identifier (``None``: ``<name>-<row index>``). For multiple
    choice (``answer_type="choice"``), ``answer_field`` holds the correct option's text and
    ``distractor_fields`` the wrong options' texts. ``hub_data_files`` selects files inside the
    hub repository where the data set has no named config for the subset. ``layouts`` are
    other ``(question_field, answer_field)`` pairs, tried in order when the fields of the first
    are missing. ``context_field``, when a row has it non-empty, is put before the question.
    ``unsupported``, when set, is the reason the benchmark cannot be loaded.
    """

    name: str
    title: str
    role: str  # "eval" (in-distribution math), "ood" (out-of-distribution) or "train"
    hub_id: str
    split: str
    question_field: str
    answer_field: str
    id_field: str | None = None
    config: str | None = None
    hub_data_files: str | None = None
    answer_type: str = "math"
    distractor_fields: tuple[str, ...] = ()
    layouts: tuple[tuple[str, str], ...] = ()
    context_field: str | None = None
    unsupported: str | None = None
    notes: str = ""

    @property
    def required_fields(self) -> tuple[str, ...]:
        """The hub fields the first layout reads."""
        return self.layout_fields(self.question_field, self.answer_field)

    def layout_fields(self, question_field: str, answer_field: str) -> tuple[str, ...]:
        """The top-level hub fields that a layout (question and answer field) reads."""
        fields = (question_field, answer_field, *self.distractor_fields)
        fields += (self.id_field,) if self.id_field else ()
        return tuple(f.split(".")[0] for f in fields)


REAL_BENCHMARKS: dict[str, RealBenchmark] = {
    "aime24": RealBenchmark(
        name="aime24",
        title="AIME 2024",
        role="eval",
        hub_id="Maxwell-Jia/AIME_2024",
        split="train",  # the only split; 30 problems (AIME 2024 I and II)
        question_field="Problem",
        answer_field="Answer",  # an integer 0..999
        id_field="ID",  # e.g. "2024-I-1"
        notes="fields ID, Problem, Solution, Answer",
    ),
    "aime25": RealBenchmark(
        name="aime25",
        title="AIME 2025",
        role="eval",
        hub_id="math-ai/aime25",
        split="test",  # 30 problems, file test.jsonl
        question_field="problem",
        answer_field="answer",
        id_field="id",
        notes="fields problem, answer, id",
    ),
    "amc23": RealBenchmark(
        name="amc23",
        title="AMC 2023",
        role="eval",
        hub_id="math-ai/amc23",
        split="test",  # 40 problems, file test-00000-of-00001.parquet
        question_field="question",
        answer_field="answer",  # may be stored as a number (e.g. 27.0): written as "27"
        id_field="id",
        notes="fields id, question, answer, url",
    ),
    "math500": RealBenchmark(
        name="math500",
        title="MATH500",
        role="eval",
        hub_id="HuggingFaceH4/MATH-500",
        split="test",  # 500 problems
        question_field="problem",
        answer_field="answer",
        id_field="unique_id",  # e.g. "test/precalculus/807.json"
        notes="fields problem, solution, answer, subject, level, unique_id",
    ),
    "minerva": RealBenchmark(
        name="minerva",
        title="Minerva math",
        role="eval",
        hub_id="math-ai/minervamath",
        split="test",  # 272 problems, file test.jsonl
        question_field="question",
        answer_field="answer",
        id_field=None,  # no id field known: row index used
        notes="fields question, answer",
    ),
    "olympiadbench": RealBenchmark(
        name="olympiadbench",
        title="OlympiadBench (math, English, text-only, open-ended)",
        role="eval",
        hub_id="Hothan/OlympiadBench",
        config="OE_TO_maths_en_COMP",  # OE: open-ended, TO: text-only; 674 problems
        split="train",  # the only split
        question_field="question",
        answer_field="final_answer",  # a list of strings: joined with ", "
        id_field="id",
        context_field="context",  # set on some problems: the setting the question refers to
        notes="fields id, question, context, solution, final_answer (list), unit, ...",
    ),
    "gpqa-diamond": RealBenchmark(
        name="gpqa-diamond",
        title="GPQA-Diamond",
        role="ood",
        hub_id="Idavidrein/gpqa",  # gated on the hub: accept its terms and log in first
        config="gpqa_diamond",  # 198 questions, file gpqa_diamond.csv
        split="train",  # the only split
        question_field="Question",
        answer_field="Correct Answer",
        distractor_fields=("Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3"),
        id_field="Record ID",  # not confirmed; the CSV's record identifier column
        answer_type="choice",
        notes="options shuffled per question from (seed, id); gold = the correct letter",
    ),
    "livecodebench": RealBenchmark(
        name="livecodebench",
        title="LiveCodeBench (code generation)",
        role="ood",
        hub_id="livecodebench/code_generation_lite",
        split="test",
        question_field="question_content",
        answer_field="private_test_cases",
        id_field="question_id",
        unsupported=(
            "LiveCodeBench is out of scope in psnlib: scoring a generated program means running "
            "untrusted code against hidden test cases under time and memory limits, which needs "
            "a sandboxed code runner that psnlib does not ship (math-verify cannot judge code). "
            "Use LiveCodeBench's own evaluation harness on generated programs instead."
        ),
    ),
    "simplerl-math-l3to5": RealBenchmark(
        name="simplerl-math-l3to5",
        title="SimpleRL-Zoo MATH levels 3-5 (RL training set)",
        role="train",
        hub_id="hkust-nlp/SimpleRL-Zoo-Data",
        hub_data_files="simplelr_qwen_level3to5/train.parquet",  # folder confirmed, file assumed
        split="train",
        # SimpleRL-Zoo's own layout; verl's (a chat prompt, the answer in reward_model) too
        question_field="question",
        answer_field="gt_answer",
        layouts=(("prompt", "reward_model.ground_truth"),),
        id_field=None,
        notes="the 8K MATH level 3-5 problems SimpleRL-Zoo and PSN-GRPO train on; fields not "
        "confirmed on the hub: question / gt_answer, or verl's prompt / reward_model",
    ),
}


def real_benchmark_names(role: str | None = None) -> list[str]:
    """Registered names, optionally of one role ("eval", "ood" or "train")."""
    return [name for name, spec in REAL_BENCHMARKS.items() if role in (None, spec.role)]


def get_real_benchmark(name: str) -> RealBenchmark:
    """The registry entry of ``name``; unknown names raise a ``KeyError`` listing known ones."""
    if name not in REAL_BENCHMARKS:
        raise KeyError(
            f"unknown real benchmark {name!r}; known: {', '.join(sorted(REAL_BENCHMARKS))}"
        )
    return REAL_BENCHMARKS[name]


_BUILDERS = {".parquet": "parquet", ".json": "json", ".jsonl": "json", ".csv": "csv"}


def _local_builder(files: Sequence[str]) -> str:
    suffixes = {Path(f).suffix.lower() for f in files}
    builders = {_BUILDERS.get(s) for s in suffixes}
    if len(builders) != 1 or None in builders:
        raise ValueError(
            f"data_files must all be one of {sorted(_BUILDERS)} (parquet, json/jsonl, csv), "
            f"got suffixes {sorted(suffixes)}"
        )
    return builders.pop()


def _load_raw(spec: RealBenchmark, data_files: str | Path | Sequence[str | Path] | None):
    if data_files is None:
        kwargs = {"split": spec.split}
        if spec.hub_data_files is not None:
            kwargs["data_files"] = {spec.split: spec.hub_data_files}
        return load_dataset(spec.hub_id, spec.config, **kwargs)
    if isinstance(data_files, str | Path) and Path(data_files).is_dir():
        directory = Path(data_files)
        files = sorted(
            str(p) for p in directory.rglob("*") if p.is_file() and p.suffix.lower() in _BUILDERS
        )
        if not files:
            raise ValueError(f"{spec.title}: no parquet/json/jsonl/csv files in {directory}")
    elif isinstance(data_files, str | Path):
        files = [str(data_files)]
    else:
        files = [str(f) for f in data_files]
    return load_dataset(_local_builder(files), data_files={spec.split: files}, split=spec.split)


def _field(row: dict, path: str) -> object:
    """``row[path]``, where ``a.b`` reads key ``b`` of the struct in column ``a``."""
    value = row
    for key in path.split("."):
        value = value[key]
    return value


def _question_text(value: object) -> str:
    """A question field's text; a chat (list of role / content messages) gives its last user
    message."""
    if isinstance(value, list | tuple):
        users = [m["content"] for m in value if isinstance(m, dict) and m.get("role") == "user"]
        if not users:
            raise ValueError(f"a chat question without a user message: {value!r:.200}")
        return str(users[-1])
    return str(value)


def _answer_text(value: object) -> str:
    if isinstance(value, list | tuple):
        return ", ".join(_answer_text(v) for v in value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def _choice_prompt(question: str, options: list[str]) -> str:
    lines = [f"{letter}) {text}" for letter, text in zip(CHOICE_LETTERS, options, strict=True)]
    return f"{question.strip()}\n\n" + "\n".join(lines) + f"\n\n{CHOICE_INSTRUCTION}"


def _layout(spec: RealBenchmark, found: list[str]) -> tuple[str, str]:
    """The first layout (question field, answer field) whose fields the data set has."""
    layouts = ((spec.question_field, spec.answer_field), *spec.layouts)
    for layout in layouts:
        if all(field in found for field in spec.layout_fields(*layout)):
            return layout
    missing = [f for f in spec.required_fields if f not in found]
    others = f" (or any layout of {list(spec.layouts)})" if spec.layouts else ""
    raise ValueError(
        f"{spec.title} ({spec.hub_id}): field {missing[0]!r}{others} not found; fields found: "
        f"{found}. Update the field mapping of {spec.name!r} in psnlib/tasks/real.py."
    )


def _normalise_row(
    spec: RealBenchmark, layout: tuple[str, str], row: dict, index: int, seed: int
) -> dict:
    row_id = str(row[spec.id_field]) if spec.id_field else f"{spec.name}-{index}"
    question_field, answer_field = layout
    question = _question_text(_field(row, question_field))
    context = row.get(spec.context_field) if spec.context_field else None
    if context and str(context).strip():
        question = f"{str(context).strip()}\n\n{question.strip()}"
    if spec.answer_type == "choice":
        correct = str(_field(row, answer_field)).strip()
        options = [correct] + [str(row[f]).strip() for f in spec.distractor_fields]
        # One generator per question, seeded by (seed, id): the order does not depend on which
        # other rows are loaded or in what order.
        random.Random(f"{seed}:{row_id}").shuffle(options)
        letter = CHOICE_LETTERS[options.index(correct)]
        return {
            "prompt": _choice_prompt(question, options),
            "answer": letter,
            "id": row_id,
            "answer_type": "choice",
        }
    asks = "\\boxed" in question  # a verl prompt already asks for the boxed answer
    return {
        "prompt": question.strip() if asks else f"{question.strip()}\n\n{BOXED_INSTRUCTION}",
        "answer": _answer_text(_field(row, answer_field)),
        "id": row_id,
        "answer_type": "math",
    }


def load_real_benchmark(
    name: str,
    n: int | None = None,
    *,
    data_files: str | Path | Sequence[str | Path] | None = None,
    seed: int = 0,
) -> Dataset:
    """A real benchmark as a ``Dataset``: columns ``prompt``, ``answer``, ``id``, ``answer_type``.

    ``name`` is a key of ``REAL_BENCHMARKS``. ``n`` keeps ``n`` rows drawn at random with
    ``seed`` (in their original order); ``None`` or 0 keeps all. ``data_files`` reads local
    files (or a directory of them) in the hub data set's format instead of the hub. ``seed`` also
    fixes the option order of multiple-choice questions.
    """
    spec = get_real_benchmark(name)
    if spec.unsupported:
        raise NotImplementedError(f"{spec.title} ({spec.hub_id}): {spec.unsupported}")
    if n is not None and n < 0:
        raise ValueError(f"n must be >= 0 or None, got {n}")
    raw = _load_raw(spec, data_files)
    layout = _layout(spec, list(raw.column_names))
    indices = list(range(len(raw)))
    if n:
        if n > len(raw):
            raise ValueError(f"{spec.title}: n={n} but the data set has {len(raw)} rows")
        indices = sorted(random.Random(seed).sample(indices, n))
        raw = raw.select(indices)
    rows = [_normalise_row(spec, layout, row, i, seed) for i, row in zip(indices, raw, strict=True)]
    return Dataset.from_dict({col: [r[col] for r in rows] for col in OUT_COLUMNS})
