"""The component's entry point (`make rules` builds `app` with componentize-py): the rules, exported."""

from rules import HikawaSong
from zundoko_kit.component import export_rules

Rules = export_rules(HikawaSong())
