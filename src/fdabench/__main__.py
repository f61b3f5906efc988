"""`python -m fdabench` is the `fdabench` command."""

import sys

from fdabench.cli import main

sys.exit(main())
