import sys
from pathlib import Path

# engine_fakes lives next to the tests; the repo root holds kvx (when not pip-installed)
for p in (Path(__file__).parent, Path(__file__).parents[2]):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))
