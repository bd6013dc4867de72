# Reference numbers for tests/analysis/plan/test_sequential.py (rpact's group-sequential designs).
#
# Run from the repository root:
#   Rscript tests/analysis/r/rpact_reference.R > tests/analysis/r/rpact_reference.csv
# Produced with R 4.2.2 and rpact 3.3.4 (Debian bookworm packages r-base-core, r-cran-rpact).
#
# Boundaries: for every design below,
#   d <- getDesignGroupSequential(kMax = K, alpha = ALPHA, sided = SIDED,
#                                 typeOfDesign = "asOF" | "asP", informationRates = RATES,
#                                 [typeBetaSpending = "bsOF" | "bsP", beta = BETA]
#                                 [futilityBounds = FUT, bindingFutility = TRUE | FALSE])
#   d$criticalValues; d$futilityBounds; d$alphaSpent
# Stage-wise ordering inference after stopping (one-sample means, normal approximation):
#   ar <- getAnalysisResults(d, dataInput = getDataset(n = N, means = M, stDevs = SD),
#                            normalApproximation = TRUE)
#   getStageResults(...)$overallTestStatistics, $overallStDevs
#   ar$finalStage; ar$finalPValues; ar$medianUnbiasedEstimates;
#   ar$finalConfidenceIntervalLowerBounds; ar$finalConfidenceIntervalUpperBounds
suppressPackageStartupMessages(library(rpact))

out <- data.frame(case = character(), quantity = character(), value = character())
put <- function(case, quantity, values) {
  for (i in seq_along(values)) {
    out[nrow(out) + 1, ] <<- list(case, sprintf("%s_%d", quantity, i), sprintf("%.17g", values[i]))
  }
}

rate_sets <- list(
  "2" = list(equal = c(0.5, 1), unequal = c(0.3, 1)),
  "3" = list(equal = c(1 / 3, 2 / 3, 1), unequal = c(0.5, 0.75, 1)),
  "4" = list(equal = c(0.25, 0.5, 0.75, 1), unequal = c(0.2, 0.45, 0.7, 1)),
  "5" = list(equal = c(0.2, 0.4, 0.6, 0.8, 1), unequal = c(0.15, 0.3, 0.5, 0.8, 1))
)
types <- c(asOF = "obrien-fleming", asP = "pocock")
for (k in names(rate_sets)) {
  for (spacing in names(rate_sets[[k]])) {
    rates <- rate_sets[[k]][[spacing]]
    for (type in names(types)) {
      for (sided in c(1, 2)) {
        alpha <- if (sided == 1) 0.025 else 0.05
        d <- getDesignGroupSequential(
          kMax = as.integer(k), alpha = alpha, sided = sided, typeOfDesign = type,
          informationRates = rates
        )
        case <- sprintf("%s|sided=%d|alpha=%g|rates=%s", types[[type]], sided, alpha,
                        paste(sprintf("%.17g", rates), collapse = ","))
        put(case, "efficacy", d$criticalValues)
        put(case, "alpha_spent", d$alphaSpent)
      }
    }
  }
}

# Beta-spending futility (non-binding, rpact's default), one-sided.
for (rates in list(c(0.5, 0.75, 1), c(0.25, 0.5, 0.75, 1), c(0.2, 0.4, 0.6, 0.8, 1))) {
  for (type in names(types)) {
    bs <- c(asOF = "bsOF", asP = "bsP")[[type]]
    for (beta in c(0.2, 0.1)) {
      d <- getDesignGroupSequential(
        kMax = length(rates), alpha = 0.025, beta = beta, sided = 1, typeOfDesign = type,
        typeBetaSpending = bs, informationRates = rates
      )
      case <- sprintf("%s|beta_spending=%s|beta=%g|rates=%s", types[[type]], types[[type]], beta,
                      paste(sprintf("%.17g", rates), collapse = ","))
      put(case, "efficacy", d$criticalValues)
      put(case, "futility", d$futilityBounds)
    }
  }
}

# Fixed futility bounds, binding and not.
for (binding in c(TRUE, FALSE)) {
  for (type in names(types)) {
    d <- getDesignGroupSequential(
      kMax = 3, alpha = 0.025, sided = 1, typeOfDesign = type,
      informationRates = c(0.5, 0.75, 1), futilityBounds = c(0, 0.5), bindingFutility = binding
    )
    case <- sprintf("%s|futility_z=0,0.5|binding=%s|rates=0.5,0.75,1", types[[type]], binding)
    put(case, "efficacy", d$criticalValues)
  }
}

# Stage-wise ordering inference after a study stops.
inference <- list(
  list(type = "asOF", rates = c(0.5, 0.75, 1), n = c(20, 10), means = c(0.55, 0.62),
       sds = c(1, 1)),
  list(type = "asP", rates = c(0.5, 0.75, 1), n = c(20, 10, 10), means = c(0.25, 0.3, 0.35),
       sds = c(1, 1.2, 0.9)),
  list(type = "asOF", rates = c(0.25, 0.5, 0.75, 1), n = c(15, 15), means = c(0.9, 0.4),
       sds = c(1, 1)),
  list(type = "asP", rates = c(1 / 3, 2 / 3, 1), n = c(25), means = c(0.7), sds = c(1.1))
)
for (i in seq_along(inference)) {
  x <- inference[[i]]
  d <- getDesignGroupSequential(
    kMax = length(x$rates), alpha = 0.025, sided = 1, typeOfDesign = x$type,
    informationRates = x$rates
  )
  data <- getDataset(n = x$n, means = x$means, stDevs = x$sds)
  sr <- getStageResults(d, dataInput = data, normalApproximation = TRUE)
  # rpact prints its progress on stdout; this script's stdout is the CSV.
  invisible(capture.output(
    ar <- suppressWarnings(getAnalysisResults(d, dataInput = data, normalApproximation = TRUE))
  ))
  stage <- ar$finalStage
  if (is.na(stage)) stage <- length(x$n)
  case <- sprintf("inference%d|%s|rates=%s", i, types[[x$type]],
                  paste(sprintf("%.17g", x$rates), collapse = ","))
  put(case, "z", sr$overallTestStatistics[seq_along(x$n)])
  put(case, "overall_sd", sr$overallStDevs[seq_along(x$n)])
  put(case, "overall_n", cumsum(x$n))
  put(case, "final_stage", stage)
  put(case, "p_final", ar$finalPValues[stage])
  put(case, "median_unbiased", ar$medianUnbiasedEstimates[stage])
  put(case, "ci_low", ar$finalConfidenceIntervalLowerBounds[stage])
  put(case, "ci_high", ar$finalConfidenceIntervalUpperBounds[stage])
}

write.csv(out, stdout(), row.names = FALSE)
