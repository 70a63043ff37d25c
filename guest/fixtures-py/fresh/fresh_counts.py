"""A module of the fresh fixture's own, whose global the fixture counts its calls in."""

CALLS = 0
