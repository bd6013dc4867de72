"""Planning a study before it runs and stopping it at the right time.

- :mod:`analysis.plan.spec`: the study YAML's ``analysis:`` block (the pre-registered primary
  test, alpha, direction, exclusion rules, planned N and interim looks), the design the
  simulations need, and the hashes that freeze a pre-registration.
- :mod:`analysis.plan.sequential`: group-sequential boundaries from Lan-DeMets spending
  functions (efficacy, optional futility) and the stopping-rule-adjusted p-value, estimate and
  confidence interval (stage-wise ordering).
- :mod:`analysis.plan.simulate`: the study as defined, simulated under stated effects and
  variance components, and the pre-registered test on each simulated data set.
- :mod:`analysis.plan.power`: power per N with its Monte-Carlo interval and the type-I error
  of the sequential design, simulated in parallel, seeded and resumable.
- :mod:`analysis.plan.looks`: the pre-registered test at each look of a real export.
- :mod:`analysis.plan.prereg`: the pre-registration document and its verification.

Pure computation except :mod:`analysis.plan.power` (which writes its results file as it goes,
to resume) and :mod:`analysis.plan.prereg` (which renders the document the CLI writes).
"""
