# lme4's singular decision on maximal random-slope models near the boundary
# (analysis/stats/singular.py: lmer_stop, lmer_decision; tests/analysis/stats/test_simplify.py).
#
# Run from the repository root after `python tests/analysis/r/make_datasets.py`:
#   Rscript tests/analysis/r/lme4_boundary_reference.R > tests/analysis/r/lme4_boundary_reference.csv
# Produced with R 4.2.2, lme4 1.1-31, lmerTest 3.1-3 (Debian bookworm packages).
#
# The maximal model, fitted as an analyst fits it, with lmer's defaults (nloptwrap: BOBYQA with
# xtol_abs = ftol_abs = 1e-8), with a numeric format code x (1 = summary):
#   m <- lmerTest::lmer(y ~ x + (1 + x | participant_id) + (1 + x | pair_id), data = d)
#   isSingular(m); getME(m, "theta"); summary(m)$coefficients["x", ]
# and once more with BOBYQA tightened (rhoend = 1e-12) to show where the optimum itself lies.
source("tests/analysis/r/lmer_setup.R")  # packages, ctrl (tightened BOBYQA), put()

quiet <- lmerControl(check.conv.singular = "ignore")
f <- y ~ x + (1 + x | participant_id) + (1 + x | pair_id)
for (ds in c("slopes_flat_70x10", "slopes_edge_70x10", "slopes_edge2_70x10")) {
  d <- read.csv(file.path("tests/analysis/r/data", paste0(ds, ".csv")))
  d$x <- as.numeric(d$format == "summary")
  d$y <- d$wtp_premium_pct
  m <- lmerTest::lmer(f, data = d, control = quiet)
  put(ds, "default_singular", isSingular(m))
  th <- getME(m, "theta")
  for (i in seq_along(th)) put(ds, paste0("default_theta_", i), th[i])
  s <- summary(m)$coefficients
  put(ds, "default_format_estimate", s["x", "Estimate"])
  put(ds, "default_format_se", s["x", "Std. Error"])
  put(ds, "default_format_df", s["x", "df"])
  put(ds, "default_reml_criterion", REMLcrit(m))
  mt <- lmerTest::lmer(f, data = d, control = ctrl)
  put(ds, "tight_singular", isSingular(mt))
  put(ds, "tight_reml_criterion", REMLcrit(mt))
  tht <- getME(mt, "theta")
  for (i in seq_along(tht)) put(ds, paste0("tight_theta_", i), tht[i])
}
write.csv(out, stdout(), row.names = FALSE, quote = FALSE)
