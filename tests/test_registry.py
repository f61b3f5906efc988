import pytest

from fdabench.data import DATASETS, PARTITIONERS
from fdabench.methods import METHODS
from fdabench.models import MODELS
from fdabench.registry import Registry, UnknownNameError


def test_unknown_name_lists_allowed_names():
    registry: Registry[int] = Registry("widget")
    registry.register("b")(1)
    registry.register("a")(2)
    with pytest.raises(UnknownNameError, match="unknown widget 'c'; allowed: a, b"):
        registry.get("c")


def test_double_registration_is_refused():
    registry: Registry[int] = Registry("widget")
    registry.register("a")(1)
    with pytest.raises(ValueError):
        registry.register("a")(2)


def test_builtin_members_are_registered():
    assert {"colored_digits", "rotated_digits", "synthetic_regression", "office_caltech10"} <= set(DATASETS.names())
    assert {"leave_one_domain_out", "shift_and_subsample"} <= set(PARTITIONERS.names())
    assert {"source_only", "target_only", "oracle", "fedda", "fedgp", "dadil_e", "dadil_r"} <= set(METHODS.names())
    assert {"digits_cnn", "mlp", "sigmoid_mlp"} <= set(MODELS.names())


@pytest.mark.parametrize("name", METHODS.names())
def test_method_defaults_satisfy_their_schema(name):
    import jsonschema

    method = METHODS.get(name)
    schema = {"type": "object", "properties": method.hparams_schema, "additionalProperties": False}
    jsonschema.validate(method.default_hparams, schema)
