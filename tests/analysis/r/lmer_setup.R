# Shared by the lmer reference scripts sourced after it: packages, lmer's BOBYQA tightened far
# beyond lme4's default (rhoend = 1e-12) so that the numbers are those *at the optimum*, and a
# collector of (dataset, quantity, value) rows written as CSV at the end.
suppressPackageStartupMessages({
  library(lme4)
  library(lmerTest)
})

ctrl <- lmerControl(
  optimizer = "bobyqa",
  optCtrl = list(rhoend = 1e-12, maxfun = 1e6),
  check.conv.singular = "ignore"
)
out <- data.frame(dataset = character(), quantity = character(), value = character())
put <- function(ds, quantity, value) {
  if (!is.character(value)) value <- sprintf("%.17g", as.numeric(value))
  out[nrow(out) + 1, ] <<- list(ds, quantity, value)
}
