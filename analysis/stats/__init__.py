"""Statistics on the human data, pingouin-shaped.

Every public function takes a tidy ``DataFrame`` and keyword column names and returns a tidy
``DataFrame`` with one row per effect and at least ``estimate, ci_low, ci_high, p_val``. No I/O,
no printing, no rounding: the CLI writes and formats.
"""
