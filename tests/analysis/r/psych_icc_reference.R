# Reference intervals for tests/analysis/ratings/test_stats_ratings.py::test_icc_two_way_intervals_*
# R 4.2.2, psych 2.2.9 (Debian bookworm): Shrout & Fleiss (1979) Table 4, 6 targets x 4 judges.
# Run: Rscript tests/analysis/r/psych_icc_reference.R
suppressPackageStartupMessages(library(psych))
sf <- matrix(c(9, 2, 5, 8, 6, 1, 3, 2, 8, 4, 6, 8, 7, 1, 2, 6, 10, 5, 6, 9, 6, 2, 4, 7),
             ncol = 4, byrow = TRUE)
for (alpha in c(0.05, 0.10)) {
  r <- ICC(sf, alpha = alpha, lmer = FALSE)$results
  for (i in seq_len(nrow(r))) {
    cat(sprintf("%.2f %s %.17g %.17g %.17g\n", 1 - alpha, r$type[i], r$ICC[i],
                r[i, "lower bound"], r[i, "upper bound"]))
  }
}
