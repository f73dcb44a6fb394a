import sys
from pathlib import Path

# the CLI tests' helpers and fake runtime (plain modules next to those tests)
CLI_TESTS = Path(__file__).resolve().parents[1] / "cli"
if str(CLI_TESTS) not in sys.path:
    sys.path.insert(0, str(CLI_TESTS))
