"""The CEL engine (the `cel` package), without the interactive shell its package imports on the way: that
shell (prompt_toolkit, rich, pygments) cost 0.4 s at the start of every process that reads a manifest, and
Podway only compiles and evaluates expressions."""

import sys
import types

sys.modules.setdefault("cel.cli", types.ModuleType("cel.cli"))

import cel  # noqa: E402  (after the shell's module is set aside)

__all__ = ["cel"]
