"""The researcher console's blueprint, apart from the package that registers its views, so the
view modules import it without importing each other through the package."""

from flask import Blueprint

bp = Blueprint(
    "researcher",
    __name__,
    url_prefix="/researcher",
    template_folder="templates",
    static_folder="static",
)
