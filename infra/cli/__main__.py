"""`python -m infra.cli`: the `sdc` console script."""

import sys

from infra.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
