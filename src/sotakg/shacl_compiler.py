"""Kept for code written against 0.1: the compiler now lives in :mod:`sotakg.rules.shacl_compiler`."""

import sys

from .rules import shacl_compiler as _moved

sys.modules[__name__] = _moved
