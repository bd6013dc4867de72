# Reference numbers for the formulas FrameLab prints for the random-slope model
# (analysis/stats/wtp.py: wtp_slopes; tests/analysis/stats/test_simplify.py).
#
# Run from the repository root after `python tests/analysis/r/make_datasets.py`:
#   Rscript tests/analysis/r/lme4_printed_formula.R > tests/analysis/r/lme4_printed_formula.csv
# Produced with R 4.2.2, lme4 1.1-31, lmerTest 3.1-3 (Debian bookworm packages).
#
# Each formula below is pasted exactly as FrameLab prints it (the final model of wtp_slopes),
# with the numeric column it defines: format_summary = 1 for summary, 0 for original. lmer fits
# it with BOBYQA tightened as in lme4_reference.R. The same formula with `format` a factor in
# place of format_summary is fitted too (`factor_*` rows): there lme4's `||` does not split the
# terms and the model is a different one (another SE), which is why FrameLab prints the dummy.
# `lrt_*` rows: the likelihood-ratio test of the final model's slopes against the same model
# without them (`nulls`, as FrameLab prints it in lrt_null): anova(m0, m), ML refits.
source("tests/analysis/r/lmer_setup.R")  # packages, ctrl (tightened BOBYQA), put()

printed <- c(
  singular_pair = paste(
    "wtp_premium_pct ~ format_summary + (1 + format_summary || participant_id)",
    "+ (0 + format_summary | pair_id)"
  ),
  slopes_70x10 = paste(
    "wtp_premium_pct ~ format_summary + (1 + format_summary || participant_id)",
    "+ (1 + format_summary || pair_id)"
  ),
  slopes_edge_70x10 = paste(
    "wtp_premium_pct ~ format_summary + (1 | participant_id)",
    "+ (1 + format_summary || pair_id)"
  )
)
nulls <- c(
  singular_pair = "wtp_premium_pct ~ format_summary + (1 | participant_id)",
  slopes_70x10 = "wtp_premium_pct ~ format_summary + (1 | participant_id) + (1 | pair_id)",
  slopes_edge_70x10 = "wtp_premium_pct ~ format_summary + (1 | participant_id) + (1 | pair_id)"
)

for (ds in names(printed)) {
  d <- read.csv(file.path("tests/analysis/r/data", paste0(ds, ".csv")))
  d$format_summary <- as.numeric(d$format == "summary")
  f <- printed[[ds]]
  m <- lmerTest::lmer(as.formula(f), data = d, REML = TRUE, control = ctrl)
  put(ds, "formula", f)
  s <- summary(m)$coefficients
  put(ds, "format_estimate", s["format_summary", "Estimate"])
  put(ds, "format_se", s["format_summary", "Std. Error"])
  put(ds, "format_df", s["format_summary", "df"])
  put(ds, "reml_criterion", REMLcrit(m))
  put(ds, "n_theta", length(getME(m, "theta")))
  m0 <- lmerTest::lmer(as.formula(nulls[[ds]]), data = d, REML = TRUE, control = ctrl)
  a <- anova(m0, m)
  put(ds, "lrt_null", nulls[[ds]])
  put(ds, "lrt_chisq", a$Chisq[2])
  put(ds, "lrt_df", a$Df[2])
  put(ds, "lrt_p", a$`Pr(>Chisq)`[2])
  d$format <- factor(d$format, levels = c("original", "summary"))
  mf <- lmerTest::lmer(as.formula(gsub("format_summary", "format", f)), data = d, REML = TRUE,
                       control = ctrl)
  put(ds, "factor_format_se", summary(mf)$coefficients["formatsummary", "Std. Error"])
  put(ds, "factor_n_theta", length(getME(mf, "theta")))
}
write.csv(out, stdout(), row.names = FALSE, quote = FALSE)
