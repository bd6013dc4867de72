"""The researcher console: accounts, study lifecycle, live progress, exports, payments."""

from flask import Blueprint

bp = Blueprint(
    "researcher",
    __name__,
    url_prefix="/researcher",
    template_folder="templates",
    static_folder="static",
)

from webapp.researcher import (  # noqa: E402,F401  (registers the views and the gate)
    gate,
    looks_routes,
    recruit_routes,
    routes,
    study_routes,
)
