"""`python -m ipu_keras`: the same as the `ipu-keras` command (see `ipu_keras._src.cli`)."""
import sys

from ipu_keras._src.cli import main

sys.exit(main())
