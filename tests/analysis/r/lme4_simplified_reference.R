# Reference numbers for the simplification rule of the random-slope model
# (analysis/stats/simplify.py; tests/analysis/stats/test_simplify.py).
#
# Run from the repository root after `python tests/analysis/r/make_datasets.py`:
#   Rscript tests/analysis/r/lme4_simplified_reference.R > tests/analysis/r/lme4_simplified_reference.csv
# Produced with R 4.2.2, lme4 1.1-31, lmerTest 3.1-3 (Debian bookworm packages).
#
# Every model the rule visits on each dataset is fitted with lmerTest::lmer, with a numeric
# format code x (1 = summary) so that `||` means (1 | g) + (0 + x | g) (with a factor, lme4's
# `||` does not split the terms), and BOBYQA tightened as in lme4_reference.R. Output: one line
# per dataset, step, quantity, value; `formula` rows give the step's formula as text.
source("tests/analysis/r/lmer_setup.R")  # packages, ctrl (tightened BOBYQA)
steps <- list(
  slopes_70x10 = c(
    "y ~ x + (1 + x | participant_id) + (1 + x | pair_id)",
    "y ~ x + (1 + x || participant_id) + (1 + x || pair_id)"
  ),
  singular_pair = c(
    "y ~ x + (1 + x | participant_id) + (1 + x | pair_id)",
    "y ~ x + (1 + x || participant_id) + (1 + x || pair_id)",
    "y ~ x + (1 + x || participant_id) + (0 + x | pair_id)"
  ),
  balanced_70x10 = c(
    "y ~ x + (1 + x | participant_id) + (1 + x | pair_id)",
    "y ~ x + (1 + x || participant_id) + (1 + x || pair_id)",
    "y ~ x + (1 | participant_id) + (1 | pair_id)"
  )
)

out <- data.frame(dataset = character(), step = integer(), quantity = character(),
                  value = character())
put <- function(ds, step, quantity, value) {
  if (!is.character(value)) value <- sprintf("%.17g", as.numeric(value))
  out[nrow(out) + 1, ] <<- list(ds, step, quantity, value)
}

for (ds in names(steps)) {
  d <- read.csv(file.path("tests/analysis/r/data", paste0(ds, ".csv")))
  d$x <- as.numeric(d$format == "summary")
  d$y <- d$wtp_premium_pct
  for (i in seq_along(steps[[ds]])) {
    f <- steps[[ds]][i]
    m <- lmerTest::lmer(as.formula(f), data = d, REML = TRUE, control = ctrl)
    put(ds, i, "formula", f)
    s <- summary(m)$coefficients
    put(ds, i, "format_estimate", s["x", "Estimate"])
    put(ds, i, "format_se", s["x", "Std. Error"])
    put(ds, i, "format_df", s["x", "df"])
    put(ds, i, "format_p", s["x", "Pr(>|t|)"])
    vc <- as.data.frame(VarCorr(m))
    for (j in seq_len(nrow(vc))) {
      grp <- sub("\\.[0-9]+$", "", vc$grp[j])  # lme4 names the split terms pair_id.1 etc.
      name <- if (is.na(vc$var2[j])) {
        paste0("sd_", grp, if (is.na(vc$var1[j])) "" else paste0("_", vc$var1[j]))
      } else {
        paste0("corr_", grp)
      }
      put(ds, i, name, vc$sdcor[j])
    }
    put(ds, i, "reml_criterion", REMLcrit(m))
    put(ds, i, "singular", as.integer(isSingular(m)))
    put(ds, i, "ml_aic", AIC(refitML(m)))
  }
}
write.csv(out, stdout(), row.names = FALSE, quote = FALSE)
