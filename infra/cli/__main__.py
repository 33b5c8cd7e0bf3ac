"""`python -m sdc_remediation.infra.cli`: the `sdc` console script."""

import sys

from sdc_remediation.infra.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
