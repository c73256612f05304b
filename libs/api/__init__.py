"""Podway's API layer: the v1.36 resource models, defaulting, validation with field paths in the API
server's words, v1.35 conversion, priority resolution, Job expansion, CEL device selectors, and the router's
policy document.

Pure: no I/O, safe to import from libs.core. Import the module you need (`libs.api.manifests`,
`libs.api.jobs`, ...): this package imports nothing itself, so a process that needs one part (the router its
policy) does not pay for the others."""
