# Reference numbers for tests/analysis/stats/test_glmm.py (lme4::glmer, Laplace, nAGQ = 1).
#
# Run from the repository root after `python tests/analysis/r/make_glmm_datasets.py`:
#   Rscript tests/analysis/r/glmer_reference.R > tests/analysis/r/glmer_reference.csv
# Produced with R 4.2.2 and lme4 1.1-31 (Debian bookworm packages).
#
# Model: chose_target ~ format + (1 | participant_id) + (1 | pair_id), binomial logit, Laplace
# approximation (nAGQ = 1, glmer's default). BOBYQA is tightened far beyond lme4's default
# (rhoend = 1e-12) and PIRLS to tolPwrss = 1e-12 so that the numbers are those *at the optimum*.
#
# Standard errors: `se` is summary(m)'s (lme4's default vcov: 2 * the (beta, beta) block of the
# inverse Hessian of the Laplace deviance over (theta, beta), the Hessian by lme4's own finite
# differences, deriv12 with delta = 1e-4). `se_hess` is the same quantity from a
# Richardson-extrapolated central-difference Hessian of the same deviance function (lme4's
# devFunOnly), less finite-difference noise; `se_rx` is vcov(m, use.hessian = FALSE) (beta's
# conditional covariance given theta from the PIRLS system). On glmm_small_pair_40x12 devFunOnly
# is rough at steps of 1e-3 (se_hess 0.1870 there; 0.18897 at steps of 1e-2 and 1e-4, as `se`).
#
# `max_grad` is glmer's convergence check at the tightened optimum (checkConv: the largest of
# min(|scaled gradient|, |gradient|), the gradient and Hessian of the deviance over (theta, beta)
# by lme4's deriv12, scaled by the Hessian's Cholesky factor; it warns above 0.002).
# `default_*` rows are the same model fitted with glmer's defaults (glmerControl(): BOBYQA then
# Nelder-Mead at lme4's own tolerances), the numbers an analyst gets without tightening.
suppressPackageStartupMessages(library(lme4))

ctrl <- glmerControl(
  optimizer = "bobyqa",
  optCtrl = list(rhoend = 1e-12, maxfun = 1e6),
  tolPwrss = 1e-12,
  check.conv.singular = "ignore",
  check.conv.grad = "ignore",
  check.conv.hess = "ignore"
)
datasets <- c(
  "choice_70x10", "choice_messy", "choice_singular", "glmm_missing_70x10",
  "glmm_small_pair_70x10", "glmm_small_pair_40x12", "glmm_small_participant_70x10"
)

out <- data.frame(dataset = character(), quantity = character(), value = character())
put <- function(ds, quantity, value) {
  out[nrow(out) + 1, ] <<- list(ds, quantity, sprintf("%.17g", as.numeric(value)))
}

hessian <- function(f, x, h0 = 1e-3) {
  # Central differences at steps h and h / 2, Richardson-extrapolated.
  at <- function(h) {
    k <- length(x)
    H <- matrix(0, k, k)
    f0 <- f(x)
    for (i in seq_len(k)) {
      ei <- replace(numeric(k), i, h)
      H[i, i] <- (f(x + ei) - 2 * f0 + f(x - ei)) / h^2
      for (j in seq_len(i - 1)) {
        ej <- replace(numeric(k), j, h)
        H[i, j] <- H[j, i] <- (f(x + ei + ej) - f(x + ei - ej) - f(x - ei + ej) +
          f(x - ei - ej)) / (4 * h^2)
      }
    }
    H
  }
  (4 * at(h0 / 2) - at(h0)) / 3
}

for (ds in datasets) {
  d <- read.csv(file.path("tests/analysis/r/data", paste0(ds, ".csv")))
  d$format <- factor(d$format, levels = c("original", "summary"))
  m <- glmer(chose_target ~ format + (1 | participant_id) + (1 | pair_id), data = d,
             family = binomial, nAGQ = 1, control = ctrl)
  s <- summary(m)$coefficients
  for (term in rownames(s)) {
    key <- if (term == "(Intercept)") "intercept" else "format"
    put(ds, paste0(key, "_estimate"), s[term, "Estimate"])
    put(ds, paste0(key, "_se"), s[term, "Std. Error"])
    put(ds, paste0(key, "_z"), s[term, "z value"])
    put(ds, paste0(key, "_p"), s[term, "Pr(>|z|)"])
  }
  rx <- sqrt(diag(as.matrix(vcov(m, use.hessian = FALSE))))
  put(ds, "intercept_se_rx", rx[1])
  put(ds, "format_se_rx", rx[2])
  th <- getME(m, "theta")
  pars <- c(th, fixef(m))
  devfun <- update(m, devFunOnly = TRUE)
  H <- hessian(devfun, pars)
  V <- 2 * solve(H)[-seq_along(th), -seq_along(th)]
  put(ds, "intercept_se_hess", sqrt(V[1, 1]))
  put(ds, "format_se_hess", sqrt(V[2, 2]))
  put(ds, "deviance_at_optimum", devfun(pars))
  vc <- as.data.frame(VarCorr(m))
  for (i in seq_len(nrow(vc))) put(ds, paste0("sd_", vc$grp[i]), vc$sdcor[i])
  for (i in seq_along(th)) put(ds, paste0("theta_", i), th[i])
  put(ds, "loglik", logLik(m))
  put(ds, "aic", AIC(m))
  put(ds, "bic", BIC(m))
  put(ds, "singular", as.integer(isSingular(m)))
  put(ds, "nobs", nobs(m))
  g <- m@optinfo$derivs
  put(ds, "max_grad", max(pmin(abs(solve(chol(g$Hessian), g$gradient)), abs(g$gradient))))
  md <- glmer(chose_target ~ format + (1 | participant_id) + (1 | pair_id), data = d,
              family = binomial, nAGQ = 1,
              control = glmerControl(check.conv.singular = "ignore"))
  put(ds, "default_format_estimate", fixef(md)[2])
  put(ds, "default_format_se", sqrt(diag(as.matrix(vcov(md))))[2])
  put(ds, "default_loglik", logLik(md))
  dvc <- as.data.frame(VarCorr(md))
  for (i in seq_len(nrow(dvc))) put(ds, paste0("default_sd_", dvc$grp[i]), dvc$sdcor[i])
}
write.csv(out, stdout(), row.names = FALSE, quote = FALSE)
