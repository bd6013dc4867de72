# Reference numbers for tests/analysis/stats/test_covariates.py: the format effect adjusted for
# age (centred at the participants' mean) and sex (reference: the most frequent level, Male;
# levels with < 5 participants pooled as "other"), as analysis.stats.covariates codes them.
#
# Run from the repository root after `python tests/analysis/r/make_covariate_dataset.py`:
#   Rscript tests/analysis/r/covariates_reference.R
# Writes tests/analysis/r/covariates_reference.csv. Produced with R 4.2.2, lme4 1.1-31,
# lmerTest 3.1-3, geepack (Debian bookworm packages).
suppressPackageStartupMessages({
  library(lme4)
  library(lmerTest)
  library(geepack)
})
d <- read.csv("tests/analysis/r/data/covariates_60x10.csv",
              colClasses = c(participant_id = "character", pair_id = "character"))
people <- d[!duplicated(d$participant_id), ]
d$age_c <- d$age - mean(people$age)
n_sex <- table(people$sex)
d$sex2 <- ifelse(d$sex %in% names(n_sex)[n_sex < 5], "other", d$sex)
d$sex2 <- factor(d$sex2, levels = c("Male", "Female", "other"))
d$format <- factor(d$format, levels = c("original", "summary"))
ctrl <- lmerControl(optimizer = "bobyqa", optCtrl = list(rhoend = 1e-12, maxfun = 1e6),
                    check.conv.singular = "ignore")
m <- lmer(wtp_premium_pct ~ format + age_c + sex2 + (1 | participant_id) + (1 | pair_id), d,
          REML = TRUE, control = ctrl)
co <- summary(m, ddf = "Satterthwaite")$coefficients
out <- data.frame(model = "lmer", term = rownames(co), estimate = co[, "Estimate"],
                  se = co[, "Std. Error"], df = co[, "df"], p = co[, "Pr(>|t|)"])
d <- d[order(match(d$participant_id, unique(d$participant_id))), ]
g <- geeglm(chose_target ~ format + age_c + sex2, id = factor(participant_id, unique(participant_id)),
            data = d, family = binomial, corstr = "exchangeable",
            control = geese.control(epsilon = 1e-12, maxit = 200))
cg <- summary(g)$coefficients
out <- rbind(out, data.frame(model = "geeglm", term = rownames(cg), estimate = cg[, "Estimate"],
                             se = cg[, "Std.err"], df = NA, p = cg[, "Pr(>|W|)"]))
for (k in c("estimate", "se", "df", "p")) out[[k]] <- sprintf("%.17g", out[[k]])
write.csv(out, "tests/analysis/r/covariates_reference.csv", row.names = FALSE)
cat(R.version.string, "geepack", as.character(packageVersion("geepack")), "\n")
