"""Admission decisions: what applying or deleting manifests does to the stored objects, and which events
it emits. Pure: the service loads the objects a batch touches, calls `admit_batch`, and writes the result."""
