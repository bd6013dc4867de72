"""The researcher console: accounts, study lifecycle, live progress, exports, payments."""

from webapp.researcher import (  # noqa: F401  (registers the views and the gate)
    gate,
    looks_routes,
    recruit_routes,
    routes,
    study_routes,
)
from webapp.researcher.blueprint import bp

__all__ = ["bp"]
