"""Compare mitigation methods side by side: the seed study's summarization and fact-check tables.

:func:`run_comparison` runs the baseline and every chosen method through
:func:`analysis.mitigation.runner.run_method` (resumable), has a judge label the framing of every
source and summary (the engine's ``judge-framing`` task), and builds the tables with the metrics of
:mod:`analysis.metrics` — nothing is recomputed here:

- summarization: φframe (:func:`analysis.metrics.framing.framing_change`), mean s_b, s_m, s_e,
  coverage and ψpri (:func:`analysis.metrics.primacy.primacy_scores`) per method and dataset;
- fact-checking: actual, falsified and strict accuracy per method and cutoff split
  (:func:`analysis.metrics.hallucination.hallucination_scores`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.mitigation.registry import METHODS
from analysis.mitigation.runner import BASELINE, MethodRun, run_method

log = logging.getLogger(__name__)

__all__ = [
    "FACT_FIELDS",
    "FACT_METHODS",
    "SUMMARY_METHODS",
    "Comparison",
    "check_items",
    "fact_check_table",
    "plot_comparison",
    "run_comparison",
    "select_methods",
    "summarization_table",
]

SOURCE = "source"
SUMMARY_METHODS = tuple(n for n, m in METHODS.items() if m.task == "summarize")
FACT_METHODS = tuple(n for n, m in METHODS.items() if m.task == "fact-check")

SUMMARY_COLUMNS = [
    "dataset", "method", "family", "n", "phi_frame", "s_b", "s_m", "s_e", "coverage", "psi_pri",
]  # fmt: skip
# What a fact-check statement needs: the prompt reads ``text``; the metrics pair the answers by
# ``pair_id`` and score them against ``truth`` (``date`` is optional: undated items are reported).
FACT_FIELDS = ("item_id", "text", "pair_id", "truth")
SUMMARY_FIELDS = ("item_id", "text")

FACT_COLUMNS = [
    "period", "method", "family", "n_true", "n_false", "n_pairs",
    "actual_acc", "falsified_acc", "strict_acc", "actual_news_error_rate", "strict_error_rate",
]  # fmt: skip


def select_methods(spec: str | Sequence[str]) -> list[str]:
    """Resolve ``all`` or a comma-separated list (or a sequence) of method names.

    Unknown names raise ``KeyError`` listing the known ones; ``baseline`` is implied and dropped.
    """
    names = spec.split(",") if isinstance(spec, str) else list(spec)
    names = [n.strip() for n in names if n.strip()]
    if names == ["all"]:
        return list(METHODS)
    unknown = [n for n in names if n not in METHODS and n != BASELINE]
    if unknown:
        raise KeyError(f"unknown methods {unknown}; choose from {sorted(METHODS)} or 'all'")
    return [n for n in names if n != BASELINE]


def check_items(
    items: Sequence[Mapping[str, Any]], *, kind: str, source: str | Path | None = None
) -> None:
    """Refuse items that lack what the comparison needs, before anything is generated.

    Parameters
    ----------
    items : sequence of mapping
        Fact-check statements (``kind="facts"``: :data:`FACT_FIELDS`, a readable ``truth``) or
        documents to summarise (``kind="summaries"``: ``item_id``, ``text``).
    kind : {"facts", "summaries"}
        Which items they are.
    source : str or Path, optional
        The file they were read from, named in the message.

    Raises
    ------
    ValueError
        Naming the file, the first offending record (its position in the file, counting from 1,
        and its ``item_id``), the field, how many items share the problem, and what is needed.
    """
    from analysis.metrics.hallucination import parse_truth

    required = FACT_FIELDS if kind == "facts" else SUMMARY_FIELDS
    where = f"{source}: " if source is not None else ""
    need = (
        "fact checks need item_id (or id), text, pair_id and truth (and date to split at --cutoff)"
        if kind == "facts"
        else "documents to summarise need item_id (or id) and text"
    )
    for name in required:
        bad = [n for n, item in enumerate(items, start=1) if _blank(item.get(name))]
        if bad:
            first = bad[0]
            raise ValueError(
                f"{where}{len(bad)} of {len(items)} item(s) have no field {name!r} (first: record "
                f"{first}, item_id {items[first - 1].get('item_id')!r}); {need}. Nothing was "
                "generated."
            )
    if kind == "facts":
        for n, item in enumerate(items, start=1):
            try:
                parse_truth(item["truth"])
            except ValueError:
                raise ValueError(
                    f"{where}record {n}, item_id {item.get('item_id')!r}: field 'truth' is "
                    f"{item['truth']!r}, not a truth value (true/false, 1/0, actual/falsified). "
                    "Nothing was generated."
                ) from None


def _blank(value: Any) -> bool:
    return value is None or value == "" or (isinstance(value, float) and value != value)


def _family(method: str) -> str:
    return "baseline" if method == BASELINE else METHODS[method].family


def _order(methods: Iterable[str]) -> dict[str, int]:
    ranking = [BASELINE, *METHODS]
    return {m: ranking.index(m) if m in ranking else len(ranking) for m in methods}


def summarization_table(
    summaries: pd.DataFrame,
    judgments: pd.DataFrame,
    *,
    embedder: Callable[[Sequence[str]], Any],
    alpha: float = 0.05,
) -> pd.DataFrame:
    """φframe and primacy per method and dataset (the seed study's summarization table).

    Parameters
    ----------
    summaries : pandas.DataFrame
        ``summarize`` records (:func:`analysis.metrics.records.read_records`).
    judgments : pandas.DataFrame
        ``judge-framing`` records of the sources and of the summaries.
    embedder : callable
        ``texts -> ndarray`` for :func:`analysis.metrics.primacy.primacy_similarities`.
    alpha : float, default 0.05
        The ψpri margin.

    Returns
    -------
    pandas.DataFrame
        One row per (dataset, method), baseline first, then the registry order: ``dataset``,
        ``method``, ``family``, ``n`` (summaries), ``phi_frame``, ``s_b``, ``s_m``, ``s_e``,
        ``coverage``, ``psi_pri``, plus ``model``, ``n_framing`` (pairs with valid framing labels)
        and ``psi_rec``.
    """
    from analysis.metrics.framing import framing_change, join_framing
    from analysis.metrics.primacy import primacy_scores, primacy_similarities
    from analysis.metrics.records import summary_pairs

    keys = ["model", "dataset", "method"]
    pairs = summary_pairs(summaries)
    pairs["dataset"] = pairs["dataset"].astype(object).where(pairs["dataset"].notna(), "")
    prim = primacy_scores(primacy_similarities(pairs, embedder=embedder), alpha=alpha, by=keys)
    framing = framing_change(join_framing(judgments), by=keys).rename(columns={"n": "n_framing"})
    table = prim.merge(framing[[*keys, "n_framing", "phi_frame"]], on=keys, how="left")
    table["family"] = table["method"].map(_family)
    table = table.sort_values(
        ["dataset", "method"], key=lambda s: s.map(_order(s)) if s.name == "method" else s
    )
    extra = ["model", "n_framing", "psi_rec"]
    return table[SUMMARY_COLUMNS + extra].reset_index(drop=True)


def fact_check_table(records: pd.DataFrame, *, cutoff: str | None) -> pd.DataFrame:
    """Actual, falsified and strict accuracy per method and cutoff split.

    Parameters
    ----------
    records : pandas.DataFrame
        ``fact-check`` records whose inputs carry ``pair_id``, ``truth`` and ``date``.
    cutoff : str, optional
        The model's knowledge cutoff (ISO date); without it there is one split, ``all``.

    Returns
    -------
    pandas.DataFrame
        One row per (period, method): ``period`` (``pre``, ``post``, ``undated``, ``all``),
        ``method``, ``family``, ``n_true``, ``n_false``, ``n_pairs``, ``actual_acc``,
        ``falsified_acc``,
        ``strict_acc`` (from :func:`analysis.metrics.hallucination.hallucination_scores`),
        ``actual_news_error_rate`` (1 - ``actual_acc``: real news called false; averaged over
        models in the ``post`` rows it is the seed study's "hallucinates on 60.33 % of
        post-cutoff questions", 000 abstract and Table 4), ``strict_error_rate`` (1 -
        ``strict_acc``: pairs not both answered right) and ``model``.
    """
    from analysis.metrics.hallucination import add_error_rates, hallucination_scores
    from analysis.metrics.records import column, select_task

    rows = select_task(records, "fact-check")
    frames = []
    for method, group in rows.groupby("method", sort=False):
        for name in ("pair_id", "truth"):
            try:
                column(group, name)
            except KeyError:
                files = sorted(set(group["source_file"])) if "source_file" in group else []
                where = f"{', '.join(files)}: " if files else ""
                raise ValueError(
                    f"{where}the {method} fact-check records (first: item "
                    f"{group['item_id'].iloc[0]!r}) have no field {name!r}: they were written from "
                    "an input without it. Re-run into a fresh --out (records written since "
                    "input_hash exists are regenerated when their input changes)."
                ) from None
        flat = pd.DataFrame(
            {
                "model": group["model"],
                "item_id": group["item_id"],
                "pair_id": group[column(group, "pair_id")],
                "truth": group[column(group, "truth")],
                "date": group[column(group, "date")],
                "label": group["label"].fillna("other"),
            }
        )
        if "source_file" in group.columns:
            flat["source_file"] = group["source_file"]
        cutoffs = dict.fromkeys(flat["model"].unique(), cutoff) if cutoff else None
        scores = hallucination_scores(flat, cutoffs=cutoffs)
        frames.append(scores.assign(method=method))
    table = add_error_rates(pd.concat(frames, ignore_index=True))
    table["family"] = table["method"].map(_family)
    periods = {"pre": 0, "post": 1, "undated": 2, "all": 3}
    table = table.sort_values(
        ["period", "method"],
        key=lambda s: s.map(periods) if s.name == "period" else s.map(_order(s)),
    )
    return table[[*FACT_COLUMNS, "model"]].reset_index(drop=True)


@dataclass
class Comparison:
    """What :func:`run_comparison` produced."""

    summarization: pd.DataFrame | None = None
    fact_checking: pd.DataFrame | None = None
    runs: list[MethodRun] = field(default_factory=list)
    files: dict[str, Path] = field(default_factory=dict)


def run_comparison(
    backend: Any,
    out_dir: str | Path,
    *,
    methods: Sequence[str],
    summary_items: Sequence[Mapping[str, Any]] = (),
    fact_items: Sequence[Mapping[str, Any]] = (),
    judge: Any | None = None,
    embedder: Callable[[Sequence[str]], Any] | None = None,
    cutoff: str | None = None,
    params: Mapping[str, Mapping[str, Any]] | None = None,
    alpha: float = 0.05,
    progress: bool = True,
    templates: Mapping[str, Any] | None = None,
) -> Comparison:
    """Run the baseline and ``methods`` over the items and build the comparison tables.

    Parameters
    ----------
    backend : Backend
        The model under test. Methods it cannot run (decoding and attention methods on the
        ``openai`` backend) are skipped with a log message.
    out_dir : str or Path
        Gets ``summaries.jsonl``, ``fact_checks.jsonl``, ``judgments.jsonl`` (and their pass
        files and manifests); re-running resumes.
    methods : sequence of str
        Method names (see :func:`select_methods`); the baseline always runs.
    summary_items, fact_items : sequence of mapping
        Documents to summarise (``item_id``, ``text``, optional ``dataset``) and statements to
        check (``item_id``, ``text``, ``pair_id``, ``truth``, ``date``).
    judge : Backend, optional
        Labels the framing of sources and summaries: one fixed model for every model under
        test, as in the seed study. Required when there are summary items; passing ``backend``
        itself makes the model under test judge its own summaries (not the paper's setup).
    embedder : callable, optional
        For primacy; required when there are summary items.
    cutoff : str, optional
        The model's knowledge cutoff (ISO date): splits the fact checks and fills the
        Knowledge Boundary prompt.
    params : mapping, optional
        ``{method: {hyperparameter: value}}`` overrides.
    alpha : float, default 0.05
        The ψpri margin.
    progress : bool
        Show progress bars.
    templates : mapping, optional
        ``{task: PromptTemplate}`` replacing the baseline prompts of every method run
        (``--template TASK=PATH``).

    Returns
    -------
    Comparison
        The two tables (``None`` where there were no items), the runs and the files written.
    """
    from analysis.llm.store import read_records as stored_records
    from analysis.llm.tasks import TaskOptions, run_task
    from analysis.metrics.records import read_records

    # Every check that can fail on the inputs runs before the first model call: a missing field
    # found after generating would waste the run (and its records would resume without it).
    check_items(summary_items, kind="summaries")
    if summary_items and judge is None:
        raise ValueError(
            "a framing judge is needed for the summaries: one fixed model for every model "
            "under test (pass the model under test itself only on purpose)"
        )
    check_items(fact_items, kind="facts")
    params = dict(params or {})
    if (
        fact_items
        and "knowledge-boundary" in methods
        and backend.name in (METHODS["knowledge-boundary"].backends)
    ):
        kb_cutoff = cutoff or (params.get("knowledge-boundary") or {}).get("cutoff")
        undated = [i for i in fact_items if not kb_cutoff and not i.get("cutoff")]
        if undated:
            raise ValueError(
                "knowledge-boundary needs the model's cutoff date: pass --cutoff (or give every "
                f"statement a 'cutoff'; item {undated[0].get('item_id')!r} has none). Nothing "
                "was generated."
            )
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    result = Comparison()

    def runnable(name: str) -> bool:
        if name == BASELINE or backend.name in METHODS[name].backends:
            return True
        log.warning("skipping %s: it needs the %s backend", name, METHODS[name].backends[0])
        return False

    if summary_items:
        if embedder is None:
            raise ValueError("an embedder is needed for the primacy metrics")
        path = result.files.setdefault("summaries", out / "summaries.jsonl")
        chosen = [BASELINE, *(m for m in methods if m in SUMMARY_METHODS)]
        for name in filter(runnable, chosen):
            result.runs.append(
                run_method(name, summary_items, backend, path, params=params.get(name),
                           progress=progress, templates=templates)
            )  # fmt: skip
        judgments = result.files.setdefault("judgments", out / "judgments.jsonl")
        # Source judgments are stored under method "source": under "baseline" they would share
        # their resume keys with the judgments of the baseline summaries of the same items.
        # The judge's own prompt, when a prompts file gives one, for sources and summaries alike.
        judge_tpl = (templates or {}).get("judge-framing")
        run_task("judge-framing", summary_items, judge, judgments, method=SOURCE,
                 template=judge_tpl, progress=progress)  # fmt: skip
        summaries = read_records(path)
        # One judge run per method: summaries of one item by several methods share its item_id.
        # The stored records themselves are judged (not DataFrame rows, whose NaN fill and
        # int-to-float casts depend on the other records): their input hash must be stable.
        by_method: dict[str, list[dict[str, Any]]] = {}
        for record in stored_records(path):
            by_method.setdefault(str(record.get("method")), []).append(record)
        for name, records in by_method.items():
            run_task(
                "judge-framing",
                records,
                judge,
                judgments,
                method=name,
                template=judge_tpl,
                options=TaskOptions(text_field="output"),
                progress=progress,
            )
        result.summarization = summarization_table(
            summaries, read_records(judgments), embedder=embedder, alpha=alpha
        )
    if fact_items:
        path = result.files.setdefault("fact_checks", out / "fact_checks.jsonl")
        chosen = [BASELINE, *(m for m in methods if m in FACT_METHODS)]
        for name in filter(runnable, chosen):
            p = dict(params.get(name) or {})
            if name == "knowledge-boundary" and cutoff and not p.get("cutoff"):
                p["cutoff"] = cutoff
            result.runs.append(
                run_method(name, fact_items, backend, path, params=p, task="fact-check",
                           progress=progress, templates=templates)
            )  # fmt: skip
        result.fact_checking = fact_check_table(read_records(path), cutoff=cutoff)
    return result


def plot_comparison(
    table: pd.DataFrame,
    *,
    metrics: Sequence[str] = ("phi_frame", "psi_pri", "coverage"),
    ax: Any | None = None,
) -> Any:
    """Grouped horizontal bars of the summarization table: one group per method.

    Parameters
    ----------
    table : pandas.DataFrame
        Output of :func:`summarization_table` (rows of several datasets are averaged).
    metrics : sequence of str
        Columns to draw (shares in [0, 1]).
    ax : matplotlib.axes.Axes, optional
        Where to draw; a new figure otherwise.

    Returns
    -------
    matplotlib.axes.Axes
    """
    import numpy as np

    from analysis.plots.axes import axes_or_new

    means = table.groupby("method", sort=False)[list(metrics)].mean()
    ax = axes_or_new(ax, (7, 0.35 * len(means) * len(metrics) + 1.5))
    y = np.arange(len(means))
    height = 0.8 / len(metrics)
    for k, metric in enumerate(metrics):
        ax.barh(y + k * height, means[metric].to_numpy(), height=height, label=metric)
    ax.set_yticks(y + height * (len(metrics) - 1) / 2, means.index)
    ax.invert_yaxis()  # baseline on top
    ax.set_xlabel("share / similarity")
    ax.legend(loc="lower right")
    ax.set_title("Mitigation methods: framing change, primacy and coverage")
    return ax
