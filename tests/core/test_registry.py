import pytest

from fdabench.core.registry import Registry, UnknownNameError, schema_defaults
from fdabench.data import DATASETS, PARTITIONERS
from fdabench.methods import METHODS
from fdabench.models import MODELS


class _Widget:
    name = "a"


class _Gadget:
    name = "b"


def test_unknown_name_lists_allowed_names():
    registry: Registry[type] = Registry("widget")
    registry.register(_Gadget)
    registry.register(_Widget)
    with pytest.raises(UnknownNameError, match="unknown widget 'c'; allowed: a, b"):
        registry.get("c")


def test_double_registration_is_refused():
    registry: Registry[type] = Registry("widget")
    registry.register(_Widget)
    with pytest.raises(ValueError, match="registered twice"):
        registry.register(type("Other", (), {"name": "a"}))


def test_members_register_under_their_own_name():
    registry: Registry = Registry("widget")

    def factory():
        return None

    assert registry.register(factory) is factory and registry.get("factory") is factory
    with pytest.raises(TypeError, match="sets no `name` of its own"):
        registry.register(type("Inheriting", (_Widget,), {}))  # would silently take its parent's name


def test_every_registered_class_is_listed_under_its_name():
    for registry in (DATASETS, PARTITIONERS, METHODS):
        for name, member in registry.items():
            assert member.name == name


def test_option_defaults_come_from_the_schemas():
    """Every option default of every component is its schema's `default` (options without one stay unset)."""
    for registry, schema, defaults in (
        (METHODS, "hparams_schema", "default_hparams"),
        (DATASETS, "options_schema", "default_options"),
        (PARTITIONERS, "options_schema", "default_options"),
    ):
        for name, member in registry.items():
            properties = getattr(member, schema)
            assert getattr(member, defaults) == {
                key: spec["default"] for key, spec in properties.items() if "default" in spec
            }, name
    assert schema_defaults({"x": {"type": "integer"}, "y": {"default": [1]}}) == {"y": [1]}


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
