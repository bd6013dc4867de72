# Reference numbers for tests/analysis/stats/test_wtp_lme4.py (lme4 / lmerTest).
#
# Run from the repository root after `python tests/analysis/r/make_datasets.py`:
#   Rscript tests/analysis/r/lme4_reference.R > tests/analysis/r/lme4_reference.csv
# Produced with R 4.2.2, lme4 1.1-31, lmerTest 3.1-3 (Debian bookworm packages).
#
# Each model is fitted with lmerTest::lmer (which calls lme4::lmer) and BOBYQA tightened far
# beyond lme4's default (rhoend = 1e-12) so that the numbers are those *at the optimum*, not at
# wherever the default stopping rule happened to stop. Output: one line per
# dataset, model, quantity, value (17 significant digits).
source("tests/analysis/r/lmer_setup.R")  # packages, ctrl (tightened BOBYQA)
datasets <- c("balanced_70x10", "messy_unbalanced", "singular_pair", "slopes_70x10",
              "balanced_300x10")
formulas <- list(
  intercepts = wtp_premium_pct ~ format + (1 | participant_id) + (1 | pair_id),
  slopes = wtp_premium_pct ~ format + (1 + format | participant_id) + (1 + format | pair_id)
)

out <- data.frame(dataset = character(), model = character(), quantity = character(),
                  value = character())
put <- function(ds, model, quantity, value) {
  out[nrow(out) + 1, ] <<- list(ds, model, quantity, sprintf("%.17g", as.numeric(value)))
}

for (ds in datasets) {
  d <- read.csv(file.path("tests/analysis/r/data", paste0(ds, ".csv")))
  d$format <- factor(d$format, levels = c("original", "summary"))
  fits <- list()
  for (mname in names(formulas)) {
    m <- lmerTest::lmer(formulas[[mname]], data = d, REML = TRUE, control = ctrl)
    fits[[mname]] <- m
    s <- summary(m)$coefficients  # Estimate, Std. Error, df, t value, Pr(>|t|) (Satterthwaite)
    for (term in rownames(s)) {
      key <- if (term == "(Intercept)") "intercept" else "format"
      put(ds, mname, paste0(key, "_estimate"), s[term, "Estimate"])
      put(ds, mname, paste0(key, "_se"), s[term, "Std. Error"])
      put(ds, mname, paste0(key, "_df"), s[term, "df"])
      put(ds, mname, paste0(key, "_t"), s[term, "t value"])
      put(ds, mname, paste0(key, "_p"), s[term, "Pr(>|t|)"])
    }
    vc <- as.data.frame(VarCorr(m))
    for (i in seq_len(nrow(vc))) {
      name <- if (is.na(vc$var2[i])) {
        paste0("sd_", vc$grp[i], if (is.na(vc$var1[i])) "" else paste0("_", vc$var1[i]))
      } else {
        paste0("corr_", vc$grp[i])
      }
      put(ds, mname, name, if (is.na(vc$var2[i])) vc$sdcor[i] else vc$sdcor[i])
    }
    th <- getME(m, "theta")
    for (i in seq_along(th)) put(ds, mname, paste0("theta_", i), th[i])
    put(ds, mname, "reml_criterion", REMLcrit(m))
    put(ds, mname, "reml_loglik", logLik(m))
    put(ds, mname, "singular", as.integer(isSingular(m)))
    ml <- refitML(m)
    put(ds, mname, "ml_loglik", logLik(ml))
    put(ds, mname, "ml_aic", AIC(ml))
    put(ds, mname, "ml_bic", BIC(ml))
    put(ds, mname, "nobs", nobs(m))
  }
  # Likelihood-ratio test of the random slopes (anova refits both by ML).
  a <- anova(fits$intercepts, fits$slopes, refit = TRUE)
  put(ds, "slopes_vs_intercepts", "lrt_chisq", a$Chisq[2])
  put(ds, "slopes_vs_intercepts", "lrt_df", a$Df[2])
  put(ds, "slopes_vs_intercepts", "lrt_p", a[["Pr(>Chisq)"]][2])
}
write.csv(out, stdout(), row.names = FALSE, quote = FALSE)
