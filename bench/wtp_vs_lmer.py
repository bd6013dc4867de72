"""CPU per fit of the WTP mixed model against lme4's ``lmer``, in the same run.

Usage::

    .venv/bin/python bench/wtp_vs_lmer.py [--designs 70x10x2 120x12x4] [--repeats 10]
        [--slope-repeats 3] [--seed 0]

Each design is ``participants x pairs x formats``: every participant sees every pair once, the
format of a trial follows a Latin square over (participant + pair) mod k, and the premium is
``30 + shift[format] + a_participant + b_pair + (c_participant + d_pair) [summary] + e``
(SDs 6, 3, 2, 3, 8; seeded). Two models per design, each fitted by FrameLab and by R on the
same rows:

- intercepts: :func:`analysis.stats.wtp.wtp_mixed` (what ``framelab plan power`` fits) against
  ``m <- lmerTest::lmer(wtp ~ format + (1 | participant) + (1 | pair))`` with
  ``contest(m, L, joint = FALSE)`` for every contrast FrameLab reports (Satterthwaite df) and
  ``isSingular(m)``; and the same plus ``refitML(m)``, which FrameLab's fit also does (AIC/BIC);
- slopes: :func:`analysis.stats.crossed.crossed_slopes_lmm` on the summary-versus-original
  trials (the maximal model of each contrast of :func:`analysis.stats.wtp.wtp_slopes`) against
  ``lmerTest::lmer(wtp ~ x + (1 + x | participant) + (1 + x | pair))`` with ``summary(m)`` and
  ``isSingular(m)``, and the same plus ``refitML(m)``.

CPU seconds per fit (``time.process_time`` here, ``proc.time()`` user + system inside R, so R's
start-up and package loading are excluded), each the mean over the repeats after one warm-up
fit; ratios are FrameLab / lmer (below 1: FrameLab is faster). The estimates of both are printed
beside the times.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine_line  # noqa: E402

FORMATS = ["original", "summary", "mitigated:self-debias", "mitigated:rerank"]

R_SCRIPT = r"""
suppressPackageStartupMessages({library(lme4); library(lmerTest)})
args <- commandArgs(trailingOnly = TRUE)
d <- read.csv(args[1]); L <- as.matrix(read.csv(args[2])); s <- read.csv(args[3])
reps <- as.integer(args[4]); slope_reps <- as.integer(args[5])
d$format <- factor(d$format, levels = unique(d$format[order(d$level)]))
cpu <- function(f, n) {
  f()
  t <- proc.time(); for (i in seq_len(n)) f(); e <- proc.time() - t
  (e[["user.self"]] + e[["sys.self"]]) / n
}
icpt <- function(ml) function() {
  m <- lmerTest::lmer(wtp ~ format + (1 | participant_id) + (1 | pair_id), data = d)
  out <- contest(m, L, joint = FALSE); isSingular(m)
  if (ml) AIC(refitML(m))
  out
}
slopes <- function(ml) function() {
  m <- lmerTest::lmer(wtp ~ x + (1 + x | participant_id) + (1 + x | pair_id), data = s)
  out <- summary(m); isSingular(m)
  if (ml) AIC(refitML(m))
  out
}
est <- icpt(FALSE)()$Estimate
sl <- coef(slopes(FALSE)())["x", "Estimate"]
cat(sprintf("intercepts %.6g\n", cpu(icpt(FALSE), reps)))
cat(sprintf("intercepts_ml %.6g\n", cpu(icpt(TRUE), reps)))
cat(sprintf("slopes %.6g\n", cpu(slopes(FALSE), slope_reps)))
cat(sprintf("slopes_ml %.6g\n", cpu(slopes(TRUE), slope_reps)))
cat(sprintf("estimates %s\n", paste(sprintf("%.10g", c(est, sl)), collapse = " ")))
"""


def simulate(n_part: int, n_pair: int, k: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    part = np.repeat(np.arange(n_part), n_pair)
    pair = np.tile(np.arange(n_pair), n_part)
    level = (part + pair) % k
    shift = np.array([0.0, 4.5, 2.0, 3.0])[:k]
    a, c = rng.normal(0, 6, n_part), rng.normal(0, 2, n_part)
    b, dd = rng.normal(0, 3, n_pair), rng.normal(0, 3, n_pair)
    summary = level == 1
    wtp = 30 + shift[level] + a[part] + b[pair] + (c[part] + dd[pair]) * summary
    return pd.DataFrame(
        {
            "participant_id": [f"p{i:04d}" for i in part],
            "pair_id": [f"q{j:02d}" for j in pair],
            "format": np.asarray(FORMATS, dtype=object)[level],
            "level": level,
            "wtp": np.round(wtp + rng.normal(0, 8, len(part)), 2),
        }
    )


def cpu_per_fit(fn, repeats: int):
    out = fn()  # warm-up: imports and caches
    start = time.process_time()
    for _ in range(repeats):
        fn()
    return (time.process_time() - start) / repeats, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--designs", nargs="+", default=["70x10x2", "120x12x4"])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--slope-repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    from analysis.stats.choice import format_contrasts
    from analysis.stats.crossed import crossed_slopes_lmm
    from analysis.stats.wtp import wtp_mixed

    print(machine_line())
    rscript = subprocess.run(
        ["Rscript", "-e", 'cat(R.version.string, "lme4", format(packageVersion("lme4")))'],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    print(f"R: {rscript.stdout.strip()}; load average {os.getloadavg()[0]:.1f}")
    print("design | model | FrameLab s/fit | lmer s/fit | ratio | lmer + refitML s/fit | ratio")
    for design in args.designs:
        n_part, n_pair, k = (int(v) for v in design.split("x"))
        data = simulate(n_part, n_pair, k, args.seed)
        levels = FORMATS[:k]
        part = data[data["format"].isin(levels[:2])].copy()
        part["x"] = (part["format"] == "summary").astype(float)
        ours_i, fit = cpu_per_fit(
            lambda data=data, levels=levels: wtp_mixed(data, dv="wtp", levels=levels),
            args.repeats,
        )
        ours_s, sfit = cpu_per_fit(
            lambda part=part: crossed_slopes_lmm(
                part, dv="wtp", x="x", large="participant_id", small="pair_id"
            ),
            args.slope_repeats,
        )
        with tempfile.TemporaryDirectory() as tmp:
            paths = [Path(tmp) / name for name in ("d.csv", "L.csv", "s.csv", "fit.R")]
            data.to_csv(paths[0], index=False)
            weights = [c.weights for c in format_contrasts(levels)]
            pd.DataFrame(weights).to_csv(paths[1], index=False)
            part.to_csv(paths[2], index=False)
            paths[3].write_text(R_SCRIPT)
            cmd = ["Rscript", str(paths[3]), *map(str, paths[:3])]
            cmd += [str(args.repeats), str(args.slope_repeats)]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            sys.exit(f"Rscript failed:\n{proc.stderr}")
        r = {line.split()[0]: line.split()[1:] for line in proc.stdout.splitlines()}
        slope_est = float(sfit.set_index("term").loc["x", "estimate"])
        for model, ours in (("intercepts", ours_i), ("slopes", ours_s)):
            lmer, lmer_ml = float(r[model][0]), float(r[f"{model}_ml"][0])
            print(
                f"{design} | {model} | {ours:.4f} | {lmer:.4f} | {ours / lmer:.2f} | "
                f"{lmer_ml:.4f} | {ours / lmer_ml:.2f}"
            )
        ref = np.array(r["estimates"], float)
        mine = np.array([*fit["estimate"], slope_est])
        print(f"  estimates FrameLab {np.round(mine, 6)}, lmer {np.round(ref, 6)}")
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
