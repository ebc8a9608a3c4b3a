"""`python -m ipu_keras`: the same as the `ipu-keras` command (see `ipu_keras.cli`)."""
import sys

from ipu_keras.cli import main

sys.exit(main())
