"""The product's default rules, in Python: each word is Zun or Doko with equal chance; after
Zun Zun Zun Zun Doko, Ki-yo-shi! one interval later, and nothing more. The same engine as
the Rust rules (rules/zundoko-classic), so both decide alike for the same input and entropy."""

from zundoko_kit import module_info_from_pyproject
from zundoko_kit.song import RuleSet, Words

# Name, version and description from pyproject.toml (read when the component is built).
INFO = module_info_from_pyproject(__file__)


def rules() -> RuleSet:
    return RuleSet(INFO, Words(zun="Zun", doko="Doko", kiyoshi="Ki-yo-shi!"), zuns=4, strict=False)
