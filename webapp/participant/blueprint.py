"""The participant pages' blueprint, apart from the package that registers its views, so the
view modules import it without importing the package that imports them."""

from flask import Blueprint

from webapp.definition_cache import study_definition

bp = Blueprint("participant", __name__, template_folder="templates")
# Templates read a study's typed definition as ``study_definition(study)``.
bp.add_app_template_global(study_definition)
