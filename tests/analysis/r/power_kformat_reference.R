# Reference power values of a three-format design for tests/analysis/plan/test_power_r.py.
#
# Run from the repository root:
#   Rscript tests/analysis/r/power_kformat_reference.R > tests/analysis/r/power_kformat_reference.csv
# Produced with R 4.2.2, lme4 1.1-31 and lmerTest 3.1-3 (Debian bookworm packages).
#
# The design is FrameLab's product-choice block with three formats (original, summary,
# mitigated): N participants see the same m pairs; participant i (0-based, in arrival order) has
# sequence i %% 3, and the pair at 0-based position j is shown in format (j + sequence) %% 3 of
# (original, summary, mitigated), the rows of a cyclic Latin square. The pre-registered test
# compares mitigated (treatment, x = 1) with summary (reference): the outcome is simulated for
# every trial with original and summary at the baseline, and the model is refitted on the trials
# of the two compared formats (simr's method of simulate + refit; simr is not packaged for Debian):
#   y <- simulate(~ x + (1 | participant) + (1 | pair), newdata = d, family = binomial,
#                 newparams = list(beta = c(qlogis(p0), log(or)), theta = c(sd_p, sd_i)))
#   m <- glmer(y ~ x + (1 | participant) + (1 | pair), family = binomial,
#              data = d[d$format != "original", ])                         # Laplace
#   one-sided p = pnorm(z, lower.tail = FALSE) of the Wald z of x
#   y <- simulate(~ x + (1 | participant) + (1 | pair), newdata = d,
#                 newparams = list(beta = c(base, effect), theta = c(sd_p, sd_i) / sigma,
#                                  sigma = sigma))
#   m <- lmerTest::lmer(y ~ x + (1 | participant) + (1 | pair),
#                       data = d[d$format != "original", ])                 # REML
#   one-sided p = pt(t, df, lower.tail = FALSE), Satterthwaite df
# A refit that fails counts as not rejecting (as in FrameLab's simulations).
suppressPackageStartupMessages({
  library(lme4)
  library(lmerTest)
})

formats <- c("original", "summary", "mitigated")
design <- function(n, m) {
  d <- expand.grid(pair = seq_len(m) - 1, participant = seq_len(n) - 1)
  d$format <- formats[(d$pair + d$participant %% 3) %% 3 + 1]
  d$x <- as.numeric(d$format == "mitigated")
  d$participant <- factor(d$participant)
  d$pair <- factor(d$pair)
  d
}

out <- data.frame(case = character(), quantity = character(), value = character())
put <- function(case, quantity, value) {
  out[nrow(out) + 1, ] <<- list(case, quantity, sprintf("%.17g", as.numeric(value)))
}

alpha <- 0.025
set.seed(20261127)
n_sims <- 1000
x <- list(n = 45, m = 6, p0 = 0.4, or = 2.5, sd_p = 0.8, sd_i = 0.5)
d <- design(x$n, x$m)
hits <- 0
for (s in seq_len(n_sims)) {
  d$y <- simulate(~ x + (1 | participant) + (1 | pair), newdata = d, family = binomial,
                  newparams = list(beta = c(qlogis(x$p0), log(x$or)),
                                   theta = c(x$sd_p, x$sd_i)))[[1]]
  p <- tryCatch({
    m <- suppressMessages(suppressWarnings(
      glmer(y ~ x + (1 | participant) + (1 | pair), data = d[d$format != "original", ],
            family = binomial)))
    pnorm(summary(m)$coefficients["x", "z value"], lower.tail = FALSE)
  }, error = function(e) 1)
  hits <- hits + (p < alpha)
}
case <- sprintf("glmer3|n=%d|m=%d|baseline=%g|effect=%g|sd_participant=%g|sd_pair=%g",
                x$n, x$m, x$p0, x$or, x$sd_p, x$sd_i)
put(case, "n_sims", n_sims)
put(case, "n_rejected", hits)
put(case, "power", hits / n_sims)

x <- list(n = 30, m = 6, base = 30, effect = 4, sd_p = 6, sd_i = 3, sigma = 8)
d <- design(x$n, x$m)
hits <- 0
for (s in seq_len(n_sims)) {
  d$y <- simulate(~ x + (1 | participant) + (1 | pair), newdata = d,
                  newparams = list(beta = c(x$base, x$effect),
                                   theta = c(x$sd_p, x$sd_i) / x$sigma, sigma = x$sigma))[[1]]
  p <- tryCatch({
    m <- suppressMessages(suppressWarnings(
      lmerTest::lmer(y ~ x + (1 | participant) + (1 | pair),
                     data = d[d$format != "original", ])))
    co <- summary(m)$coefficients
    pt(co["x", "t value"], co["x", "df"], lower.tail = FALSE)
  }, error = function(e) 1)
  hits <- hits + (p < alpha)
}
case <- sprintf(
  "lmer3|n=%d|m=%d|baseline=%g|effect=%g|sd_participant=%g|sd_pair=%g|sd_residual=%g",
  x$n, x$m, x$base, x$effect, x$sd_p, x$sd_i, x$sigma)
put(case, "n_sims", n_sims)
put(case, "n_rejected", hits)
put(case, "power", hits / n_sims)

write.csv(out, stdout(), row.names = FALSE)
