"""``framelab plan``: power of the study's own design and the boundaries of its looks."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import click

# The scenario values a power run needs, per test, with what each means on the command line.
_NEEDED = {
    "choice_glmm": ("baseline", "sd_participant", "sd_pair"),
    "wtp_lmm": ("baseline", "sd_participant", "sd_pair", "sd_residual"),
}


@click.group()
def plan() -> None:
    """Plan a study from its YAML: power by simulation, boundaries of the interim looks."""


def _read(path: str):
    from analysis.plan.spec import PlanError, read_study

    try:
        study = read_study(path)
        return study, study.require_plan()
    except PlanError as exc:
        raise click.ClickException(str(exc)) from None


def _ns(text: str | None, planned: int) -> list[int]:
    if not text:
        return sorted({max(4, round(planned * f)) for f in (0.5, 0.75, 1.0, 1.25, 1.5)})
    try:
        values = sorted({int(v) for v in text.split(",") if v.strip()})
    except ValueError:
        raise click.BadParameter("give whole numbers, e.g. 40,60,80", param_hint="--n") from None
    if not values or values[0] < 4:
        raise click.BadParameter("each N must be at least 4", param_hint="--n")
    return values


@plan.command("power")
@click.argument("study_path", metavar="STUDY.yaml", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--effect",
    type=float,
    required=True,
    help="The effect to detect: the conditional odds ratio (choice_glmm) or the premium "
    "difference in percent points (wtp_lmm), treatment minus reference.",
)
@click.option(
    "--baseline",
    type=float,
    help="choice_glmm: P(choosing the target) with the reference format; wtp_lmm: the mean "
    "premium (percent) with it. Default: from --pilot.",
)
@click.option("--sd-participant", type=float, help="SD of the participant intercepts.")
@click.option("--sd-pair", type=float, help="SD of the pair intercepts.")
@click.option("--sd-residual", type=float, help="wtp_lmm: SD of one answer (percent).")
@click.option(
    "--exclusion-share",
    type=click.FloatRange(0, 0.9, max_open=True),
    help="Share of participants the exclusion rules remove [default: from --pilot, else 0].",
)
@click.option(
    "--pilot",
    "pilot_path",
    type=click.Path(exists=True, dir_okay=False),
    help="A pilot's long export: baseline, SDs and exclusion share estimated from it.",
)
@click.option("--n", "n_text", metavar="N[,N...]", help="Planned Ns [default: 50-150 % of plan].")
@click.option("--sims", type=click.IntRange(min=1), default=1000, show_default=True)
@click.option("--seed", type=int, default=1, show_default=True)
@click.option(
    "--jobs",
    type=click.IntRange(min=1),
    default=None,
    help="Worker processes [default: the CPUs this process may use].",
)
@click.option("--target", type=click.FloatRange(0, 1), default=0.8, show_default=True)
@click.option("--no-looks", is_flag=True, help="Ignore the interim looks (a fixed design).")
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False),
    help="Output folder: simulations.jsonl (resumable), power.csv, power.json.",
)
@click.option("--quiet", is_flag=True, help="No progress bar.")
def power_command(
    study_path: str,
    effect: float,
    baseline: float | None,
    sd_participant: float | None,
    sd_pair: float | None,
    sd_residual: float | None,
    exclusion_share: float | None,
    pilot_path: str | None,
    n_text: str | None,
    sims: int,
    seed: int,
    jobs: int | None,
    target: float,
    no_looks: bool,
    out_dir: str,
    quiet: bool,
) -> None:
    """Power of the study as defined, by simulating it and fitting its pre-registered test."""
    from analysis.plan.power import (
        ResultsFileError,
        SimulationJob,
        n_for_power,
        power_table,
        run_simulations,
    )
    from analysis.plan.simulate import Scenario, pilot_components
    from analysis.safecsv import write_csv

    study, analysis_plan = _read(study_path)
    given = {
        "baseline": baseline,
        "sd_participant": sd_participant,
        "sd_pair": sd_pair,
        "sd_residual": sd_residual,
        "exclusion_share": exclusion_share,
    }
    source = "given"
    if pilot_path:
        from analysis.io import ExportFormatError, load_choice
        from analysis.stats.crossed import ConvergenceError

        name = Path(pilot_path).name
        try:
            pilot = pilot_components(load_choice(pilot_path), analysis_plan)
        except (ExportFormatError, ConvergenceError, ValueError) as exc:
            raise click.ClickException(f"pilot {name}: {exc}") from None
        source = f"pilot {name} ({int(pilot['n_participants'])} analysed)"  # type: ignore[call-overload]
        zero = [k for k in pilot["at_zero"] if given[k] is None]  # type: ignore[attr-defined]
        if zero:
            flags = ", ".join("--" + k.replace("_", "-") for k in zero)
            raise click.UsageError(
                f"pilot {name}: the model estimates {' and '.join(zero)} at 0 (a singular fit: "
                "bots answering at random, or too few participants to tell), which is no "
                f"planning value: state {flags} (e.g. from a published study or a larger pilot)"
            )
        given = {k: v if v is not None else pilot.get(k) for k, v in given.items()}  # type: ignore[misc]
    missing = [k for k in _NEEDED[analysis_plan.test] if given[k] is None]
    if missing:
        flags = ", ".join("--" + k.replace("_", "-") for k in missing)
        raise click.UsageError(
            f"{analysis_plan.test} needs {flags} (or --pilot EXPORT to estimate them)"
        )
    values = {k: v for k, v in given.items() if v is not None}
    try:
        scenario = Scenario(effect=effect, **values)
        scenario.check(analysis_plan.test)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    ns = _ns(n_text, analysis_plan.planned_n)
    use_looks = analysis_plan.looks is not None and not no_looks
    if use_looks:
        from dataclasses import replace

        from framelab_schema.analysis_block import MIN_LOOK_N

        for n in ns:
            sizes = replace(analysis_plan, planned_n=n).look_sizes()
            if sizes[0] < MIN_LOOK_N or any(b <= a for a, b in zip(sizes, sizes[1:], strict=False)):
                raise click.BadParameter(
                    f"N = {n} gives looks of {sizes} participants; each look needs at least "
                    f"{MIN_LOOK_N} and more than the look before",
                    param_hint="--n",
                )
    job = SimulationJob(study.blocks, analysis_plan, scenario, seed, looks=use_looks)
    jobs = jobs or len(os.sched_getaffinity(0))
    out = Path(out_dir)
    started = time.perf_counter()
    try:
        rows = run_simulations(
            job, ns, sims, out / "simulations.jsonl", jobs=jobs, progress=not quiet
        )
    except ResultsFileError as exc:
        raise click.ClickException(str(exc)) from None
    seconds = time.perf_counter() - started
    n_looks = len(analysis_plan.looks.at) if use_looks else 1
    table = power_table(rows, target=target, n_looks=n_looks)
    write_csv(table, out / "power.csv")
    needed = n_for_power(table, target)
    summary = {
        "study": study.slug,
        "bundle_sha256": study.bundle_sha256,
        "analysis": analysis_plan.as_dict(),
        "design": [block.as_dict() for block in study.blocks],
        "test": analysis_plan.test,
        "looks": analysis_plan.looks.as_dict() if use_looks else None,
        "alpha": analysis_plan.alpha,
        "direction": analysis_plan.direction,
        "scenario": scenario.as_dict(),
        "scenario_source": source,
        "seed": seed,
        "sims_per_n": sims,
        "target": target,
        "n_for_target": needed,
        "table": json.loads(table.to_json(orient="records")),
        "seconds_this_run": round(seconds, 1),
        "jobs": jobs,
    }
    (out / "power.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    unit = "odds ratio" if analysis_plan.test == "choice_glmm" else "percent points"
    ref, trt = analysis_plan.levels
    k = len(study.blocks[0].formats)
    click.echo(
        f"{study.slug}: {len(study.blocks)} product-choice block(s), "
        f"{sum(len(b.pairs) for b in study.blocks)} pairs, "
        f"{k} formats in a {k}-sequence Latin square; {analysis_plan.test} of {trt} vs {ref}"
    )
    click.echo(
        f"{study.slug}: {analysis_plan.test}, effect {effect:g} ({unit}), "
        + ", ".join(f"{k} {v:g}" for k, v in values.items())
        + f" ({source}); alpha {analysis_plan.alpha:g} {analysis_plan.direction}"
        + (f", looks at {', '.join(f'{f:g}' for f in analysis_plan.looks.at)}" if use_looks else "")
    )
    for _, r in table.iterrows():
        stops = ", ".join(f"{r[f'stop_look_{k}']:.0%} at look {k}" for k in range(1, n_looks + 1))
        click.echo(
            f"  N = {int(r['n'])}: power {r['estimate']:.3f} [{r['ci_low']:.3f}, "
            f"{r['ci_high']:.3f}] ({int(r['n_rejected'])}/{int(r['n_sims'])})"
            + (f"; expected N {r['expected_n']:.1f}; stops {stops}" if use_looks else "")
            + (f"; {int(r['n_failed'])} fits did not converge" if r["n_failed"] else "")
        )
    failed = [r for r in rows if r["failed"]]
    if failed:
        click.echo(
            f"{len(failed)} simulation(s) had a fit that did not converge, counted as not "
            f"rejecting (each reason in simulations.jsonl); the first: {failed[0]['failed']}"
        )
    if needed["n_simulated"] is None:
        click.echo(f"No simulated N reaches power {target:g}; simulate larger ones (--n).")
    else:
        interp = needed["n_interpolated"]
        click.echo(
            f"Power {target:g} from N = {needed['n_simulated']} (of those simulated)"
            + (f"; about N = {interp:.0f} by interpolation" if interp is not None else "")
        )
    click.echo(
        f"{len(rows)} simulations ({sims} per N) in {seconds:.0f} s on {jobs} process(es); "
        f"wrote {out / 'power.csv'} and {out / 'power.json'}"
    )


@plan.command("boundaries")
@click.argument("study_path", metavar="STUDY.yaml", type=click.Path(exists=True, dir_okay=False))
@click.option("--out", "out_path", type=click.Path(dir_okay=False), help="Also write a CSV.")
def boundaries_command(study_path: str, out_path: str | None) -> None:
    """The efficacy (and futility) bounds of the study's looks on the z scale."""
    from analysis.plan.sequential import boundaries
    from analysis.safecsv import write_csv

    _, analysis_plan = _read(study_path)
    table = boundaries(analysis_plan.design())
    table.insert(1, "n", analysis_plan.look_sizes())
    sided = "two-sided" if analysis_plan.sided == 2 else "one-sided"
    click.echo(
        f"{len(table)} look(s), {table['spending'].iloc[0]} spending, alpha "
        f"{analysis_plan.alpha:g} {sided}:"
    )
    for _, r in table.iterrows():
        futility = (
            "" if r["futility_z"] != r["futility_z"] else f", futility z {r['futility_z']:.4f}"
        )
        click.echo(
            f"  look {int(r['look'])} at N = {int(r['n'])}: efficacy z {r['efficacy_z']:.4f} "
            f"(nominal p {r['nominal_p']:.5f}){futility}"
        )
    if out_path:
        write_csv(table, out_path)
        click.echo(f"wrote {out_path}")
