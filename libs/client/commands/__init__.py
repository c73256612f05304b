"""Each module registers its verbs on the `podway` parser."""

from libs.client.commands import cluster, objects, router, simulate, stack

REGISTRARS = [objects.register, stack.register, cluster.register, router.register, simulate.register]
