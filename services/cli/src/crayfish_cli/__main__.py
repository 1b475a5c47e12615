"""Runs the CLI: `python -m crayfish_cli`."""

import sys

from crayfish_cli.main import main

sys.exit(main())
