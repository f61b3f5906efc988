"""Models in a name -> factory registry. Every model has `features` (the body) and `head` (the last
linear layer), so methods that treat body and head differently never special-case an architecture. Importing
this package registers the built-in models and installed plugins (entry-point group `fdabench.models`)."""

from fdabench.core.plugins import load_plugins
from fdabench.core.shipped_members import record_shipped
from fdabench.models import small, vision  # noqa: F401  (registers the models)
from fdabench.models.base import MODELS, ModelFactory, build_model, model_name, resolved_model_options

record_shipped(MODELS)  # before plugins: what a plugin replaces is found (fdabench.cell.plugin_scope)
load_plugins(MODELS)

__all__ = ["MODELS", "ModelFactory", "build_model", "model_name", "resolved_model_options"]
