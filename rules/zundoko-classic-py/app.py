"""The component's entry point (componentize-py builds `app`): the rules, exported."""

from rules import rules
from zundoko_kit.component import export_rules

Rules = export_rules(rules())
