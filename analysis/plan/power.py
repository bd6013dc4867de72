"""Power of the study's own design by simulation, and the type-I error of its stopping rule.

Each simulation draws one study as its file defines it (its blocks, formats, Latin square and
pairs: :func:`analysis.plan.simulate.simulate_arrivals`), takes the
completed, non-excluded participants of each look in arrival order as on real data, fits the
pre-registered model at each look and stops where the design's boundary says; a rejection is
a crossing of an efficacy bound. Without looks it is one fit at N against the fixed-design
critical value. With the effect at its null value (odds ratio 1, WTP difference 0) the
rejection rate is the type-I error of the whole procedure.

Runs are seeded per simulation (``SeedSequence([seed, n, index])``: the same numbers whatever
the number of processes or the order they finish in), spread over processes, shown with a tqdm
bar, and resumable: every finished simulation is appended to a JSON-lines file whose first
line holds the configuration, and a run with the same configuration skips what is there.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from analysis.plan.simulate import Scenario, simulate_arrivals

if TYPE_CHECKING:
    import pandas as pd

    from analysis.plan.spec import AnalysisPlan, ChoiceBlock

__all__ = [
    "ResultsFileError",
    "SimulationJob",
    "clopper_pearson",
    "power_table",
    "run_simulations",
    "simulate_one",
]

FORMAT = "framelab-power/1"
# Simulations per task handed to a process: few enough for a live progress bar, enough to
# keep the hand-over cheap next to fits of 0.05-0.2 s.
CHUNK = 8


class ResultsFileError(ValueError):
    """A results file cannot be resumed (another configuration, or not a results file)."""


@dataclass(frozen=True)
class SimulationJob:
    """Everything one simulation needs (picklable, sent to the worker processes).

    Attributes
    ----------
    blocks : tuple of ChoiceBlock
        The study's product-choice blocks (pairs in stimulus-file order, formats).
    plan : AnalysisPlan
        The pre-registered analysis (test, levels, direction, alpha, rules, looks).
    scenario : Scenario
        Effect and variance components.
    seed : int
        Seed of the whole run.
    looks : bool
        Apply the plan's interim looks (else one look at N).
    """

    blocks: tuple[ChoiceBlock, ...]
    plan: AnalysisPlan
    scenario: Scenario
    seed: int
    looks: bool = True

    def config(self) -> dict[str, Any]:
        """What the results depend on (the results file's first line)."""
        return {
            "format": FORMAT,
            "blocks": [block.as_dict() for block in self.blocks],
            "analysis": self.plan.as_dict(),
            "scenario": self.scenario.as_dict(),
            "seed": self.seed,
            "looks": self.looks,
        }


def _plan_at(plan: AnalysisPlan, n: int, looks: bool) -> AnalysisPlan:
    from dataclasses import replace

    return replace(plan, planned_n=n, looks=plan.looks if looks else None)


def simulate_one(job: SimulationJob, n: int, index: int) -> dict[str, Any]:
    """Simulate one study of planned size ``n`` and apply the pre-registered rule.

    Parameters
    ----------
    job : SimulationJob
    n : int
        Planned N (completed, non-excluded participants at the final look).
    index : int
        Which simulation (with ``job.seed`` and ``n`` it seeds the stream).

    Returns
    -------
    dict
        ``n, sim, z`` (oriented statistic per look taken), ``estimate`` (per look), ``look``
        (where the design stopped), ``decision``, ``reject`` (bool), ``n_at_stop``
        (participants analysed there), ``failed`` (why a fit failed, else empty).
    """
    import numpy as np

    from analysis.plan.looks import look_sample, primary_test
    from analysis.plan.sequential import boundaries, look_decision
    from analysis.stats.crossed import ConvergenceError

    plan = _plan_at(job.plan, n, job.looks)
    rng = np.random.default_rng(np.random.SeedSequence([job.seed, n, index]))
    sizes = plan.look_sizes()
    design = plan.design()
    # Enough arrivals for the last look with room for exclusions (a shortfall is drawn again).
    arrivals = math.ceil(sizes[-1] / (1 - job.scenario.exclusion_share) * 1.3) + 8
    data = simulate_arrivals(job.blocks, arrivals, job.scenario, plan, rng)
    order = data["participant_id"].unique().tolist()
    bounds = boundaries(design)
    result: dict[str, Any] = {"n": n, "sim": index, "z": [], "estimate": [], "failed": ""}
    decision, look, n_at = "continue", 0, 0
    for k, size in enumerate(sizes):
        sample = look_sample(data, size, plan, order=order)
        while sample is None:  # more exclusions than the margin allowed for: more arrivals
            more = simulate_arrivals(job.blocks, arrivals, job.scenario, plan, rng)
            more["participant_id"] = more["participant_id"] + f"_{len(order)}"
            data = _concat(data, more)
            order = data["participant_id"].unique().tolist()
            sample = look_sample(data, size, plan, order=order)
        look, n_at = k + 1, int(sample["participant_id"].nunique())
        try:
            stat = primary_test(sample, plan)
        except (ConvergenceError, ValueError) as exc:
            # No statistic: no stop here; at the last look the study ends without rejecting.
            result["failed"] = f"look {k + 1}: {exc}"[:300]
            result["z"].append(None)
            result["estimate"].append(None)
            decision = "failed" if k == len(sizes) - 1 else "continue"
            continue
        result["z"].append(stat["z"])
        result["estimate"].append(stat["estimate"])
        decision = look_decision(stat["z"], bounds.iloc[k], design.sided, final=k == len(sizes) - 1)
        if decision != "continue":
            break
    result.update(look=look, decision=decision, reject=decision == "efficacy", n_at_stop=n_at)
    return result


def _concat(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    import pandas as pd

    return pd.concat([a, b], ignore_index=True)


def _chunk(job: SimulationJob, tasks: list[tuple[int, int]]) -> list[dict[str, Any]]:
    from analysis.stats.crossed import one_blas_thread

    with one_blas_thread():
        return [simulate_one(job, n, i) for n, i in tasks]


def _read_results(path: Path, config: dict[str, Any]) -> list[dict[str, Any]]:
    """The simulations already in ``path`` for this configuration (none if it is new)."""
    if not path.exists() or path.stat().st_size == 0:
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    try:
        header = json.loads(lines[0])
    except (json.JSONDecodeError, IndexError):
        raise ResultsFileError(f"{path} is not a FrameLab power results file") from None
    if header.get("format") != FORMAT:
        raise ResultsFileError(f"{path} is not a FrameLab power results file")
    if header != config:
        differs = sorted(k for k in set(header) | set(config) if header.get(k) != config.get(k))
        raise ResultsFileError(
            f"{path} holds simulations of another configuration (differs in: "
            f"{', '.join(differs)}); give another output folder or delete the file to start over"
        )
    done = []
    for line in lines[1:]:
        try:
            done.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line cut short by an interrupted run: that simulation runs again
    return done


def run_simulations(
    job: SimulationJob,
    ns: Sequence[int],
    n_sims: int,
    results_path: str | Path,
    *,
    jobs: int = 1,
    progress: bool = True,
) -> list[dict[str, Any]]:
    """Run ``n_sims`` simulations for each planned N, resuming from ``results_path``.

    Parameters
    ----------
    job : SimulationJob
        Design, plan, scenario and seed.
    ns : sequence of int
        Planned Ns to simulate.
    n_sims : int
        Simulations per N.
    results_path : str or Path
        JSON-lines file: the configuration, then one simulation per line (appended as they
        finish; an interrupted run resumes where it stopped).
    jobs : int
        Worker processes (1: in this process).
    progress : bool
        Show a tqdm bar.

    Returns
    -------
    list of dict
        Every simulation of these Ns (:func:`simulate_one`), old and new.

    Raises
    ------
    ResultsFileError
        ``results_path`` holds simulations of another configuration.
    """
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from contextlib import ExitStack

    from tqdm.auto import tqdm

    path = Path(results_path)
    config = job.config()
    done = _read_results(path, config)
    have = {(r["n"], r["sim"]) for r in done}
    todo = [(n, i) for n in ns for i in range(n_sims) if (n, i) not in have]
    if not path.exists() or path.stat().st_size == 0:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(config) + "\n", encoding="utf-8")
    chunks = [todo[i : i + CHUNK] for i in range(0, len(todo), CHUNK)]
    new: list[dict[str, Any]] = []
    with ExitStack() as stack:
        if jobs > 1 and chunks:
            pool = ProcessPoolExecutor(max_workers=jobs)
            # An interrupted run (Ctrl-C) drops the simulations not started instead of
            # waiting for them; those written so far are kept for the next run.
            stack.callback(pool.shutdown, wait=True, cancel_futures=True)
            # Submitted before the progress bar exists: the workers are forked before tqdm
            # starts its monitor thread.
            results = as_completed([pool.submit(_chunk, job, chunk) for chunk in chunks])
            finished = (future.result() for future in results)
        else:
            finished = (_chunk(job, chunk) for chunk in chunks)
        bar = stack.enter_context(
            tqdm(
                total=len(ns) * n_sims,
                initial=len(ns) * n_sims - len(todo),
                desc="simulations",
                unit="sim",
                disable=not progress,
            )
        )
        out = stack.enter_context(path.open("a", encoding="utf-8"))
        for rows in finished:
            for row in rows:
                out.write(json.dumps(row) + "\n")
            out.flush()
            new.extend(rows)
            bar.update(len(rows))
    wanted = set(ns)
    return [r for r in done + new if r["n"] in wanted and r["sim"] < n_sims]


def clopper_pearson(k, n, confidence: float = 0.95):
    """Exact (Clopper-Pearson) interval of a binomial proportion (vectorised).

    Parameters
    ----------
    k, n : int or array-like
        Successes and trials.
    confidence : float
        Coverage.

    Returns
    -------
    tuple of arrays
        ``(low, high)``.

    Examples
    --------
    >>> [round(float(v), 4) for v in clopper_pearson(50, 1000)]
    [0.0373, 0.0654]
    """
    import numpy as np
    from scipy.stats import beta

    k, n = np.asarray(k, float), np.asarray(n, float)
    a = (1 - confidence) / 2
    low = np.where(k > 0, beta.ppf(a, k, n - k + 1), 0.0)
    high = np.where(k < n, beta.ppf(1 - a, k + 1, n - k), 1.0)
    return low, high


def power_table(
    simulations: Sequence[dict[str, Any]], *, target: float | None = None, n_looks: int = 1
) -> pd.DataFrame:
    """Power per planned N with its Monte-Carlo interval, from :func:`run_simulations`.

    Parameters
    ----------
    simulations : sequence of dict
        Simulation results.
    target : float, optional
        Target power; adds ``reaches_target``.
    n_looks : int
        Looks of the design (the ``stop_look_k`` columns).

    Returns
    -------
    pandas.DataFrame
        One row per N: ``n``, ``n_sims``, ``n_rejected``, ``estimate`` (power: the share of
        simulations that crossed an efficacy bound), ``ci_low``, ``ci_high`` (Clopper-Pearson
        95 %), ``mc_se`` (the binomial standard error), ``expected_n`` (mean participants
        analysed when the study stopped), ``stop_look_1`` ... (share stopping at each look, for
        any reason), ``n_failed`` (simulations with a fit that did not converge: counted as not
        rejecting), ``mean_estimate`` (mean estimate at the stopping look), ``reaches_target``.
    """
    import numpy as np
    import pandas as pd

    frame = pd.DataFrame(list(simulations))
    rows = []
    for n, group in frame.groupby("n", sort=True):
        k, total = int(group["reject"].sum()), len(group)
        low, high = clopper_pearson(k, total)
        power = k / total
        last = [
            next((v for v in reversed(e) if v is not None), math.nan) for e in group["estimate"]
        ]
        row = {
            "n": int(n),
            "n_sims": total,
            "n_rejected": k,
            "estimate": power,
            "ci_low": float(low),
            "ci_high": float(high),
            "mc_se": math.sqrt(power * (1 - power) / total),
            "expected_n": float(group["n_at_stop"].mean()),
        }
        for look in range(1, n_looks + 1):
            row[f"stop_look_{look}"] = float((group["look"] == look).mean())
        row["n_failed"] = int((group["failed"] != "").sum())
        row["mean_estimate"] = float(np.nanmean(last)) if np.isfinite(last).any() else math.nan
        if target is not None:
            row["reaches_target"] = power >= target
        rows.append(row)
    return pd.DataFrame(rows)


def n_for_power(table: pd.DataFrame, target: float) -> dict[str, float | None]:
    """The N that reaches a target power, read off a :func:`power_table`.

    Parameters
    ----------
    table : pandas.DataFrame
        Power per N.
    target : float
        Target power.

    Returns
    -------
    dict
        ``n_simulated``: the smallest simulated N whose estimate reaches the target (``None``
        if none does); ``n_interpolated``: linear interpolation of N between the two simulated
        Ns around the target on the probit scale of power (``None`` outside the grid).
    """
    from scipy.stats import norm

    table = table.sort_values("n")
    reached = table[table["estimate"] >= target]
    n_sim = int(reached["n"].iloc[0]) if len(reached) else None
    n_interp = None
    below = table[table["estimate"] < target]
    if n_sim is not None and len(below) and below["n"].max() < n_sim:
        lo, hi = below.iloc[-1], table[table["n"] == n_sim].iloc[0]
        clip = 1 / (2 * max(lo["n_sims"], hi["n_sims"]))
        p_lo, p_hi = (min(max(p, clip), 1 - clip) for p in (lo["estimate"], hi["estimate"]))
        q_lo, q_hi, q_t = norm.ppf(p_lo), norm.ppf(p_hi), norm.ppf(target)
        if q_hi > q_lo:
            n_interp = float(lo["n"] + (q_t - q_lo) / (q_hi - q_lo) * (hi["n"] - lo["n"]))
    return {"n_simulated": n_sim, "n_interpolated": n_interp}
