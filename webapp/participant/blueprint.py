"""The participant pages' blueprint, apart from the package that registers its views, so the
view modules import it without importing the package that imports them."""

from flask import Blueprint

bp = Blueprint("participant", __name__, template_folder="templates")
