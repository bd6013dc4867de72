# Reference conditional modes, conditional SDs, fitted values and residuals of the crossed
# random-intercept model, for tests/analysis/stats/test_diagnostics.py.
#
# Run from the repository root (the data come from tests/analysis/r/make_datasets.py):
#   Rscript tests/analysis/r/ranef_reference.R
# Writes tests/analysis/r/ranef_reference.csv: per dataset the parameters the model ended at
# (kind "param"), ranef(m, condVar = TRUE) per level (kind "ranef": estimate, cond_sd) and
# fitted(m) / resid(m) of every fifth row (kind "resid", level = 0-based row). Produced with R 4.2.2, lme4 1.1-31.
suppressPackageStartupMessages(library(lme4))
ctrl <- lmerControl(optimizer = "bobyqa", optCtrl = list(rhoend = 1e-12, maxfun = 1e6),
                    check.conv.singular = "ignore")
out <- list()
for (ds in c("balanced_70x10", "messy_unbalanced", "singular_pair")) {
  d <- read.csv(file.path("tests/analysis/r/data", paste0(ds, ".csv")),
                colClasses = c(participant_id = "character", pair_id = "character"))
  d$format <- factor(d$format, levels = c("original", "summary"))
  m <- lmer(wtp_premium_pct ~ format + (1 | participant_id) + (1 | pair_id), d, REML = TRUE,
            control = ctrl)
  vc <- as.data.frame(VarCorr(m))
  sdv <- setNames(vc$sdcor, vc$grp)
  params <- c(intercept = unname(fixef(m)[1]), slope = unname(fixef(m)[2]),
              sd_subject = unname(sdv["participant_id"]), sd_item = unname(sdv["pair_id"]),
              sd_residual = unname(sdv["Residual"]))
  out[[length(out) + 1]] <- data.frame(dataset = ds, kind = "param", group = names(params),
                                       level = "", a = unname(params), b = NA)
  re <- ranef(m, condVar = TRUE)
  for (g in c("participant_id", "pair_id")) {
    pv <- attr(re[[g]], "postVar")
    out[[length(out) + 1]] <- data.frame(dataset = ds, kind = "ranef", group = g,
                                         level = rownames(re[[g]]), a = re[[g]][, 1],
                                         b = sqrt(pv[1, 1, ]))
  }
  rows <- seq(1, nrow(d), by = 5)  # every fifth row keeps the file small
  out[[length(out) + 1]] <- data.frame(dataset = ds, kind = "resid", group = "",
                                       level = as.character(rows - 1),
                                       a = unname(fitted(m))[rows], b = unname(resid(m))[rows])
}
res <- do.call(rbind, out)
res$a <- sprintf("%.17g", res$a)
res$b <- ifelse(is.na(res$b), "", sprintf("%.17g", res$b))
write.csv(res, "tests/analysis/r/ranef_reference.csv", row.names = FALSE)
cat(R.version.string, "lme4", as.character(packageVersion("lme4")), "\n")
