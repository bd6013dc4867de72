# Reference p-values of Spearman's rho from R's cor.test (AS 89: exact permutation distribution
# for n <= 9, Edgeworth series for 9 < n < 1290; t approximation with ties), for
# tests/analysis/stats/test_correlation.py::test_spearman_p_matches_r_*.
# Run from the repository root:  Rscript tests/analysis/r/spearman_reference.R
# Writes tests/analysis/r/spearman_reference.csv (the data, as ';'-joined values, and R's numbers).
set.seed(20261123)
cases <- list()
add <- function(name, x, y) {
  res <- suppressWarnings(cor.test(x, y, method = "spearman"))
  cases[[length(cases) + 1]] <<- data.frame(
    case = name, n = length(x),
    x = paste(format(x, digits = 17), collapse = ";"),
    y = paste(format(y, digits = 17), collapse = ";"),
    rho = unname(res$estimate), S = unname(res$statistic), p = res$p.value,
    ties = anyDuplicated(x) > 0 || anyDuplicated(y) > 0
  )
}
# The cor.test help page's example (Hollander & Wolfe 1973, p. 187).
add("hollander_wolfe",
    c(44.4, 45.9, 41.9, 53.3, 44.7, 44.1, 50.7, 45.2, 60.1),
    c(2.6, 3.1, 2.5, 5.0, 3.6, 4.0, 5.2, 2.8, 3.8))
for (n in c(3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 15, 20, 30, 50, 100)) {
  for (r in c(-0.6, 0.1, 0.5)) {
    x <- rnorm(n)
    y <- r * x + sqrt(1 - r^2) * rnorm(n)
    add(sprintf("n%d_r%+.1f", n, r), x, y)
  }
}
# Large n, still AS 89 (R switches to the t approximation at n = 1290).
x <- rnorm(1200)
add("n1200_r+0.05", x, 0.05 * x + rnorm(1200))
# Perfect and reversed orderings (S = 0 and S = max) and a tied case (t approximation).
add("perfect_n8", 1:8, c(2, 4, 6, 8, 10, 12, 14, 16))
add("reversed_n12", 1:12, 12:1)
add("ties_n15", c(1, 2, 2, 3, 4, 5, 5, 6, 7, 8, 9, 9, 10, 11, 12), round(rnorm(15), 1))
out <- do.call(rbind, cases)
write.csv(out, "tests/analysis/r/spearman_reference.csv", row.names = FALSE)
cat(R.version.string, "\n")
