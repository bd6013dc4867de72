"""The researcher console's blueprint, apart from the package that registers its views, so the
view modules import it without importing each other through the package."""

from flask import Blueprint

from webapp.definition_cache import study_definition

bp = Blueprint(
    "researcher",
    __name__,
    url_prefix="/researcher",
    template_folder="templates",
    static_folder="static",
)
# Templates read a study's typed definition as ``study_definition(study)``.
bp.add_app_template_global(study_definition)
