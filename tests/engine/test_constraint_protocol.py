"""The grammar's Matcher is what the engine's Constraint Protocol says it asks for."""
import inspect

from kvx.engine.api import Constraint
from kvx.grammar import Matcher


def test_matcher_has_every_constraint_method_with_its_parameters():
    members = [n for n, v in vars(Constraint).items() if inspect.isfunction(v) and not n.startswith("_")]
    assert set(members) == {"allowed_mask", "advance", "forced_tokens", "fork", "complete_values"}
    for name in members:
        want = list(inspect.signature(getattr(Constraint, name)).parameters)
        assert list(inspect.signature(getattr(Matcher, name)).parameters) == want, name
