#!/usr/bin/env python3
"""Run one rexec action through a running `rexec serve`: a thin shim over the rexec_client
package in python/ (installed: the `rexec-client` command does the same). Standard library only."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "python"))
from rexec_client.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
