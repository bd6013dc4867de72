"""The researcher console (read-only for now): study overview and export downloads."""

from flask import Blueprint

bp = Blueprint("researcher", __name__, url_prefix="/researcher", template_folder="templates")

from webapp.researcher import routes  # noqa: E402,F401  (registers the views)
