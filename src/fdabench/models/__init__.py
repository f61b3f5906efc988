"""Models in a name -> factory registry. Every model has `features` (the body) and `head` (the last
linear layer), so methods that treat body and head differently never special-case an architecture. Importing
this package registers the built-in models and installed plugins (entry-point group `fdabench.models`)."""

from fdabench.core.plugins import load_plugins
from fdabench.models import small, vision  # noqa: F401  (registers the models)
from fdabench.models.base import MODELS, ModelFactory, build_model, model_name, resolved_model_options

load_plugins(MODELS)

__all__ = ["MODELS", "ModelFactory", "build_model", "model_name", "resolved_model_options"]
