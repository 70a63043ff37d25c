"""The component's entry point (`make rules` builds `app` with componentize-py): the rules, exported."""

from rules import MyRules
from zundoko_kit.component import export_rules

Rules = export_rules(MyRules())
