"""`python -m dws_dagster.cli`: the same as the `dws-dagster` command."""

import sys

from dws_dagster.cli.main import main

sys.exit(main())
