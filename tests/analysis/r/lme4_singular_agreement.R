# lme4's singular decision, and the simplified model it leads to, with lmer's defaults on sixty
# seeded 70 x 10 designs near the boundary (analysis/stats/singular.py, analysis/stats/simplify.py;
# tests/analysis/stats/test_singular_agreement.py).
#
# Run from the repository root (the designs are regenerated from their seeds, not committed):
#   python tests/analysis/r/make_datasets.py --agreement /tmp/agreement
#   Rscript tests/analysis/r/lme4_singular_agreement.R /tmp/agreement \
#     > tests/analysis/r/lme4_singular_agreement.csv
# Produced with R 4.2.2, lme4 1.1-31 (nloptr 2.0.3 on NLopt 2.7.1), lmerTest 3.1-3 (Debian bookworm).
#
# Each model is fitted as an analyst fits it, with lmer's defaults (nloptwrap: NLopt's BOBYQA,
# xtol_abs = ftol_abs = 1e-8, nloptr's xtol_rel = 1e-4, then lme4's restart_edge and
# check.boundary), with a numeric format code x (1 = summary):
#   m <- lmerTest::lmer(y ~ x + (1 + x | participant_id) + (1 + x | pair_id), data = d)
#   isSingular(m); getME(m, "theta"); REMLcrit(m); summary(m)$coefficients["x", ]
# The simplification rule follows, each step with lmer's defaults: if the maximal model is
# singular, y ~ x + (1 + x || participant_id) + (1 + x || pair_id); while singular, drop every
# term whose theta entry is below isSingular's 1e-4. `final_free` says which of the six entries of
# the maximal model's theta (participant: intercept, correlation, slope; then pair) the final
# model estimates. The maximal model is also fitted with BOBYQA tightened (lmer_setup.R) to show
# where the optimum itself lies.
source("tests/analysis/r/lmer_setup.R")  # packages, ctrl (tightened BOBYQA), put()

args <- commandArgs(trailingOnly = TRUE)
quiet <- lmerControl(check.conv.singular = "ignore")
terms <- c("(1 | participant_id)", "(0 + x | participant_id)", "(1 | pair_id)", "(0 + x | pair_id)")
diag_pos <- c(1, 3, 4, 6)  # the entries of the maximal theta that these terms estimate

for (file in sort(list.files(args[1], pattern = "^agree_.*[.]csv$"))) {
  ds <- sub("[.]csv$", "", file)
  d <- read.csv(file.path(args[1], file))
  d$x <- as.numeric(d$format == "summary")
  d$y <- d$wtp_premium_pct
  m <- lmerTest::lmer(y ~ x + (1 + x | participant_id) + (1 + x | pair_id), data = d,
                      control = quiet)
  put(ds, "default_singular", as.integer(isSingular(m)))
  th <- getME(m, "theta")
  for (i in seq_along(th)) put(ds, paste0("default_theta_", i), th[i])
  put(ds, "default_reml_criterion", REMLcrit(m))
  put(ds, "default_feval", m@optinfo$feval)
  s <- summary(m)$coefficients
  put(ds, "default_format_estimate", s["x", "Estimate"])
  put(ds, "default_format_se", s["x", "Std. Error"])
  mt <- lmerTest::lmer(y ~ x + (1 + x | participant_id) + (1 + x | pair_id), data = d,
                       control = ctrl)
  put(ds, "tight_singular", as.integer(isSingular(mt)))
  tht <- getME(mt, "theta")
  for (i in seq_along(tht)) put(ds, paste0("tight_theta_", i), tht[i])
  put(ds, "tight_reml_criterion", REMLcrit(mt))

  free <- rep(1, 6)
  steps <- 1
  if (isSingular(m)) {
    keep <- rep(TRUE, 4)
    free[c(2, 5)] <- 0
    repeat {
      steps <- steps + 1
      f <- as.formula(paste("y ~ x +", paste(terms[keep], collapse = " + ")))
      m <- lmerTest::lmer(f, data = d, control = quiet)
      if (!isSingular(m)) break
      zero <- which(keep)[getME(m, "theta") < 1e-4]
      if (length(zero) == sum(keep)) break  # no random effect would be left
      keep[zero] <- FALSE
      free[diag_pos[zero]] <- 0
    }
  }
  put(ds, "final_free", paste(free, collapse = ""))
  put(ds, "final_steps", steps)
  put(ds, "final_singular", as.integer(isSingular(m)))
  s <- summary(m)$coefficients
  put(ds, "final_format_estimate", s["x", "Estimate"])
  put(ds, "final_format_se", s["x", "Std. Error"])
  put(ds, "final_format_df", s["x", "df"])
}
write.csv(out, stdout(), row.names = FALSE, quote = FALSE)
