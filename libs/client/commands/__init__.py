"""Each module registers its verbs on the `podway` parser."""

from libs.client.commands import stack

REGISTRARS = [stack.register]
