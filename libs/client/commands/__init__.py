"""Each module registers its verbs on the `podway` parser."""

from libs.client.commands import objects, stack

REGISTRARS = [objects.register, stack.register]
