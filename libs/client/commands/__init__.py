"""Each module registers its verbs on the `podway` parser; `libs.client.cli.VERBS` says which module has which
verb, so a run imports only the module of its verb."""
