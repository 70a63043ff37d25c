"""sdk/python/zundoko_kit/component.py's `lift_into_model`, natively, on stand-ins for the
bindings' `types` module: where every input record of the kit has the bindings' fields in their
order, the bindings' names are bound to the kit's classes (componentize-py's runtime then lifts a
call's input into them) and `observed_from_wit` hands that input on as it is; where one differs,
nothing is bound and the input is copied, as before. Run by `make test-langs`; inside a component,
host/tests/py_call_fuel.rs shows the fuel it saves and differential.rs that decisions are the same."""
import dataclasses
import pathlib
import sys
import types

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "python"))

from zundoko_kit import component, model  # noqa: E402


def bindings(said_fields=("name", "index", "word", "said_at")):
    """A stand-in for `wit_world.imports.types`: the input records as componentize-py generates
    them (dataclasses, fields in the WIT's order), `Said` with the given fields."""
    wit = types.SimpleNamespace()
    wit.HikawaStatus = dataclasses.make_dataclass("HikawaStatus", ["num_zundokos_said", "kiyoshied", "phase"])
    wit.Hikawa = dataclasses.make_dataclass(
        "Hikawa", ["namespace", "name", "uid", "generation", "created_at", "interval_millis", "params", "status"]
    )
    wit.Said = dataclasses.make_dataclass("Said", list(said_fields))
    wit.Observed = dataclasses.make_dataclass("Observed", ["hikawa", "zundokos", "kiyoshi", "now", "entropy"])
    return wit


def sample(wit):
    status = wit.HikawaStatus(2, False, "Singing")
    hikawa = wit.Hikawa("ns", "h", "uid-1", 1, 0, 500, [("zun", "ズン")], status)
    said = [
        wit.Said(name="h-zundoko-001", index=1, word="ズン", said_at=1_000),
        wit.Said(name="h-zundoko-002", index=2, word="Doko", said_at=None),
    ]
    return wit.Observed(hikawa, said, None, 2_000, 7)


def test_matching_records_are_lifted_into_the_kits_classes_and_handed_on_as_they_are():
    wit = bindings()
    assert component.lift_into_model(wit)
    for name in component.INPUT_RECORDS:
        assert getattr(wit, name) is getattr(model, name), name
    observed = sample(wit)  # what the runtime now constructs
    assert type(observed) is model.Observed and type(observed.zundokos[0]) is model.Said
    assert component.observed_from_wit(observed) is observed, "no copy"
    assert observed.words() == ["ズン", "Doko"] and observed.hikawa.param("zun") == "ズン"


def test_a_record_whose_fields_differ_is_not_bound_and_the_input_is_copied():
    wit = bindings(said_fields=("index", "name", "word", "said_at"))
    originals = {name: getattr(wit, name) for name in component.INPUT_RECORDS}
    assert not component.lift_into_model(wit)
    for name in component.INPUT_RECORDS:
        assert getattr(wit, name) is originals[name], f"{name} left as generated"
    foreign = sample(wit)
    observed = component.observed_from_wit(foreign)
    assert type(observed) is model.Observed and observed is not foreign
    assert [type(z) for z in observed.zundokos] == [model.Said, model.Said]
    assert observed.zundokos[1] == model.Said("h-zundoko-002", 2, "Doko", None), "copied field by field"
    assert observed.hikawa == model.Hikawa("ns", "h", "uid-1", 1, 0, 500, [("zun", "ズン")], model.HikawaStatus(2, False, "Singing"))
