"""`python -m kvx.cli ...` runs the `kvx` command."""
import sys

from kvx.cli.main import main

sys.exit(main())
