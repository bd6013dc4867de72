# Reference power values for tests/analysis/plan/test_power.py.
#
# Run from the repository root:
#   Rscript tests/analysis/r/power_reference.R > tests/analysis/r/power_reference.csv
# Produced with R 4.2.2, lme4 1.1-31 and lmerTest 3.1-3 (Debian bookworm packages).
#
# The design is FrameLab's product-choice design: N participants see the same m pairs; participant
# i (0-based, in arrival order) has sequence B when i is odd; the pair at 0-based position j is
# shown as the summary (x = 1) when (j + [sequence is B]) is odd, else as the original (x = 0).
#
# Without clustering the trials are independent, half under each format:
#   power.prop.test(n = N * m / 2, p1, p2, sig.level = alpha, alternative = "one.sided")
#   power.t.test(n = N * m / 2, delta, sd, sig.level = alpha, type = "two.sample",
#                alternative = "one.sided")
# With crossed random intercepts, simulated with lme4 and refitted (simr's method; simr itself
# is not packaged for Debian):
#   y <- simulate(~ x + (1 | participant) + (1 | pair), newdata = d, family = binomial,
#                 newparams = list(beta = c(qlogis(p0), log(or)), theta = c(sd_p, sd_i)))
#   m <- glmer(y ~ x + (1 | participant) + (1 | pair), family = binomial)   # Laplace
#   one-sided p = pnorm(z, lower.tail = FALSE) of the Wald z of x
#   y <- simulate(~ x + (1 | participant) + (1 | pair), newdata = d,
#                 newparams = list(beta = c(base, effect), theta = c(sd_p, sd_i) / sigma,
#                                  sigma = sigma))
#   m <- lmerTest::lmer(y ~ x + (1 | participant) + (1 | pair))             # REML
#   one-sided p = pt(t, df, lower.tail = FALSE), Satterthwaite df
# A refit that fails counts as not rejecting (as in FrameLab's simulations).
suppressPackageStartupMessages({
  library(lme4)
  library(lmerTest)
})

design <- function(n, m) {
  d <- expand.grid(pair = seq_len(m) - 1, participant = seq_len(n) - 1)
  d$x <- as.numeric(((d$pair + d$participant %% 2) %% 2) == 1)
  d$participant <- factor(d$participant)
  d$pair <- factor(d$pair)
  d
}

out <- data.frame(case = character(), quantity = character(), value = character())
put <- function(case, quantity, value) {
  out[nrow(out) + 1, ] <<- list(case, quantity, sprintf("%.17g", as.numeric(value)))
}

# Analytic, no clustering.
alpha <- 0.025
for (x in list(list(n = 20, m = 4, p0 = 0.4, or = 2.0), list(n = 30, m = 6, p0 = 0.5, or = 1.6))) {
  p1 <- x$or * x$p0 / (1 - x$p0 + x$or * x$p0)
  pw <- power.prop.test(n = x$n * x$m / 2, p1 = x$p0, p2 = p1, sig.level = alpha,
                        alternative = "one.sided")$power
  put(sprintf("prop|n=%d|m=%d|baseline=%g|effect=%g", x$n, x$m, x$p0, x$or), "power", pw)
}
for (x in list(list(n = 12, m = 4, delta = 4, sd = 10), list(n = 20, m = 6, delta = 3, sd = 10))) {
  pw <- power.t.test(n = x$n * x$m / 2, delta = x$delta, sd = x$sd, sig.level = alpha,
                     type = "two.sample", alternative = "one.sided")$power
  put(sprintf("t|n=%d|m=%d|effect=%g|sd_residual=%g", x$n, x$m, x$delta, x$sd), "power", pw)
}

# Simulated with lme4, crossed random intercepts.
set.seed(20261124)
n_sims <- 2000
glmm_cases <- list(list(n = 30, m = 6, p0 = 0.4, or = 2.0, sd_p = 0.8, sd_i = 0.5))
for (x in glmm_cases) {
  d <- design(x$n, x$m)
  hits <- 0
  for (s in seq_len(n_sims)) {
    d$y <- simulate(~ x + (1 | participant) + (1 | pair), newdata = d, family = binomial,
                    newparams = list(beta = c(qlogis(x$p0), log(x$or)),
                                     theta = c(x$sd_p, x$sd_i)))[[1]]
    p <- tryCatch({
      m <- suppressMessages(suppressWarnings(
        glmer(y ~ x + (1 | participant) + (1 | pair), data = d, family = binomial)))
      z <- summary(m)$coefficients["x", "z value"]
      pnorm(z, lower.tail = FALSE)
    }, error = function(e) 1)
    hits <- hits + (p < alpha)
  }
  case <- sprintf("glmer|n=%d|m=%d|baseline=%g|effect=%g|sd_participant=%g|sd_pair=%g",
                  x$n, x$m, x$p0, x$or, x$sd_p, x$sd_i)
  put(case, "n_sims", n_sims)
  put(case, "n_rejected", hits)
  put(case, "power", hits / n_sims)
}
lmm_cases <- list(list(n = 24, m = 6, base = 30, effect = 3, sd_p = 6, sd_i = 3, sigma = 8))
for (x in lmm_cases) {
  d <- design(x$n, x$m)
  hits <- 0
  for (s in seq_len(n_sims)) {
    d$y <- simulate(~ x + (1 | participant) + (1 | pair), newdata = d,
                    newparams = list(beta = c(x$base, x$effect),
                                     theta = c(x$sd_p, x$sd_i) / x$sigma, sigma = x$sigma))[[1]]
    p <- tryCatch({
      m <- suppressMessages(suppressWarnings(
        lmerTest::lmer(y ~ x + (1 | participant) + (1 | pair), data = d)))
      co <- summary(m)$coefficients
      pt(co["x", "t value"], co["x", "df"], lower.tail = FALSE)
    }, error = function(e) 1)
    hits <- hits + (p < alpha)
  }
  case <- sprintf("lmer|n=%d|m=%d|baseline=%g|effect=%g|sd_participant=%g|sd_pair=%g|sd_residual=%g",
                  x$n, x$m, x$base, x$effect, x$sd_p, x$sd_i, x$sigma)
  put(case, "n_sims", n_sims)
  put(case, "n_rejected", hits)
  put(case, "power", hits / n_sims)
}

write.csv(out, stdout(), row.names = FALSE)
