# Reference numbers for tests/analysis/stats/test_formats_r.py: the k-format choice GLMM
# (lme4::glmer, Laplace, nAGQ = 1) and WTP LMM (lme4::lmer, REML, lmerTest's Satterthwaite df).
#
# Run from the repository root after `python tests/analysis/r/make_kformat_datasets.py`:
#   Rscript tests/analysis/r/kformat_reference.R > tests/analysis/r/kformat_reference.csv
#
# Models, format a k-level factor with treatment contrasts against "original" (R's default
# contr.treatment, the levels in the order original, summary, mitigated...):
#   glmer(chose_target ~ format + (1 | participant_id) + (1 | pair_id), family = binomial)
#   lmer(wtp_premium_pct ~ format + (1 | participant_id) + (1 | pair_id))          (REML)
# Contrasts against the baseline "summary": each mitigated level's coefficient minus summary's,
# L %*% fixef(m) with SE sqrt(L %*% vcov(m) %*% t(L)) (glmer: lme4's default Hessian-based vcov),
# for lmer through lmerTest::contest(m, L, joint = FALSE) (Satterthwaite df). Holm across all
# 2k - 3 contrasts of a model (k - 1 against original, k - 2 against summary):
# p.adjust(p, "holm"). Both optimizers are tightened far beyond lme4's default (BOBYQA
# rhoend = 1e-12; PIRLS tolPwrss = 1e-12) so that the numbers are those at the optimum.
suppressPackageStartupMessages({
  library(lme4)
  library(lmerTest)
})

gctrl <- glmerControl(
  optimizer = "bobyqa",
  optCtrl = list(rhoend = 1e-12, maxfun = 1e6),
  tolPwrss = 1e-12,
  check.conv.singular = "ignore",
  check.conv.grad = "ignore",
  check.conv.hess = "ignore"
)
lctrl <- lmerControl(
  optimizer = "bobyqa",
  optCtrl = list(rhoend = 1e-12, maxfun = 1e6),
  check.conv.singular = "ignore"
)
datasets <- list(
  kformat_4x80x12 = c("original", "summary", "mitigated:self-debias", "mitigated:rerank"),
  kformat_3x60x9_missing = c("original", "summary", "mitigated:self-debias")
)

out <- data.frame(dataset = character(), quantity = character(), value = character())
put <- function(ds, quantity, value) {
  out[nrow(out) + 1, ] <<- list(ds, quantity, sprintf("%.17g", as.numeric(value)))
}

# Contrast matrix over (intercept, format2, ..., formatk): rows k-1 treatment contrasts against
# the reference, then each level from the third on minus the second (the baseline summary).
contrast_matrix <- function(k) {
  L <- matrix(0, 2 * k - 3, k)
  for (j in 2:k) L[j - 1, j] <- 1
  for (j in 3:k) {
    L[k - 1 + j - 2, j] <- 1
    L[k - 1 + j - 2, 2] <- -1
  }
  L
}

for (ds in names(datasets)) {
  lv <- datasets[[ds]]
  k <- length(lv)
  d <- read.csv(file.path("tests/analysis/r/data", paste0(ds, ".csv")))
  d$format <- factor(d$format, levels = lv)
  L <- contrast_matrix(k)

  g <- glmer(chose_target ~ format + (1 | participant_id) + (1 | pair_id), data = d,
             family = binomial, nAGQ = 1, control = gctrl)
  s <- summary(g)$coefficients
  for (i in seq_len(nrow(s))) {
    put(ds, paste0("glmm_beta", i - 1, "_estimate"), s[i, "Estimate"])
    put(ds, paste0("glmm_beta", i - 1, "_se"), s[i, "Std. Error"])
  }
  V <- as.matrix(vcov(g))
  est <- as.vector(L %*% fixef(g))
  se <- sqrt(diag(L %*% V %*% t(L)))
  p <- 2 * pnorm(-abs(est / se))
  padj <- p.adjust(p, "holm")
  for (i in seq_along(est)) {
    put(ds, paste0("glmm_contrast", i, "_estimate"), est[i])
    put(ds, paste0("glmm_contrast", i, "_se"), se[i])
    put(ds, paste0("glmm_contrast", i, "_p"), p[i])
    put(ds, paste0("glmm_contrast", i, "_p_holm"), padj[i])
  }
  vc <- as.data.frame(VarCorr(g))
  for (i in seq_len(nrow(vc))) put(ds, paste0("glmm_sd_", vc$grp[i]), vc$sdcor[i])
  put(ds, "glmm_loglik", logLik(g))
  put(ds, "glmm_nobs", nobs(g))

  m <- lmer(wtp_premium_pct ~ format + (1 | participant_id) + (1 | pair_id), data = d,
            REML = TRUE, control = lctrl)
  s <- summary(m)$coefficients
  for (i in seq_len(nrow(s))) {
    put(ds, paste0("lmm_beta", i - 1, "_estimate"), s[i, "Estimate"])
    put(ds, paste0("lmm_beta", i - 1, "_se"), s[i, "Std. Error"])
    put(ds, paste0("lmm_beta", i - 1, "_df"), s[i, "df"])
  }
  ct <- contest(m, L, joint = FALSE)
  padj <- p.adjust(ct[["Pr(>|t|)"]], "holm")
  for (i in seq_len(nrow(ct))) {
    put(ds, paste0("lmm_contrast", i, "_estimate"), ct$Estimate[i])
    put(ds, paste0("lmm_contrast", i, "_se"), ct[["Std. Error"]][i])
    put(ds, paste0("lmm_contrast", i, "_df"), ct$df[i])
    put(ds, paste0("lmm_contrast", i, "_p"), ct[["Pr(>|t|)"]][i])
    put(ds, paste0("lmm_contrast", i, "_p_holm"), padj[i])
  }
  vc <- as.data.frame(VarCorr(m))
  for (i in seq_len(nrow(vc))) put(ds, paste0("lmm_sd_", vc$grp[i]), vc$sdcor[i])
  put(ds, "lmm_loglik_reml", logLik(m))
}
write.csv(out, stdout(), row.names = FALSE, quote = FALSE)
