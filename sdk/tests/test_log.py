"""sdk/python/zundoko_kit/component.py's `log`, natively (a line on stderr): the operator's five
levels in any case, and `logging`'s own names for the nearest of them. Run by `make test-langs`."""
import pytest

import kit_process  # noqa: F401: the kit on the path
from zundoko_kit.component import log


@pytest.mark.parametrize(
    "given, shown",
    [("info", "Info"), ("WARN", "Warn"), ("warning", "Warn"), ("Critical", "Error"), ("fatal", "Error"), ("debug", "Debug")],
)
def test_a_level_by_any_of_its_names(capsys, given, shown):
    log(given, "a line")
    assert capsys.readouterr().err == f"[{shown}] a line\n"


def test_an_unknown_level_is_refused_naming_the_levels():
    with pytest.raises(ValueError, match=r"one of \('trace', 'debug', 'info', 'warn', 'error'\) \(or warning, critical, fatal\), not 'notice'"):
        log("notice", "a line")
